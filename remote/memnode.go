package remote

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// memNode is one memory node: a main region and an on-chip region of 8-byte
// words, each accessed atomically, plus the state its CPU keeps for RPCs
// (the chunk allocator and the named-region table).
type memNode struct {
	id     int
	main   []uint64
	onChip []uint64

	mu    sync.Mutex // guards the RPC state below (the memory node's CPU)
	next  uint64     // next unallocated byte offset of main
	named map[string]Addr
}

func newMemNode(id int, cfg Config) *memNode {
	m := &memNode{
		id:     id,
		onChip: make([]uint64, cfg.OnChipBytes/8),
		next:   reservedBytes,
		named:  make(map[string]Addr),
	}
	m.main = newWords(m, int(cfg.NodeBytes/8))
	return m
}

// region returns the word slice an address lives in.
func (m *memNode) region(a Addr) []uint64 {
	if a.IsOnChip() {
		return m.onChip
	}
	return m.main
}

// allocRPC carves size bytes aligned to align out of the main region. It is
// the memory node's side of the allocation RPC.
func (m *memNode) allocRPC(size, align uint64) (Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := (m.next + align - 1) &^ (align - 1)
	if start+size > uint64(len(m.main))*8 || start+size < start {
		return 0, fmt.Errorf("%w: memory node %d has %d of %d bytes left, %d asked", ErrOutOfMemory,
			m.id, uint64(len(m.main))*8-min(m.next, uint64(len(m.main))*8), len(m.main)*8, size)
	}
	m.next = start + size
	return MakeAddr(m.id, start), nil
}

// namedRPC returns the region registered under name, allocating size zeroed
// bytes for it on first use.
func (m *memNode) namedRPC(name string, size uint64) (Addr, error) {
	m.mu.Lock()
	a, ok := m.named[name]
	m.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := m.allocRPC(size, 64)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.named[name]; ok {
		return prev, nil // lost a race with another caller; the bytes stay unused
	}
	m.named[name] = a
	return a, nil
}

// used returns the bytes handed out so far.
func (m *memNode) used() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
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
	for i := range ws {
		binary.LittleEndian.PutUint64(buf[8*i:8*i+8], atomic.LoadUint64(&ws[i]))
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
