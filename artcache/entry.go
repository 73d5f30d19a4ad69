package artcache

import (
	"fmt"
	"iter"
	"sync/atomic"
	"unsafe"
)

// MaxSlots is the most slot words an entry holds: a node of 256 slots.
const MaxSlots = 256

// Entry is an immutable snapshot of one remote internal node: its address
// and its slot words, which live in the same heap allocation right after
// the struct (48 bytes on 64-bit platforms). The cache never changes what
// an entry holds, and neither may the caller once the entry is inserted:
// readers use an entry without a lock, even after it was evicted.
type Entry struct {
	// leaf is the entry's place in its index: an ART leaf header when the
	// entry is a leaf of the local ART (it must be the first field). It
	// also records whether and how the entry is cached.
	leaf node

	Addr uint64 // remote address of the node

	// meta packs the CLOCK reference bit (bit 0, set by a hit and cleared
	// by the hand), the number of slot words (bits 1–9), the number of
	// words of children's slots after them (bits 10–19, WithChild) and the
	// level (bits 20–31); only the reference bit ever changes.
	meta atomic.Uint32

	// Epoch is a caller's stamp of when the node was read (SMART: the
	// compute node's reclamation epoch), set before Insert.
	Epoch uint32
}

const (
	refBit     = 1
	countBits  = 9
	extraBits  = 10
	extraShift = 1 + countBits
	levelShift = extraShift + extraBits
	countMask  = 1<<countBits - 1
	extraMask  = 1<<extraBits - 1
	levelMax   = 1<<(32-levelShift) - 1
)

// MaxChildSlots is the most slot words of one child node an entry holds
// (WithChild).
const MaxChildSlots = 8

// entryStructBytes is the fixed part of an entry's memory, and
// slotsOffset where its slot words start in the allocation.
const (
	entryStructBytes = int64(unsafe.Sizeof(Entry{}))
	slotsOffset      = unsafe.Offsetof(withSlots[[1]uint64]{}.s)
)

// withSlots is an entry allocated together with room for its slot words.
type withSlots[A any] struct {
	e Entry
	s A
}

func alloc[A any]() *Entry { return &new(withSlots[A]).e }

// slotRooms are the allocations NewEntry chooses from, smallest first: room
// for so many slot words that the entry and its words fill one of the Go
// allocator's size classes exactly (64, 80, …, 2688 bytes on 64-bit
// platforms), so what an entry accounts is what it occupies.
var slotRooms = [...]struct {
	room int
	new  func() *Entry
}{
	{2, alloc[[2]uint64]}, {4, alloc[[4]uint64]}, {6, alloc[[6]uint64]}, {8, alloc[[8]uint64]},
	{10, alloc[[10]uint64]}, {12, alloc[[12]uint64]}, {14, alloc[[14]uint64]}, {16, alloc[[16]uint64]},
	{18, alloc[[18]uint64]}, {20, alloc[[20]uint64]}, {22, alloc[[22]uint64]}, {24, alloc[[24]uint64]},
	{26, alloc[[26]uint64]}, {30, alloc[[30]uint64]}, {34, alloc[[34]uint64]}, {38, alloc[[38]uint64]},
	{42, alloc[[42]uint64]}, {46, alloc[[46]uint64]}, {50, alloc[[50]uint64]}, {54, alloc[[54]uint64]},
	{58, alloc[[58]uint64]}, {66, alloc[[66]uint64]}, {74, alloc[[74]uint64]}, {82, alloc[[82]uint64]},
	{90, alloc[[90]uint64]}, {106, alloc[[106]uint64]}, {122, alloc[[122]uint64]},
	{138, alloc[[138]uint64]}, {154, alloc[[154]uint64]}, {170, alloc[[170]uint64]},
	{186, alloc[[186]uint64]}, {218, alloc[[218]uint64]}, {250, alloc[[250]uint64]},
	{slotRoomMax, alloc[[slotRoomMax]uint64]}, {330, alloc[[330]uint64]},
}

// slotRoomMax is the most words an entry holds, its slots' and its
// children's (the last room serves only an entry with an index, which
// takes indexWords more).
const slotRoomMax = 282

// IndexedSlots is the number of slot words above which an entry (a
// snapshot of a NODE_256 past its 64th slot) also holds an index of its
// slots by partial key, one byte per key, built when the entry is: a
// lookup (and Slot) reads one byte of it and one slot word instead of
// scanning half of up to 256 slots (2 KB), which a compute node's busiest
// entries, the root's and its children's, would cost every operation.
const IndexedSlots = 64

