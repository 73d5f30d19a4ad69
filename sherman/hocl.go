package sherman

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// HOCL, Sherman's hierarchical on-chip lock.
//
// Global level: a page is guarded by the 64-bit word hash(page) mod
// LockTableSize of the on-chip region of the memory node holding the page.
// 0 is free; a holder stores its registry tag (session.tag) with
// CAS(0 → tag) and frees it with a WRITE of 0. Locks are never nested (an
// operation releases a page before locking another), so hash collisions
// cannot deadlock.
//
// Local level: every compute node mirrors each global word with a FIFO queue.
// Only the head of the queue talks to the memory node; when it releases and
// another local client is queued, it may keep the global word set and hand
// it over, skipping both the unlock and the next CAS. One global acquisition
// serves at most HandOver consecutive holders. Waiting goes through
// remote.Client.Wait/Signal; the small mutex of an entry is never held
// across a verb or a wait.
//
// Tags and hand-over (docs/sherman-layout.md, "Crash recovery"): a handed-
// over global word still names the previous holder, so the receiver re-tags
// it with CAS(word: previous → own) in the batch of its first READ of the
// page (lockRead), before it writes anything. A word therefore names a
// client that is still working on the page or has finished with it, never
// one that finished while a live client writes. A client that crashed never
// hands the global word over: the local lock passes on without it, and the
// word, which may guard a page its crash tore, waits for a takeover
// (recovery.go). A receiver that crashed before its re-tag was known to
// land leaves the word naming itself or the previous holder, which is alive
// and finished with the page, and no judgement frees a live client's word:
// the compute node notes the word in the local entry (localLock.stale),
// where the next local holder takes it with CAS(word: previous → own), and
// frees it with another client (markBuried), lest waiters on other compute
// nodes spin on a live tag.

// lockTable is a compute node's local lock table.
type lockTable struct {
	size     int // global lock words per memory node
	handOver int // holders served per global acquisition
	locks    []localLock
}

// localLock is one entry of the local table.
type localLock struct {
	mu         sync.Mutex
	held       bool    // a local client holds the lock
	served     int     // holders served by the current global acquisition
	head, tail *waiter // FIFO of local clients waiting
	// stale is the tag of a previous holder that a crashed receiver of a
	// hand-over left in the global word without re-tagging it (or 0): the
	// word holds it, the crashed receiver's tag or anything since a
	// takeover. The next acquire expects it in its first CAS.
	stale uint64
}

// waiter is a client queued on a local lock. Its fields are guarded by the
// lock's mu.
type waiter struct {
	c       *remote.Client
	next    *waiter
	granted bool   // the lock was passed to this waiter
	global  bool   // ... with the global word still held (a hand-over)
	val     uint64 // ... holding this value (the previous holder's tag)
}

// held is a lock acquired by a session.
type held struct {
	l      *localLock
	page   remote.Addr // the page locked
	word   remote.Addr // global lock word
	global bool        // the global word is set on our behalf
	val    uint64      // the global word's value while global
	retag  bool        // handed over: val is the previous holder's tag
	// from is when others may have started to act on the word: see
	// registry.Node.Judged (stillHeld).
	from time.Duration
}

func newLockTable(memoryNodes, size, handOver int) *lockTable {
	return &lockTable{size: size, handOver: handOver, locks: make([]localLock, memoryNodes*size)}
}

// mix64 is a 64-bit finalizer (MurmurHash3's fmix64) spreading page addresses
// over lock words.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// lockWord returns the global lock word of page a.
func (lt *lockTable) lockWord(a remote.Addr) (idx int, word remote.Addr) {
	i := int(mix64(uint64(a)) % uint64(lt.size))
	return a.MN()*lt.size + i, remote.OnChip(a.MN(), uint64(i)*8)
}

var zeroWord [8]byte

