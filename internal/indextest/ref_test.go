package indextest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// refIndex is the reference index that validates the battery: a
// mutex-protected btree of keys shared by every compute node of a pool,
// with the values in remote memory (written once, never reused), so that
// remote.Stats measure what a scan reads. A mutant makes it wrong in one
// way, to show that the battery notices.
type refIndex struct {
	sh     *refShared
	cn     *remote.ComputeNode
	maxKey int
	maxVal int
	mutant string
	closed atomic.Bool

	mu    sync.Mutex // guards free and cache; never held across a verb
	free  []*remote.Client
	cache map[string]refEntry // mutant stale-cache

	crashed atomic.Uint64 // clients an injected fault stopped, dropped
}

// refShared is the structure shared by the compute nodes.
type refShared struct {
	mu     sync.Mutex // never held across a verb
	bt     *btree.BTreeG[refEntry]
	locked map[string]bool // keys being written (mutant crash-stuck)
}

// refEntry is a key and where its value lives.
type refEntry struct {
	key  string
	addr remote.Addr // 0 for an empty value
	n    int
	prev *refEntry // the previous version (mutant stale-get)
	kb   []byte    // the key as bytes, shared with scans (mutant scan-alias)
}

type refRegKey struct {
	pool *remote.Pool
	name string
}

var (
	refRegistry sync.Map // refRegKey → *refShared
	// Operation counters of the mutants, process-wide.
	refPuts, refGets, refDels, refScanned atomic.Int64
)

// refTarget returns the Target of the reference index with the given mutant
// ("" for the correct one).
func refTarget(mutant string) Target {
	tg := Target{
		Name:        "ref",
		MaxKeyLen:   255,
		MaxValueLen: 64 << 10,
		Open: func(cn *remote.ComputeNode, name string) (index.Index, error) {
			key := refRegKey{cn.Pool(), name}
			fresh := &refShared{bt: btree.NewG(8, func(a, b refEntry) bool { return a.key < b.key }), locked: make(map[string]bool)}
			v, _ := refRegistry.LoadOrStore(key, fresh)
			if mutant == "racy-open" {
				// Creates the root without a compare-and-swap: concurrent
				// openers may each install their own.
				if _, ok := refRegistry.Load(key); ok && v == fresh {
					pause(cn)
					v = &refShared{bt: fresh.bt.Clone(), locked: make(map[string]bool)}
					refRegistry.Store(key, v)
				}
			}
			return &refIndex{sh: v.(*refShared), cn: cn, maxKey: 255, maxVal: 64 << 10, mutant: mutant,
				cache: make(map[string]refEntry)}, nil
		},
		Verify: func(ctx context.Context, idx index.Index) error { return idx.(*refIndex).verify(ctx) },
		Lease:  time.Millisecond,
	}
	return tg
}

// pause lets other clients run, also in the simulator, whose scheduler
// switches clients only at verbs: it yields and then reads a word.
func pause(cn *remote.ComputeNode) {
	runtime.Gosched()
	c := cn.NewClient()
	a, err := c.Named(context.Background(), "indextest-pause", 8)
	if err == nil {
		c.Read(context.Background(), a, make([]byte, 8))
	}
}

func (x *refIndex) client() *remote.Client {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.free); n > 0 {
		c := x.free[n-1]
		x.free = x.free[:n-1]
		return c
	}
	return x.cn.NewClient()
}

func (x *refIndex) release(c *remote.Client) {
	if c.Crashed() && x.mutant != "crash-keep-client" {
		x.crashed.Add(1)
		return
	}
	x.mu.Lock()
	x.free = append(x.free, c)
	x.mu.Unlock()
}