// indexWords is the room an entry's index takes after its other words.
const indexWords = 256 / 8

// roomWords returns the words an entry of own slot words and words in all
// (own and children's) allocates room for: words, and its index if it has
// one.
func roomWords(own, words int) int {
	if own > IndexedSlots {
		return words + indexWords
	}
	return words
}

// NewEntry returns an entry for the node at addr, level internal nodes below
// the root, holding a copy of slots: the node's slot words as read, up to
// its last non-empty one (a slot past them is empty to Lookup). The entry
// and its words are one heap allocation. It panics if slots holds more
// than MaxSlots words or level is negative or above 4,095.
func NewEntry(addr uint64, slots []uint64, level int) *Entry {
	if len(slots) > MaxSlots || level < 0 || level > levelMax {
		panic(fmt.Sprintf("artcache: NewEntry with %d slots at level %d", len(slots), level))
	}
	var e *Entry
	if len(slots) == 0 {
		e = new(Entry)
	} else {
		e = slotRooms[roomFor(roomWords(len(slots), len(slots)))].new()
	}
	e.Addr = addr
	e.meta.Store(uint32(len(slots))<<1 | uint32(level)<<levelShift)
	copy(e.Slots(), slots)
	e.buildIndex()
	return e
}

// WithChild returns a copy of e whose slot idx holds word and that also
// holds slots, the slot words of the child node that word names (up to its
// last non-empty one), in place of any it held for that slot: Child then
// finds them, so that a small node costs its parent's entry a word more
// than its slots instead of an entry of its own (its header and its place
// in the index). The copy keeps e's address, level, epoch stamp, other
// slots and other children; its reference bit is clear. WithChild returns
// nil if idx is not one of e's slots, if slots is empty or longer than
// MaxChildSlots, or if the copy would hold more than slotRoomMax (282)
// words, its slots' and its children's.
func (e *Entry) WithChild(idx int, word uint64, slots []uint64) *Entry {
	own := e.Slots()
	if idx < 0 || idx >= len(own) || len(slots) == 0 || len(slots) > MaxChildSlots {
		return nil
	}
	var buf [slotRoomMax]uint64
	words := e.appendChildren(append(buf[:0], own...), idx)
	if len(words)+1+len(slots) > slotRoomMax {
		return nil
	}
	words[idx] = word
	words = append(append(words, uint64(idx)|uint64(len(slots))<<8), slots...)
	return e.copyWith(words, len(own))
}

// WithSlot returns a copy of e whose slot idx holds word: one of its slots,
// or the slot right after them (idx = len(e.Slots())), which the copy
// adds: the snapshot of the node once that slot changed or was filled.
// The copy keeps e's address, level, epoch stamp, other slots and children;
// its reference bit is clear. WithSlot returns nil if idx is out of that
// range, or the added slot would make more than MaxSlots or not fit the
// largest allocation an entry has.
func (e *Entry) WithSlot(idx int, word uint64) *Entry {
	own := e.Slots()
	n := max(len(own), idx+1) // the slots of the copy
	if idx < 0 || n > len(own)+1 || n > MaxSlots || len(e.words())+n-len(own) > slotRoomMax {
		return nil
	}
	var buf [slotRoomMax]uint64
	words := append(buf[:0], own...)[:n]
	words[idx] = word
	return e.copyWith(e.appendChildren(words, -1), n)
}

// appendChildren appends the children's slot words e holds, each after its
// header word, except those under slot skip.
func (e *Entry) appendChildren(words []uint64, skip int) []uint64 {
	for i, kids := range e.children() {
		if i != skip {
			words = append(append(words, uint64(i)|uint64(len(kids))<<8), kids...)
		}
	}
	return words
}

// copyWith returns a new entry with e's address, level and epoch stamp
// holding words: its own slot words (the first own of them), then its
// children's.
func (e *Entry) copyWith(words []uint64, own int) *Entry {
	c := slotRooms[roomFor(roomWords(own, len(words)))].new()
	c.Addr, c.Epoch = e.Addr, e.Epoch
	c.meta.Store(uint32(own)<<1 | uint32(len(words)-own)<<extraShift | uint32(e.Level())<<levelShift)
	copy(c.words(), words)
	c.buildIndex()
	return c
}

