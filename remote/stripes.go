package remote

import (
	"math/bits"
	"sync"
)

// The in-process transports (local, shm) apply a batch's verbs on the
// caller's goroutine, word by word. A goroutine preempted in the middle of
// a WRITE would leave its words landing long after the batch left, which
// no NIC does: a holder that passed its deadline check (DoBy) could then be
// judged dead, its lock taken over and its leaf repaired, and its last
// words land after the repair, interleaved with the repairer's, leaving a
// record torn under a free lock for good (docs/recovery.md, "Stale
// writers"). So a batch that changes memory holds the stripes its changing
// verbs touch while it runs, and checks its deadline after it took them: a
// batch runs as a whole before or after any other changing batch of the
// process that overlaps it, and a batch that left by its deadline has
// landed, for every later writer, by the time that writer's verbs run.
// READs take no stripe: readers validate what they read (torn reads are
// part of every protocol), and scans stay as fast as before.
const (
	stripeShift = 8    // a stripe covers 256-byte lines of a memory node
	stripeCount = 1024 // stripes in the process, a power of two
)

// stripeSet is a set of stripes: up to len(few) of them in increasing
// order, or else (many) one bit each.
type stripeSet struct {
	n    int
	few  [4]uint16
	many *[stripeCount / 64]uint64
}

// writeStripes is the process's stripes of memory-node lines.
var writeStripes [stripeCount]struct {
	sync.Mutex
	_ [64 - 8]byte // one cache line each
}

// add adds the stripes that the verb changing n bytes at a touches.
func (s *stripeSet) add(a Addr, n uint64) {
	first, last := a.Offset()>>stripeShift, (a.Offset()+max(n, 1)-1)>>stripeShift
	if last-first >= stripeCount {
		s.spill()
		for i := range s.many {
			s.many[i] = ^uint64(0)
		}
		return
	}
	base := uint64(a) >> 47 // the memory node and the region
	for line := first; line <= last; line++ {
		s.insert(uint16(stripeOf(base, line)))
	}
}

// empty reports whether the set has no stripe.
func (s *stripeSet) empty() bool { return s.n == 0 && s.many == nil }

// insert adds stripe i.
func (s *stripeSet) insert(i uint16) {
	if s.many == nil {
		j := 0
		for j < s.n && s.few[j] < i {
			j++
		}
		switch {
		case j < s.n && s.few[j] == i:
			return
		case s.n < len(s.few):
			copy(s.few[j+1:s.n+1], s.few[j:s.n])
			s.few[j] = i
			s.n++
			return
		}
		s.spill()
	}
	s.many[i/64] |= 1 << (i % 64)
}

// spill moves the set to its bitmap.
func (s *stripeSet) spill() {
	if s.many != nil {
		return
	}
	s.many = new([stripeCount / 64]uint64)
	for _, i := range s.few[:s.n] {
		s.many[i/64] |= 1 << (i % 64)
	}
}

// stripeOf spreads the lines of every memory node and region over the
// stripes.
func stripeOf(base, line uint64) uint64 {
	return ((base*0x9e3779b97f4a7c15)>>32 + line) % stripeCount
}

// lock takes the set's stripes in increasing order (so that batches never
// wait on each other in a cycle).
func (s *stripeSet) lock() { s.each((*sync.Mutex).Lock) }

// unlock releases the set's stripes.
func (s *stripeSet) unlock() { s.each((*sync.Mutex).Unlock) }

// each calls f with the mutex of each stripe of the set, in increasing
// order.
func (s *stripeSet) each(f func(*sync.Mutex)) {
	if s.many == nil {
		for _, i := range s.few[:s.n] {
			f(&writeStripes[i].Mutex)
		}
		return
	}
	for w, m := range s.many {
		for ; m != 0; m &= m - 1 {
			f(&writeStripes[w*64+bits.TrailingZeros64(m)].Mutex)
		}
	}
}