// check validates a call's state, context and key.
func (x *refIndex) check(ctx context.Context, key []byte) error {
	if x.closed.Load() && x.mutant != "no-closed" {
		return index.ErrClosed
	}
	if x.mutant != "ignore-ctx" {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if len(key) == 0 {
		return index.ErrEmptyKey
	}
	if len(key) > x.maxKey && x.mutant != "no-key-limit" {
		return fmt.Errorf("%w: %d bytes", index.ErrKeyTooLong, len(key))
	}
	return nil
}

func (x *refIndex) vctx(ctx context.Context) context.Context {
	if x.mutant == "ignore-ctx" {
		return context.Background()
	}
	return ctx
}

// read fetches the value of e.
func (x *refIndex) read(ctx context.Context, e refEntry) ([]byte, error) {
	buf := make([]byte, e.n)
	if e.n == 0 {
		return buf, nil
	}
	c := x.client()
	defer x.release(c)
	if err := c.Read(x.vctx(ctx), e.addr, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// norm is the identity, except for the mutant zero-pad, which drops
// trailing 0x00 bytes as a store padding keys with zeros would.
func (x *refIndex) norm(key []byte) []byte {
	if x.mutant != "zero-pad" {
		return key
	}
	for len(key) > 1 && key[len(key)-1] == 0 {
		key = key[:len(key)-1]
	}
	return key
}

// Get implements index.Index.
func (x *refIndex) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := x.check(ctx, key); err != nil {
		return nil, false, err
	}
	key = x.norm(key)
	if x.mutant == "stale-cache" {
		x.mu.Lock()
		e, ok := x.cache[string(key)]
		x.mu.Unlock()
		if ok {
			if e.key == "" {
				return nil, false, nil
			}
			v, err := x.read(ctx, e)
			return v, err == nil, err
		}
	}
	x.sh.mu.Lock()
	e, ok := x.sh.bt.Get(refEntry{key: string(key)})
	x.sh.mu.Unlock()
	if x.mutant == "stale-cache" {
		x.mu.Lock()
		if ok {
			x.cache[string(key)] = e
		} else {
			x.cache[string(key)] = refEntry{}
		}
		x.mu.Unlock()
	}
	if !ok {
		return nil, false, nil
	}
	if x.mutant == "stale-get" && e.prev != nil && refGets.Add(1)%50 == 0 {
		e = *e.prev
	}
	v, err := x.read(ctx, e)
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// Put implements index.Index.
func (x *refIndex) Put(ctx context.Context, key, value []byte) error {
	if err := x.check(ctx, key); err != nil {
		return err
	}
	if len(value) > x.maxVal && x.mutant != "no-value-limit" {
		return fmt.Errorf("%w: %d bytes", index.ErrValueTooLarge, len(value))
	}
	key = x.norm(key)
	e := refEntry{key: string(key), n: len(value)}
	switch x.mutant {
	case "alias-key":
		e.key = unsafe.String(&key[0], len(key))
	case "scan-alias":
		e.kb = []byte(e.key)
	}
	if x.mutant == "crash-stuck" {
		// Locks the key while its value is written; a crash leaves it
		// locked for good.
		if !x.lock(e.key) {
			return fmt.Errorf("%w: key locked", index.ErrContention)
		}
	}
	if len(value) > 0 {
		c := x.client()
		a, err := c.Alloc(x.vctx(ctx), len(value))
		if err == nil && (x.mutant == "torn-put" || x.mutant == "crash-publish-first") {
			// Publishes the entry before its value is written.
			e.addr = a
			x.sh.mu.Lock()
			x.sh.bt.ReplaceOrInsert(e)
			x.sh.mu.Unlock()
			if x.mutant == "torn-put" {
				pause(x.cn)
			}
		}
		if err == nil {
			err = c.Write(x.vctx(ctx), a, value)
		}
		x.release(c)
		if err != nil {
			if x.mutant == "crash-wrong-repair" && errors.Is(err, remote.ErrCrashed) {
				// "Repairs" the key before the crashed one.
				x.sh.mu.Lock()
				x.sh.bt.DescendLessOrEqual(refEntry{key: e.key}, func(p refEntry) bool {
					if p.key == e.key {
						return true
					}
					x.sh.bt.Delete(p)
					return false
				})
				x.sh.mu.Unlock()
			}
			return err
		}
		e.addr = a
	}
	if x.mutant == "drop-put" && refPuts.Add(1)%1000 == 0 {
		return nil
	}
	x.sh.mu.Lock()
	if x.mutant == "stale-get" {
		if old, ok := x.sh.bt.Get(e); ok {
			old.prev = nil
			e.prev = &old
		}
	}
	x.sh.bt.ReplaceOrInsert(e)
	delete(x.sh.locked, e.key)
	x.sh.mu.Unlock()
	if x.mutant == "stale-cache" {
		x.mu.Lock()
		x.cache[e.key] = e
		x.mu.Unlock()
	}
	return nil
}

// Delete implements index.Index.
func (x *refIndex) Delete(ctx context.Context, key []byte) (bool, error) {
	if err := x.check(ctx, key); err != nil {
		return false, err
	}
	key = x.norm(key)
	if x.mutant == "stale-cache" {
		x.mu.Lock()
		x.cache[string(key)] = refEntry{}
		x.mu.Unlock()
	}
	if x.mutant == "racy-delete" {
		// Decides "found" under one lock and deletes under another.
		x.sh.mu.Lock()
		_, found := x.sh.bt.Get(refEntry{key: string(key)})
		x.sh.mu.Unlock()
		pause(x.cn)
		x.sh.mu.Lock()
		x.sh.bt.Delete(refEntry{key: string(key)})
		x.sh.mu.Unlock()
		return found, nil
	}
	x.sh.mu.Lock()
	if x.sh.locked[string(key)] {
		x.sh.mu.Unlock()
		return false, fmt.Errorf("%w: key locked", index.ErrContention)
	}
	_, found := x.sh.bt.Delete(refEntry{key: string(key)})
	x.sh.mu.Unlock()
	if x.mutant == "delete-lies" && refDels.Add(1)%100 == 0 {
		found = !found
	}
	return found, nil
}

// Scan implements index.Index: batches of 16 pairs, each batch's values
// read in one round trip.
func (x *refIndex) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return x.scan(ctx, lo, hi, 0)
}

// ScanLimit implements index.LimitScanner: Scan's batches, none larger
// than the pairs still to yield (the mutant limit-readahead keeps batches
// of 16; the mutant limit-overrun yields one pair more than limit).
func (x *refIndex) ScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[index.KV, error] {
	return x.scan(ctx, lo, hi, max(limit, 0))
}

// ReverseScanLimit implements index.LimitScanner: ReverseScan, stopped
// after limit pairs.
func (x *refIndex) ReverseScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		n := 0
		for kv, err := range x.ReverseScan(ctx, lo, hi) {
			if !yield(kv, err) || err != nil {
				return
			}
			if n++; n == limit {
				return
			}
		}
	}
}