// lock acquires the HOCL lock of page a: first the local entry (queueing
// behind other local clients), then, unless the previous local holder handed
// the global word over, the global word by CAS. A handed-over lock comes
// back with retag set: the caller re-tags the word before it writes
// (lockRead). On error nothing is held.
func (s *session) lock(ctx context.Context, a remote.Addr) (held, error) {
	lt := s.t.locks
	idx, word := lt.lockWord(a)
	h := held{l: &lt.locks[idx], page: a, word: word}
	l := h.l
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
	} else {
		w := &s.w
		w.next, w.granted, w.global, w.val = nil, false, false, 0
		if l.tail == nil {
			l.head = w
		} else {
			l.tail.next = w
		}
		l.tail = w
		l.mu.Unlock()
		for {
			werr := s.c.Wait(ctx)
			l.mu.Lock()
			granted, global, val := w.granted, w.global, w.val
			if !granted && werr != nil {
				l.dequeue(w)
			}
			l.mu.Unlock()
			if granted {
				h.global, h.val, h.retag = global, val, global
				if werr != nil {
					s.pass(ctx, h)
					return held{}, werr
				}
				break
			}
			if werr != nil {
				return held{}, werr
			}
		}
		if h.global {
			s.t.stats.handOvers.Add(1)
			s.locked = true
			return h, nil
		}
	}
	if err := s.acquire(ctx, a, &h); err != nil {
		return held{}, err
	}
	s.locked = true
	return h, nil
}

// Judging a global lock's holder: after judgeFirst failed CASes, and then
// every judgeEvery, a waiter asks the registry whether the tag in the word
// is dead (one round trip).
const (
	judgeFirst = 4
	judgeEvery = 16
)

// acquire takes the global word of h (whose local entry the session holds)
// by CAS, judging the holder every judgeEvery failures and taking the lock
// over from a dead one (recovery.go). A word the entry notes stale is
// expected to hold the noted tag in the first CAS, not 0. On error it
// passes the local lock on.
func (s *session) acquire(ctx context.Context, a remote.Addr, h *held) error {
	watch := s.prewatch[h.word]
	if watch == nil {
		watch = new(registry.Watch)
	}
	h.l.mu.Lock()
	expect := h.l.stale
	h.l.stale = 0
	h.l.mu.Unlock()
	for i := 0; ; i++ {
		h.from = s.m.LockedAt(s.c.Now())
		cctx := ctx
		if expect != 0 {
			cctx = context.WithoutCancel(ctx) // a CAS that did not run would lose the note
		}
		old, err := s.c.CAS(cctx, h.word, expect, s.tag)
		if err != nil && expect != 0 {
			// The word holds the note's tag or, if the CAS landed, the
			// session's: received like a hand-over, for pass.
			h.global, h.val, h.retag = true, expect, true
			s.pass(ctx, *h)
			return err
		}
		if err == nil && old == expect {
			break
		}
		expect = 0
		if err == nil && i >= judgeFirst && (i-judgeFirst)%judgeEvery == 0 {
			s.touch(ctx)
			if s.t.hasUnburied.Load() {
				// The holder may be a crashed client of this compute node
				// not marked dead yet, which nothing else would ever judge
				// dead, while the node's other operations queue behind
				// this one (markMembers).
				_ = s.markMembers(ctx)
			}
			h.from = s.m.LockedAt(s.c.Now())
			var won bool
			if won, err = s.takeover(ctx, h, old, watch); err == nil && won {
				break
			}
			if errors.Is(err, ErrLeaseLost) {
				err = nil // taken over from this repairer while it was silent: try again
			}
		}
		if err == nil && i >= 64*s.t.opts.RetryBudget {
			err = fmt.Errorf("sherman: global lock %v of page %v still held by %#x after %d CASes: %w",
				h.word, a, old, i+1, index.ErrContention)
		}
		if err != nil {
			s.pass(ctx, *h)
			return err
		}
		s.t.stats.casFails.Add(1)
		s.c.Backoff(i)
	}
	s.t.stats.globalLocks.Add(1)
	h.l.mu.Lock()
	h.l.served = 1
	h.l.mu.Unlock()
	h.global, h.val, h.retag = true, s.tag, false
	return nil
}

