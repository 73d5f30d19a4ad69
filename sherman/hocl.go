package sherman

import (
	"context"
	"fmt"
	"sync"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// HOCL, Sherman's hierarchical on-chip lock.
//
// Global level: a page is guarded by the 64-bit word hash(page) mod
// LockTableSize of the on-chip region of the memory node holding the page.
// 0 is free; a holder stores its client's tag with CAS(0 → tag) and frees it
// with a WRITE of 0. Locks are never nested (an operation releases a page
// before locking another), so hash collisions cannot deadlock.
//
// Local level: every compute node mirrors each global word with a FIFO queue.
// Only the head of the queue talks to the memory node; when it releases and
// another local client is queued, it may keep the global word set and hand
// it over, skipping both the unlock and the next CAS. One global acquisition
// serves at most HandOver consecutive holders. Waiting goes through
// remote.Client.Wait/Signal; the small mutex of an entry is never held
// across a verb or a wait.

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
}

// waiter is a client queued on a local lock. Its fields are guarded by the
// lock's mu.
type waiter struct {
	c       *remote.Client
	next    *waiter
	granted bool // the lock was passed to this waiter
	global  bool // ... with the global word still held (a hand-over)
}

// held is a lock acquired by a session.
type held struct {
	l      *localLock
	word   remote.Addr // global lock word
	global bool        // the global word is set on our behalf
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
// the global word over, the global word by CAS.
func (s *session) lock(ctx context.Context, a remote.Addr) (held, error) {
	lt := s.t.locks
	idx, word := lt.lockWord(a)
	h := held{l: &lt.locks[idx], word: word}
	l := h.l
	l.mu.Lock()
	if !l.held {
		l.held = true
		l.mu.Unlock()
	} else {
		w := &s.w
		w.next, w.granted, w.global = nil, false, false
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
			granted, global := w.granted, w.global
			if !granted && werr != nil {
				l.dequeue(w)
			}
			l.mu.Unlock()
			if granted {
				h.global = global
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
			return h, nil
		}
	}
	for i := 0; ; i++ {
		old, err := s.c.CAS(ctx, word, 0, s.tag)
		if err == nil && old == 0 {
			break
		}
		if err == nil && i >= 64*s.t.opts.RetryBudget {
			err = fmt.Errorf("sherman: global lock %v of page %v still held by %#x after %d CASes: %w",
				word, a, old, i+1, index.ErrContention)
		}
		if err != nil {
			s.pass(ctx, h)
			return held{}, err
		}
		s.t.stats.casFails.Add(1)
		s.c.Backoff(i)
	}
	s.t.stats.globalLocks.Add(1)
	l.mu.Lock()
	l.served = 1
	l.mu.Unlock()
	h.global = true
	return h, nil
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
// none) and releases h. If a local client waits and the global word has
// served fewer than HandOver holders, the word stays set and is handed over;
// otherwise the unlock WRITE is appended to the same batch as a separate
// verb after the data, so that it lands after every line of the data. The
// release happens even if ctx is cancelled.
func (s *session) unlock(ctx context.Context, h held, data ...remote.Op) error {
	ctx = context.WithoutCancel(ctx)
	handOver := false
	if h.global {
		h.l.mu.Lock()
		handOver = h.l.head != nil && h.l.served < s.t.locks.handOver
		h.l.mu.Unlock()
	}
	ops := append(s.ops[:0], data...)
	if h.global && !handOver {
		ops = append(ops, remote.Write(h.word, zeroWord[:]))
		h.global = false
	}
	s.ops = ops[:0]
	var err error
	switch {
	case len(data) > 0:
		err = s.c.Do(ctx, ops)
	case len(ops) > 0:
		// A bare unlock: nothing depends on its completion.
		err = s.c.Post(ctx, ops)
	}
	s.pass(ctx, h)
	return err
}

// pass hands the local lock to the next local waiter (with the global word
// if h.global) or frees it. If the global word is still set but nobody waits
// any more (a waiter gave up), the word is released first.
func (s *session) pass(ctx context.Context, h held) {
	l := h.l
	for {
		l.mu.Lock()
		w := l.head
		if w == nil && h.global {
			l.mu.Unlock()
			s.c.Post(context.WithoutCancel(ctx), []remote.Op{remote.Write(h.word, zeroWord[:])})
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
		w.next, w.granted, w.global = nil, true, h.global
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
