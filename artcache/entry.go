package artcache

import (
	"slices"
	"sync/atomic"
	"unsafe"
)

// Entry is an immutable snapshot of one remote internal node. The cache
// never changes its exported fields, and neither may the caller once the
// entry is inserted: readers use an entry without a lock, even after it was
// evicted.
type Entry struct {
	// leaf is the entry's place in its index: an ART leaf header when the
	// entry is a leaf of the local ART (it must be the first field). It
	// also records whether and how the entry is cached.
	leaf node

	Addr   uint64   // remote address of the node
	Header uint64   // the node's header word as read
	Slots  []uint64 // the node's slot words as read, up to its last non-empty one (SMART); a slot past them is empty
	Level  int      // number of internal nodes above it (root = 0), for statistics

	prev, next *Entry      // neighbours in the CLOCK ring
	ref        atomic.Bool // CLOCK reference bit: set by a hit, cleared by the hand

	// Epoch is a caller's stamp of when the node was read (SMART: the
	// compute node's reclamation epoch), set before Insert like the
	// fields above. It sits in the struct's tail padding: it costs no
	// memory.
	Epoch uint32
}

// entryStructBytes is the fixed part of an entry's memory.
const entryStructBytes = int64(unsafe.Sizeof(Entry{}))

// bytes returns the memory e accounts for: the struct and its slot words
// (as allocated: NewEntry rounds them up).
func (e *Entry) bytes() int64 { return entryStructBytes + 8*int64(cap(e.Slots)) }

// slot returns the index of the first non-empty slot whose partial key (low
// 8 bits) is b, or -1.
func (e *Entry) slot(b byte) int {
	for i, w := range e.Slots {
		if w != 0 && byte(w) == b {
			return i
		}
	}
	return -1
}

// NewEntry returns an entry for the node at addr holding a copy of slots.
// Up to 256 slots the entry and its slot words are one heap allocation, with
// room for the next power of two of slots (at least 2), so the slots of a
// node read into a reused buffer are cached at the cost of a single
// allocation and at most twice their bytes.
func NewEntry(addr, header uint64, slots []uint64, level int) *Entry {
	var e *Entry
	size := 2
	for size < len(slots) {
		size <<= 1
	}
	switch size {
	case 2:
		x := new(struct {
			e Entry
			s [2]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 4:
		x := new(struct {
			e Entry
			s [4]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 8:
		x := new(struct {
			e Entry
			s [8]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 16:
		x := new(struct {
			e Entry
			s [16]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 32:
		x := new(struct {
			e Entry
			s [32]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 64:
		x := new(struct {
			e Entry
			s [64]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 128:
		x := new(struct {
			e Entry
			s [128]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	case 256:
		x := new(struct {
			e Entry
			s [256]uint64
		})
		e, x.e.Slots = &x.e, x.s[:]
	default:
		e = &Entry{Slots: slices.Clone(slots)}
	}
	e.Slots = e.Slots[:len(slots)]
	copy(e.Slots, slots)
	e.Addr, e.Header, e.Level = addr, header, level
	return e
}