// lockRead locks page a and reads it (at level, -1 if unknown) into buf. A
// lock received by hand-over is re-tagged in the batch of the READ: if the
// CAS fails, a repairer took the word over from the previous holder (judged
// dead) and the session acquires the word anew before it reads again.
func (s *session) lockRead(ctx context.Context, a remote.Addr, level int, buf []byte) (held, page, error) {
	h, err := s.lock(ctx, a)
	if err != nil {
		return held{}, page{}, err
	}
	return s.readLocked(ctx, h, a, level, buf)
}

// readLocked is lockRead once the local lock is held: h's global word is
// set on the session's behalf, or was handed over (re-tagged here).
func (s *session) readLocked(ctx context.Context, h held, a remote.Addr, level int, buf []byte) (held, page, error) {
	if h.retag {
		b := buf[:s.t.g.bytesFor(level)]
		ops := []remote.Op{remote.CAS(h.word, h.val, s.tag), remote.Read(a, b)}
		h.from = s.m.LockedAt(s.c.Now())
		// Not cancellable: a batch that did not run would leave unknown
		// whether the word is still the previous holder's.
		if err := s.c.Do(context.WithoutCancel(ctx), ops); err != nil {
			return held{}, page{}, errors.Join(err, s.unlock(ctx, h))
		}
		if ops[0].Old == h.val {
			h.val, h.retag = s.tag, false
			if p := (page{&s.t.g, b}); p.valid() && (level < 0 || p.level() == level) {
				return h, p, nil
			}
		} else {
			h.global, h.retag = false, false
			if err := s.acquire(ctx, a, &h); err != nil {
				return held{}, page{}, err
			}
		}
	}
	p, err := s.read(ctx, a, level, buf)
	if err != nil {
		return held{}, page{}, errors.Join(err, s.unlock(ctx, h))
	}
	return h, p, nil
}

// lockUnlock locks page a and unlocks it at once, writing nothing, for
// what locking does on the way: wait for a live holder, take the word over
// from a dead one and repair its page, take a word noted stale.
func (s *session) lockUnlock(ctx context.Context, a remote.Addr) error {
	h, err := s.lock(ctx, a)
	if err != nil {
		return err
	}
	return s.unlock(ctx, h)
}

// dequeue removes w from l's queue; l.mu must be held.
func (l *localLock) dequeue(w *waiter) {
	var prev *waiter
	for x := l.head; x != nil; prev, x = x, x.next {
		if x != w {
			continue
		}
		if prev == nil {
			l.head = x.next
		} else {
			prev.next = x.next
		}
		if l.tail == x {
			l.tail = prev
		}
		return
	}
}