// scan is the sequence of Scan and ScanLimit (limit 0: no bound).
func (x *refIndex) scan(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[index.KV, error] {
	if limit > 0 && x.mutant == "limit-overrun" {
		limit++
	}
	return func(yield func(index.KV, error) bool) {
		lo, hi := x.bounds(lo, hi)
		if x.closed.Load() && x.mutant != "no-closed" {
			yield(index.KV{}, index.ErrClosed)
			return
		}
		if err := ctx.Err(); err != nil && x.mutant != "ignore-ctx" {
			yield(index.KV{}, err)
			return
		}
		const batch = 16
		cursor := string(lo)
		rank, left := 0, limit
		for {
			var es []refEntry
			n := batch
			if left > 0 && x.mutant != "limit-readahead" {
				n = min(n, left)
			}
			x.sh.mu.Lock()
			visit := func(e refEntry) bool {
				if hi != nil && (e.key > string(hi) || e.key == string(hi) && x.mutant != "scan-hi-inclusive") {
					return false
				}
				es = append(es, e)
				return x.mutant == "scan-eager" || len(es) < n
			}
			if x.mutant == "scan-by-rank" {
				// Pages by position in the range: concurrent inserts and
				// deletes shift the pages.
				i := 0
				x.sh.bt.AscendGreaterOrEqual(refEntry{key: string(lo)}, func(e refEntry) bool {
					if i++; i <= rank {
						return true
					}
					return visit(e)
				})
				rank += len(es)
			} else {
				x.sh.bt.AscendGreaterOrEqual(refEntry{key: cursor}, visit)
			}
			x.sh.mu.Unlock()
			if len(es) == 0 {
				return
			}
			if x.closed.Load() && x.mutant != "no-closed" {
				yield(index.KV{}, index.ErrClosed)
				return
			}
			vals, err := x.values(ctx, es)
			if err != nil {
				yield(index.KV{}, err)
				return
			}
			for i, e := range es {
				if x.mutant == "scan-skip" && refScanned.Add(1)%97 == 0 {
					continue
				}
				k := []byte(e.key)
				if x.mutant == "scan-alias" {
					k = e.kb
				}
				if !yield(index.KV{Key: k, Value: vals[i]}, nil) {
					return
				}
				if left > 0 {
					if left--; left == 0 {
						return
					}
				}
			}
			cursor = es[len(es)-1].key + "\x00"
		}
	}
}

// bounds returns copies of a scan's bounds, taken when its iteration
// starts (a nil hi stays nil), or the caller's slices themselves for the
// mutant scan-reads-bounds.
func (x *refIndex) bounds(lo, hi []byte) ([]byte, []byte) {
	if x.mutant == "scan-reads-bounds" {
		return lo, hi
	}
	return bytes.Clone(lo), bytes.Clone(hi)
}

// values reads the values of es in one round trip.
func (x *refIndex) values(ctx context.Context, es []refEntry) ([][]byte, error) {
	vals := make([][]byte, len(es))
	var ops []remote.Op
	for i, e := range es {
		vals[i] = make([]byte, e.n)
		if e.n > 0 {
			ops = append(ops, remote.Read(e.addr, vals[i]))
		}
	}
	if len(ops) == 0 {
		return vals, nil
	}
	c := x.client()
	defer x.release(c)
	return vals, c.Do(x.vctx(ctx), ops)
}

// ReverseScan implements index.Index: batches of 16 pairs from the top of
// the range down, each batch's values read in one round trip.
func (x *refIndex) ReverseScan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		lo, hi := x.bounds(lo, hi)
		if x.closed.Load() {
			yield(index.KV{}, index.ErrClosed)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(index.KV{}, err)
			return
		}
		const batch = 16
		var es []refEntry
		below := func(e refEntry, ub *string) bool {
			if ub != nil && e.key >= *ub {
				return true // the bound itself: skip
			}
			if e.key < string(lo) || len(es) == batch {
				return false
			}
			es = append(es, e)
			return true
		}
		var ub *string
		if hi != nil {
			h := string(hi)
			ub = &h
		}
		for {
			es = es[:0]
			x.sh.mu.Lock()
			if ub == nil {
				x.sh.bt.Descend(func(e refEntry) bool { return below(e, nil) })
			} else {
				x.sh.bt.DescendLessOrEqual(refEntry{key: *ub}, func(e refEntry) bool { return below(e, ub) })
			}
			x.sh.mu.Unlock()
			if len(es) == 0 {
				return
			}
			vals, err := x.values(ctx, es)
			if err != nil {
				yield(index.KV{}, err)
				return
			}
			for i, e := range es {
				if !yield(index.KV{Key: []byte(e.key), Value: vals[i]}, nil) {
					return
				}
			}
			last := es[len(es)-1].key
			ub = &last
		}
	}
}

