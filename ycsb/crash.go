package ycsb

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// Crash injection (Config.CrashRate) and the lost-acknowledged check.
//
// Every write of a run carries its id in its value (writeValue): the first
// 8 bytes, the rest derived from the id and the key, so a value names the
// one write that wrote it and a torn or misplaced value matches none. With
// crash injection the runner keeps a history: per written key the latest
// invocation time of an acknowledged write to it, and per write the time
// it was acknowledged (unknown if it crashed or failed: it may take effect
// at any time, even later, when another client repairs what it left). At
// the end every written key is read back once. Since a value names its
// write, the key lost an acknowledged write if
//
//   - it is missing though a write to it was acknowledged (YCSB deletes
//     nothing), or
//   - its value was written by a write acknowledged before an acknowledged
//     write to the key was invoked: that write must be ordered after it,
//     so the final value cannot be the older one's.
//
// Both rules are sound under any concurrency: they flag only outcomes that
// no linearization allows. Times are the pool's clock, virtual in the
// simulator, where a write acknowledged at t has landed by t and one
// invoked at t posts nothing before t.

// MaxCrashRate bounds Config.CrashRate: a crash per microsecond of virtual
// time, about one per few dozen operations of a saturated cluster.
const MaxCrashRate = 1e6

// ErrNotRecoverable: Config.CrashRate is set but the index does not
// implement index.Recoverer.
var ErrNotRecoverable = errors.New("ycsb: crash injection needs an index that recovers from crashes (index.Recoverer)")

// Verifier is implemented by indexes that check their whole structure
// (both trees of this module). After a run with crash injection the runner
// calls Verify on compute node 0's index, with no operation in flight, and
// reports its error in CrashResult.Verify.
type Verifier interface {
	Verify(ctx context.Context) error
}

// CrashResult is what a run with crash injection (Config.CrashRate)
// reports besides the measurements. After the run phase the runner stops
// the injection, calls Recover on every compute node's index, Verify if
// the index has it (Verifier), and reads back every key ever written.
type CrashResult struct {
	// CrashRate is Config.CrashRate, crashes per second of virtual time.
	CrashRate float64 `json:"crash_rate"`
	// Crashes is the number of clients the injection stopped, and
	// CrashedOps the operations that returned remote.ErrCrashed: their
	// outcome is unknown, and they count neither as completed (throughput,
	// latency) nor as errors. The two differ if a crash stops a client
	// outside the runner's operations (an index's background client) or
	// fails several of them (writes combined into the stopped client's).
	Crashes    uint64 `json:"crashes"`
	CrashedOps int64  `json:"crashed_ops"`
	// RecoveredLocks is the locks taken over from dead holders: those the
	// indexes took over during the run (index.Stats.Recovered, summed over
	// compute nodes, read before Recover) plus those Recover returned.
	RecoveredLocks int64 `json:"recovered_locks"`
	// LostAcknowledged is the number of keys that lost an acknowledged
	// write: missing, holding a value older than an acknowledged write, or
	// holding a value no write of the run wrote to them (torn or
	// misplaced). It must be 0.
	LostAcknowledged int64 `json:"lost_acknowledged"`
	// Verify is "ok", or the first error of recovery and the checks, in
	// this order: Recover, Verify, reading the keys back, and the first key
	// (in key order) whose value is wrong, lost write or not.
	Verify string `json:"verify"`
}

// Phases of a run, which number its writers.
const (
	loadPhase = iota
	warmPhase
	runPhase
	numPhases
)

// seqBits is the bits of a write id that number the writes of one writer;
// the bits above number the writer.
const seqBits = 40

// writer numbers the writes of one client in one phase: write s of writer
// w (from 1, so that no id is 0) has id w<<seqBits | s.
type writer struct {
	next uint64          // the id of the next write
	acks []time.Duration // with a history: per write, when it was acknowledged, or unknownAck
}