// unlock writes data (WRITE verbs to the locked page's memory node, possibly
// none: pageWrite builds them with their redo record) and releases h. If a
// local client waits and the global word has served fewer than HandOver
// holders, the word stays set and is handed over; otherwise the unlock
// WRITE is appended to the same batch as a separate verb after the data, so
// that it lands after every line of the data. The release happens even if
// ctx is cancelled. Before writing data it sends the compute node's
// heartbeat if one is due; if the node was silent long enough that others
// may have taken its locks over (registry.Member.Touch reports stale), it
// checks that the word still holds its tag and fails with ErrLeaseLost,
// writing nothing, if not.
func (s *session) unlock(ctx context.Context, h held, data ...remote.Op) error {
	ctx = context.WithoutCancel(ctx)
	by := registry.NoDeadline
	if len(data) > 0 && h.global {
		var err error
		if by, err = s.stillHeld(ctx, &h); err != nil {
			s.pass(ctx, h)
			return err
		}
	}
	handOver := false
	if h.global {
		h.l.mu.Lock()
		handOver = h.l.head != nil && h.l.served < s.t.locks.handOver
		h.l.mu.Unlock()
	}
	ops := append(s.ops[:0], data...)
	release := h.global && !handOver
	if release {
		ops = append(ops, remote.Write(h.word, zeroWord[:]))
	}
	s.ops = ops[:0]
	var err error
	switch {
	case len(data) > 0:
		// Posted by the deadline stillHeld allows; a stalled client checks
		// again, RetryBudget times in a row at most: with a lease below the
		// client's latency every batch is late, and it would check for
		// ever. It then gives the word back by a CAS of the value it holds
		// (no takeover can meet it; nothing was written under it) and
		// fails.
		for late := 0; ; late++ {
			if err = s.c.DoBy(ctx, ops, by); !errors.Is(err, remote.ErrLate) {
				break
			}
			if late >= s.t.opts.RetryBudget {
				if _, err = s.c.CAS(ctx, h.word, h.val, 0); err == nil {
					err = fmt.Errorf("%w: a write under global lock %v was past its deadline %d times in a row (Options.Lease %v too short for the client's latency?)",
						index.ErrContention, h.word, late+1, s.t.opts.Lease)
				}
				h.global = false
				break
			}
			if by, err = s.stillHeld(ctx, &h); err != nil {
				break
			}
		}
	case len(ops) > 0:
		err = s.releaseWord(ctx, &h)
	}
	if release && !s.c.Crashed() {
		h.global = false // released, or lost with the error
	}
	s.pass(ctx, h)
	return err
}

// releaseWord releases the global word h holds, with nothing written under
// it: nothing depends on when the release lands, so it is posted without
// waiting, but like every batch under the lock it leaves by the deadline of
// stillHeld, and not at all if the word was taken over (a release stalled
// past a lease landed after a waiter had taken the word over and freed a
// later holder's lock, and two holders then tore a page for good: RunStalls
// seed 8056 of TestCrashBattery). A release late RetryBudget times in a
// row gives the word back by a CAS of the value it holds instead.
func (s *session) releaseWord(ctx context.Context, h *held) error {
	for late := 0; late < s.t.opts.RetryBudget; late++ {
		by, err := s.stillHeld(ctx, h)
		if errors.Is(err, ErrLeaseLost) {
			return nil // taken over: not this session's to release
		}
		if err != nil {
			return err
		}
		ops := append(s.ops[:0], remote.Write(h.word, zeroWord[:]))
		s.ops = ops[:0]
		if err := s.c.PostBy(ctx, ops, by); !errors.Is(err, remote.ErrLate) {
			return err
		}
	}
	_, err := s.c.CAS(ctx, h.word, h.val, 0)
	return err
}

// pass hands the local lock to the next local waiter (with the global word
// if h.global) or frees it. If the global word is still set but nobody waits
// any more (a waiter gave up), the word is released first. A crashed
// client's global word is neither handed over nor released: a page under it
// may be torn, and the next holder takes it over (recovery.go). But a word
// handed over to the crashed client and not known to be re-tagged (h.retag)
// guards pages nobody tore and may name a live client: the entry notes it
// stale, and the compute node frees it (markBuried).
func (s *session) pass(ctx context.Context, h held) {
	s.locked = false
	var stale uint64
	if s.c.Crashed() {
		if h.global && h.retag {
			stale = h.val
			s.t.noteStale(h.page)
		}
		h.global = false
	}
	l := h.l
	for {
		l.mu.Lock()
		if stale != 0 {
			l.stale = stale
		}
		w := l.head
		if w == nil && h.global {
			l.mu.Unlock()
			_ = s.releaseWord(context.WithoutCancel(ctx), &h) // a failure means the pool is closed
			h.global = false
			continue
		}
		if w == nil {
			l.held, l.served = false, 0
			l.mu.Unlock()
			return
		}
		l.head = w.next
		if l.head == nil {
			l.tail = nil
		}
		w.next, w.granted, w.global, w.val = nil, true, h.global, h.val
		if h.global {
			l.served++
		} else {
			l.served = 0
		}
		c := w.c
		l.mu.Unlock()
		c.Signal()
		return
	}
}