// Close implements index.Index.
func (x *refIndex) Close() error {
	if x.closed.Swap(true) {
		return index.ErrClosed
	}
	return nil
}

// lock locks key for the mutant crash-stuck and reports whether it was
// free.
func (x *refIndex) lock(key string) bool {
	x.sh.mu.Lock()
	defer x.sh.mu.Unlock()
	if x.sh.locked[key] {
		return false
	}
	x.sh.locked[key] = true
	return true
}

// Stats reports the clients an injected fault stopped.
func (x *refIndex) Stats() index.Stats { return index.Stats{Crashed: x.crashed.Load()} }

// Recover implements index.Recoverer: a crashed Put leaves nothing (its
// entry is published after its value is written), so there is nothing to
// recover.
func (x *refIndex) Recover(ctx context.Context) (int, error) {
	if err := x.check(ctx, []byte{0}); err != nil {
		return 0, err
	}
	return 0, nil
}

// verify checks that the keys are ordered and every value is readable.
func (x *refIndex) verify(ctx context.Context) error {
	if x.mutant == "verify-fails" {
		return fmt.Errorf("%w: mutant verify-fails", index.ErrCorrupt)
	}
	x.sh.mu.Lock()
	for k := range x.sh.locked {
		x.sh.mu.Unlock()
		return fmt.Errorf("%w: key %q: lock held", index.ErrCorrupt, k)
	}
	var es []refEntry
	x.sh.bt.Ascend(func(e refEntry) bool { es = append(es, e); return true })
	x.sh.mu.Unlock()
	for i, e := range es {
		if i > 0 && es[i-1].key >= e.key {
			return fmt.Errorf("%w: key %q after %q", index.ErrCorrupt, e.key, es[i-1].key)
		}
		if _, err := x.read(ctx, e); err != nil {
			return fmt.Errorf("%w: value of %q: %v", index.ErrCorrupt, e.key, err)
		}
	}
	return nil
}
