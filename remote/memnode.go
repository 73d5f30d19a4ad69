package remote

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// memNode is one memory node's memory: a main region and an on-chip region
// of 8-byte words, each accessed atomically. Its allocator and named-region
// directory live in the main region's reserved bytes (nodelayout.go), so the
// memory alone is the node's whole state.
type memNode struct {
	geom   nodeGeom
	main   []uint64
	onChip []uint64
}

// newMemNode returns a fresh, zeroed node of geometry g in anonymous memory.
func newMemNode(g nodeGeom) (*memNode, error) {
	m := &memNode{geom: g}
	var err error
	if m.main, err = newWords(m, int(g.main/8)); err != nil {
		return nil, err
	}
	if m.onChip, err = newWords(m, int(g.onChip/8)); err != nil {
		return nil, err
	}
	initNode(m.main, g)
	return m, nil
}

// region returns the word slice an address lives in.
func (m *memNode) region(a Addr) []uint64 {
	if a.IsOnChip() {
		return m.onChip
	}
	return m.main
}

// checkVerb validates a verb's kind, alignment and bounds against geometry g.
func checkVerb(g nodeGeom, kind OpKind, a Addr, n uint64) error {
	switch kind {
	case OpRead, OpWrite:
	case OpCAS, OpFAA:
		if a%8 != 0 {
			return fmt.Errorf("%w: %v %v", ErrMisaligned, kind, a)
		}
		if n != 8 {
			return fmt.Errorf("%w: %v of %d bytes", ErrBadRequest, kind, n)
		}
	default:
		return fmt.Errorf("%w: verb kind %d", ErrBadRequest, kind)
	}
	size, off := g.regionBytes(a), a.Offset()
	if off >= size || n > size-off {
		return fmt.Errorf("%w: %v of %d bytes at %v (region is %d bytes)", ErrOutOfBounds, kind, n, a, size)
	}
	if !a.IsOnChip() && off < reservedBytes {
		// The node's own state (nodelayout.go) is reached by no verb.
		return fmt.Errorf("%w: %v at %v is in the node's reserved first %d bytes", ErrOutOfBounds, kind, a, reservedBytes)
	}
	return nil
}

// apply executes one validated verb on the node's memory.
func (m *memNode) apply(o *Op) {
	r := m.region(o.Addr)
	off := o.Addr.Offset()
	switch o.Kind {
	case OpRead:
		readWords(r, off, o.Buf)
	case OpWrite:
		writeWords(r, off, o.Buf)
	case OpCAS:
		o.Old = casWord(r, off, o.Compare, o.Swap)
	case OpFAA:
		o.Old = faaWord(r, off, o.Swap)
	}
}

// applyOwned executes one validated verb like apply, for a caller that has
// the node's memory to itself meanwhile (the simulator applies verbs under
// its mutex): plain loads and stores rather than atomic ones, and a READ or
// WRITE copies its bytes at once. Words hold their bytes in little-endian
// order, so on a big-endian host it falls back to apply.
func (m *memNode) applyOwned(o *Op) {
	if !littleEndianHost {
		m.apply(o)
		return
	}
	r := m.region(o.Addr)
	off := o.Addr.Offset()
	switch o.Kind {
	case OpRead:
		copy(o.Buf, wordBytes(r)[off:])
	case OpWrite:
		copy(wordBytes(r)[off:], o.Buf)
	case OpCAS:
		p := &r[off/8]
		if o.Old = *p; o.Old == o.Compare {
			*p = o.Swap
		}
	case OpFAA:
		p := &r[off/8]
		o.Old = *p
		*p += o.Swap
	}
}

// littleEndianHost: the host stores a word's bytes in little-endian order,
// the order of a node's memory, so that wordBytes views it as it is.
var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// wordBytes views a region of words (memory outside the Go heap) as bytes.
func wordBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// readWords copies the bytes [off, off+len(buf)) of region r into buf, one
// atomic 8-byte load per word touched.
func readWords(r []uint64, off uint64, buf []byte) {
	if off%8 == 0 && len(buf) == 8 { // the common single-word read
		binary.LittleEndian.PutUint64(buf, atomic.LoadUint64(&r[off/8]))
		return
	}
	if sh := off % 8; sh != 0 && len(buf) > 0 { // leading partial word
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], atomic.LoadUint64(&r[off/8]))
		n := copy(buf, tmp[sh:])
		buf, off = buf[n:], off+uint64(n)
	}
	ws := r[off/8:][:len(buf)/8]
	if p := unsafe.SliceData(buf); littleEndianHost && uintptr(unsafe.Pointer(p))%8 == 0 {
		// buf holds words as the host does: store them whole (a third
		// of the instructions of encoding each).
		dst := unsafe.Slice((*uint64)(unsafe.Pointer(p)), len(ws))
		for i := range dst {
			dst[i] = atomic.LoadUint64(&ws[i])
		}
	} else {
		for i := range ws {
			binary.LittleEndian.PutUint64(buf[8*i:8*i+8], atomic.LoadUint64(&ws[i]))
		}
	}
	if rest := buf[8*len(ws):]; len(rest) > 0 { // trailing partial word
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], atomic.LoadUint64(&r[off/8+uint64(len(ws))]))
		copy(rest, tmp[:])
	}
}

// writeWords stores data at [off, off+len(data)) of region r. Whole words are
// stored atomically; partial words are merged with a CAS loop so concurrent
// writers of the other bytes of that word are never clobbered.
func writeWords(r []uint64, off uint64, data []byte) {
	if sh := off % 8; sh != 0 && len(data) > 0 { // leading partial word
		n := min(uint64(len(data)), 8-sh)
		mergeWord(&r[off/8], sh, data[:n])
		data, off = data[n:], off+n
	}
	ws := r[off/8:][:len(data)/8]
	for i := range ws {
		atomic.StoreUint64(&ws[i], binary.LittleEndian.Uint64(data[8*i:8*i+8]))
	}
	if rest := data[8*len(ws):]; len(rest) > 0 { // trailing partial word
		mergeWord(&r[off/8+uint64(len(ws))], 0, rest)
	}
}

// mergeWord atomically replaces the bytes [sh, sh+len(b)) of the word at p.
func mergeWord(p *uint64, sh uint64, b []byte) {
	for {
		old := atomic.LoadUint64(p)
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], old)
		copy(tmp[sh:], b)
		if atomic.CompareAndSwapUint64(p, old, binary.LittleEndian.Uint64(tmp[:])) {
			return
		}
	}
}

// casWord performs a compare-and-swap on the word at off and returns the old
// value.
func casWord(r []uint64, off, cmp, swap uint64) uint64 {
	p := &r[off/8]
	for {
		old := atomic.LoadUint64(p)
		if old != cmp {
			return old
		}
		if atomic.CompareAndSwapUint64(p, cmp, swap) {
			return cmp
		}
	}
}

// faaWord adds delta to the word at off and returns the old value.
func faaWord(r []uint64, off, delta uint64) uint64 {
	return atomic.AddUint64(&r[off/8], delta) - delta
}