func newWriter(phase, client, clients int) *writer {
	return &writer{next: uint64(phase*clients+client+1) << seqBits}
}

// writeValue fills v with the value of write id to key: the id's 8 bytes,
// little-endian (as many as fit), then bytes drawn from a generator seeded
// by the id and the key's hash.
func writeValue(v []byte, id uint64, key []byte) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], id)
	n := copy(v, b[:])
	s := id ^ fnv1a(key)
	for n < len(v) {
		// splitmix64
		s += 0x9E3779B97F4A7C15
		z := (s ^ s>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		binary.LittleEndian.PutUint64(b[:], z^z>>31)
		n += copy(v[n:], b[:])
	}
}

func fnv1a(b []byte) uint64 {
	h := uint64(0xCBF29CE484222325)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// Sentinel times of the history.
const (
	// noAck is the latest acknowledged invocation of a key that no
	// acknowledged write wrote.
	noAck = time.Duration(-1)
	// unknownAck is the acknowledgement time of a write whose outcome is
	// unknown (crashed or failed): it may take effect at any time.
	unknownAck = time.Duration(math.MaxInt64)
)

// history is what the lost-acknowledged check records of a run: 16 bytes
// or so per write and a map entry (the key and about 80 bytes) per written
// key, which Estimate counts (CheckBytes).
type history struct {
	valueSize int
	writers   []*writer // by writer number

	mu   sync.Mutex               // guards keys while the phases run; held only to record
	keys map[string]time.Duration // per written key, the latest invocation of an acknowledged write to it, or noAck
}

func newHistory(valueSize, clients int) *history {
	return &history{valueSize: valueSize, writers: make([]*writer, numPhases*clients+1),
		keys: make(map[string]time.Duration)}
}

// add registers w, so that its writes can be looked up. Nil-safe.
func (h *history) add(w *writer) {
	if h != nil {
		h.writers[w.next>>seqBits] = w
	}
}

// record records a write of w to key, invoked at invoked and returned at
// returned with err (nil: acknowledged). Nil-safe.
func (h *history) record(w *writer, key []byte, invoked, returned time.Duration, err error) {
	if h == nil {
		return
	}
	ack := unknownAck
	if err == nil {
		ack = returned
	}
	w.acks = append(w.acks, ack)
	h.mu.Lock()
	defer h.mu.Unlock()
	last, ok := h.keys[string(key)]
	switch {
	case !ok && err != nil:
		h.keys[string(key)] = noAck
	case !ok || err == nil && invoked > last:
		h.keys[string(key)] = invoked
	}
}

// ackTime returns when the write that wrote value v to key was
// acknowledged (unknownAck if its outcome is unknown), or false if no
// write of the run wrote v to key.
func (h *history) ackTime(key, v []byte) (time.Duration, bool) {
	if len(v) != h.valueSize || len(v) < 8 {
		return 0, false
	}
	id := binary.LittleEndian.Uint64(v)
	w, seq := id>>seqBits, id&(1<<seqBits-1)
	if w >= uint64(len(h.writers)) || h.writers[w] == nil || seq >= uint64(len(h.writers[w].acks)) {
		return 0, false
	}
	want := make([]byte, len(v))
	writeValue(want, id, key)
	if !bytes.Equal(v, want) {
		return 0, false
	}
	return h.writers[w].acks[seq], true
}

// check reads key back through ix and judges it: lost reports a lost
// acknowledged write, err describes what is wrong (a lost write, a value
// no write of the key wrote, or the read's error).
func (h *history) check(ctx context.Context, ix index.Index, key string) (lost bool, err error) {
	k := []byte(key)
	last := h.keys[key]
	v, found, err := ix.Get(ctx, k)
	switch {
	case err != nil:
		return false, fmt.Errorf("reading back %s: %w", quoteKey(k), err)
	case !found && last == noAck:
		return false, nil
	case !found:
		return true, fmt.Errorf("key %s is missing; a write to it invoked at %v was acknowledged", quoteKey(k), last)
	}
	at, ok := h.ackTime(k, v)
	switch {
	case !ok:
		return last != noAck, fmt.Errorf("key %s holds a value no write of the run wrote to it (torn or misplaced): %x", quoteKey(k), v)
	case at < last:
		return true, fmt.Errorf("key %s holds the value of a write acknowledged at %v, before an acknowledged write to it was invoked at %v",
			quoteKey(k), at, last)
	}
	return false, nil
}

// checkRecoverable fails with ErrNotRecoverable unless every index of the
// run implements index.Recoverer.
func (r *runner) checkRecoverable() error {
	for _, ix := range r.idx {
		if _, ok := ix.(index.Recoverer); !ok {
			return fmt.Errorf("%w: %s does not implement it", ErrNotRecoverable, r.cfg.Index)
		}
	}
	return nil
}

// crashed reports whether err says that an injected fault stopped the
// operation's client: its outcome is unknown.
func crashed(err error) bool { return errors.Is(err, remote.ErrCrashed) }

// recoverAndCheck runs after the run phase, once the injection stopped
// (crashes is the number it injected): it recovers the structure on every
// compute node, verifies it and reads every written key back. Every
// injected crash stopped a client inside an operation of its own index,
// which therefore saw it stop and judged it dead at once: no holder is
// dead for less than a lease, and Recover leaves no lock without waiting
// for one.
func (r *runner) recoverAndCheck(ctx context.Context, run phase, crashes uint64) *CrashResult {
	cr := &CrashResult{CrashRate: r.cfg.CrashRate, Crashes: crashes}
	for i := range run.clients {
		cr.CrashedOps += run.clients[i].crashed
	}
	for _, ix := range r.idx {
		if sr, ok := ix.(StatsReporter); ok {
			cr.RecoveredLocks += int64(sr.Stats().Recovered)
		}
	}
	var recErr, verErr error
	r.pool.Go(func() {
		for i, ix := range r.idx {
			n, err := ix.(index.Recoverer).Recover(ctx)
			cr.RecoveredLocks += int64(n)
			if err != nil && recErr == nil {
				recErr = fmt.Errorf("recover on compute node %d: %w", i, err)
			}
		}
		if v, ok := r.idx[0].(Verifier); ok {
			if err := v.Verify(ctx); err != nil {
				verErr = fmt.Errorf("verify: %w", err)
			}
		}
	})
	waitErr := r.pool.Wait()
	lost, readErr := r.readBack(ctx)
	cr.LostAcknowledged = lost
	cr.Verify = "ok"
	if err := cmp.Or(recErr, verErr, waitErr, readErr); err != nil {
		cr.Verify = err.Error()
	}
	return cr
}

// readBack checks every written key (history.check), the keys in order
// split over every client of the run, and returns the number of keys that
// lost an acknowledged write and the first error in key order.
func (r *runner) readBack(ctx context.Context) (int64, error) {
	keys := make([]string, 0, len(r.hist.keys))
	for k := range r.hist.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	k := r.cfg.ClientsPerCN
	n := len(r.idx) * k
	type tally struct {
		lost int64
		err  error
	}
	tallies := make([]tally, n)
	for i := range n {
		lo, hi := split(int64(len(keys)), i, n)
		ix, t := r.idx[i/k], &tallies[i]
		r.pool.Go(func() {
			for _, key := range keys[lo:hi] {
				if ctx.Err() != nil {
					t.err = cmp.Or(t.err, ctx.Err())
					return
				}
				lost, err := r.hist.check(ctx, ix, key)
				if lost {
					t.lost++
				}
				t.err = cmp.Or(t.err, err)
			}
		})
	}
	err := r.pool.Wait()
	var lost int64
	for _, t := range tallies {
		lost += t.lost
		err = cmp.Or(err, t.err)
	}
	return lost, err
}