// index returns the entry's index of its slots by partial key, nil if it
// has none (roomWords): the slot index of the first slot of each partial
// key, 0 for a key it does not hold.
func (e *Entry) index() *[256]uint8 {
	own := e.Slots()
	if len(own) <= IndexedSlots {
		return nil
	}
	return (*[256]uint8)(unsafe.Add(unsafe.Pointer(&own[0]), 8*len(e.words())))
}

// buildIndex fills the index of a new entry that has one.
func (e *Entry) buildIndex() {
	x := e.index()
	if x == nil {
		return
	}
	own := e.Slots()
	for i := len(own) - 1; i >= 0; i-- { // the first slot of a key wins
		if w := own[i]; w != 0 {
			x[byte(w)] = uint8(i)
		}
	}
}

// Slot returns the index i and the word of the first non-empty slot of e
// whose partial key (low 8 bits) is b; ok is false if there is none. It
// costs one byte of e's index and one slot word for an entry of more than
// IndexedSlots slots, a scan of its slots otherwise.
func (e *Entry) Slot(b byte) (i int, word uint64, ok bool) {
	if i = e.slot(b); i < 0 {
		return 0, 0, false
	}
	return i, e.Slots()[i], true
}

// Child returns the index j and the word of the first non-empty slot whose
// partial key (low 8 bits) is b among the slots e holds for the child its
// slot idx names (WithChild); ok is false if there is none.
func (e *Entry) Child(idx int, b byte) (j int, word uint64, ok bool) {
	for j, w := range e.ChildSlots(idx) {
		if w != 0 && byte(w) == b {
			return j, w, true
		}
	}
	return 0, 0, false
}

// ChildSlots returns the slot words e holds for the child its slot idx
// names (WithChild), nil if none. The caller must not modify them.
func (e *Entry) ChildSlots(idx int) []uint64 {
	for i, kids := range e.children() {
		if i == idx {
			return kids
		}
	}
	return nil
}

// children yields the children's slot words e holds, by the index of the
// slot of e that names each child.
func (e *Entry) children() iter.Seq2[int, []uint64] {
	return func(yield func(int, []uint64) bool) {
		w := e.words()
		for k := len(e.Slots()); k < len(w); {
			h := w[k]
			n := int(h >> 8 & 0xff)
			if !yield(int(byte(h)), w[k+1:k+1+n]) {
				return
			}
			k += 1 + n
		}
	}
}

// words returns the entry's slot words followed by its children's.
func (e *Entry) words() []uint64 {
	m := e.meta.Load()
	n := m>>1&countMask + m>>extraShift&extraMask
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(e), slotsOffset)), n)
}

// Slots returns the entry's slot words, which the caller must not modify.
func (e *Entry) Slots() []uint64 {
	n := e.meta.Load() >> 1 & countMask
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(e), slotsOffset)), n)
}

// Level returns the number of internal nodes above the entry's node (the
// root's is 0).
func (e *Entry) Level() int { return int(e.meta.Load() >> levelShift) }

// referenced reports the entry's CLOCK reference bit.
func (e *Entry) referenced() bool { return e.meta.Load()&refBit != 0 }

// setReferenced sets or clears the entry's CLOCK reference bit.
func (e *Entry) setReferenced(on bool) {
	if on {
		e.meta.Or(refBit)
	} else {
		e.meta.And(^uint32(refBit))
	}
}

// bytes returns the memory e occupies: the struct and the room for its
// slot words, one allocation of a size class.
func (e *Entry) bytes() int64 {
	n := len(e.words())
	if n == 0 {
		return entryStructBytes
	}
	return entryStructBytes + 8*int64(slotRooms[roomFor(roomWords(len(e.Slots()), n))].room)
}

// roomFor returns the index in slotRooms of the smallest room for n > 0
// slot words.
func roomFor(n int) int {
	i := 0
	for slotRooms[i].room < n {
		i++
	}
	return i
}

// slot returns the index of the first non-empty slot whose partial key (low
// 8 bits) is b, or -1.
func (e *Entry) slot(b byte) int {
	if x := e.index(); x != nil {
		own := e.Slots()
		if i := int(x[b]); own[i] != 0 && byte(own[i]) == b {
			return i
		}
		return -1
	}
	for i, w := range e.Slots() {
		if w != 0 && byte(w) == b {
			return i
		}
	}
	return -1
}
