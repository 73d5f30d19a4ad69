package remote

import (
	"fmt"
	"hash/fnv"
	"sync/atomic"
)

// The first reservedBytes of every memory node's main region hold the node's
// own state, so that the memory alone describes it and any party holding the
// memory (an in-process pool, a memnode server, a process mapping a shared
// file) can serve allocation and named-region requests with atomic
// operations on it. Nothing here is ever reached by a verb: offsets below
// reservedBytes are never handed out.
//
// Block 0 (bytes 0..4095) starts with the node header:
//
//	word 0  magic "dmindexN"
//	word 1  format version
//	word 2  main region bytes
//	word 3  on-chip region bytes
//	word 4  allocation cursor: the next unallocated byte offset (CAS)
//	word 5  pool id: a random number stamped by the first pool that joins (CAS)
//	word 6  the node's place in that pool (CAS): its index plus one in the
//	        low 32 bits, the number of memory nodes of the pool in the high
//	        32 bits (0 until the pool fixes it, once all its nodes joined)
//	word 7  offset of the next directory block, 0 if none (CAS)
//
// and continues with named-region entries of 4 words from byte 64: the name's
// hash (claimed by CAS from 0), the region's offset (published by CAS from
// 0), and two unused words. Further directory blocks, allocated when block 0
// is full, have the same shape: word 7 links the next, entries from byte 64.
//
// A named region is allocated with 64 leading bytes whose last word holds its
// size (the region itself stays 64-byte aligned), so a later caller asking
// for more than the region holds gets an error.
//
// Format version 2 added the pool's node count to word 6, so that a pool
// listing only some of the memory nodes a tree was built on (or more) is
// refused when it joins; version 1 headers are refused like any other
// version.
//
// Every update is a single CAS, so a party that stops at any point (a crashed
// process on a shared file) leaves the state consistent: a claimed entry
// without an offset is completed by the next caller of that name, and at
// worst some bytes are allocated and never used.
const (
	nodeMagic   = 0x4e7865646e696d64 // "dmindexN" little-endian
	nodeVersion = 2

	hdrMagic, hdrVersion, hdrMain, hdrOnChip, hdrNext, hdrPool, hdrIndex, hdrDir = 0, 1, 2, 3, 4, 5, 6, 7

	dirBlockBytes = reservedBytes
	dirEntryWords = 4
	dirFirstWord  = 8
)

// nodeGeom is the size of a memory node's two regions in bytes.
type nodeGeom struct{ main, onChip uint64 }

// regionBytes returns the size of the region a addresses.
func (g nodeGeom) regionBytes(a Addr) uint64 {
	if a.IsOnChip() {
		return g.onChip
	}
	return g.main
}

// initNode writes the header of a fresh, zeroed main region.
func initNode(main []uint64, g nodeGeom) {
	atomic.StoreUint64(&main[hdrVersion], nodeVersion)
	atomic.StoreUint64(&main[hdrMain], g.main)
	atomic.StoreUint64(&main[hdrOnChip], g.onChip)
	atomic.StoreUint64(&main[hdrNext], reservedBytes)
	atomic.StoreUint64(&main[hdrMagic], nodeMagic)
}

// checkHeader validates a node header (the first words of a main region)
// and returns the geometry it records.
func checkHeader(hdr []uint64) (nodeGeom, error) {
	if len(hdr) < dirFirstWord {
		return nodeGeom{}, fmt.Errorf("%w: %d bytes is too short for a memory node", ErrBadNode, len(hdr)*8)
	}
	if m := atomic.LoadUint64(&hdr[hdrMagic]); m != nodeMagic {
		return nodeGeom{}, fmt.Errorf("%w: not a memory node (magic %#x)", ErrBadNode, m)
	}
	if v := atomic.LoadUint64(&hdr[hdrVersion]); v != nodeVersion {
		return nodeGeom{}, fmt.Errorf("%w: format version %d, this build reads %d", ErrBadNode, v, nodeVersion)
	}
	g := nodeGeom{main: atomic.LoadUint64(&hdr[hdrMain]), onChip: atomic.LoadUint64(&hdr[hdrOnChip])}
	if g.main < 2*reservedBytes || g.main >= onChipBit || g.main%8 != 0 || g.onChip > 1<<30 || g.onChip%8 != 0 {
		return nodeGeom{}, fmt.Errorf("%w: header records regions of %d and %d bytes", ErrBadNode, g.main, g.onChip)
	}
	if next := atomic.LoadUint64(&hdr[hdrNext]); next < reservedBytes || next > g.main {
		return nodeGeom{}, fmt.Errorf("%w: allocation cursor %d outside %d..%d", ErrBadNode, next, reservedBytes, g.main)
	}
	if w := atomic.LoadUint64(&hdr[hdrIndex]); w != 0 {
		if index, nodes := nodePlace(w); index < 0 || index >= MaxMemoryNodes || (nodes != 0 && index >= nodes) || nodes > MaxMemoryNodes {
			return nodeGeom{}, fmt.Errorf("%w: header records node %d of a pool of %d memory nodes", ErrBadNode, index, nodes)
		}
	}
	return g, nil
}

// nodeAlloc carves size bytes aligned to align out of main by CAS on the
// allocation cursor and returns their offset.
func nodeAlloc(main []uint64, size, align uint64) (uint64, error) {
	limit := uint64(len(main)) * 8
	for {
		next := atomic.LoadUint64(&main[hdrNext])
		start := (next + align - 1) &^ (align - 1)
		if start < next || start+size < start || start+size > limit {
			return 0, fmt.Errorf("%w: %d of %d bytes left, %d asked", ErrOutOfMemory,
				limit-min(next, limit), limit, size)
		}
		if atomic.CompareAndSwapUint64(&main[hdrNext], next, start+size) {
			return start, nil
		}
	}
}

// nodeUsed returns the bytes handed out so far, reserved bytes included.
func nodeUsed(main []uint64) uint64 { return atomic.LoadUint64(&main[hdrNext]) }

// nameHash returns the non-zero directory key of a name.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// nodeNamed returns the region registered under name, allocating size zeroed
// bytes for it on first use. Every caller of one name gets one address, also
// when several race to create it.
func nodeNamed(main []uint64, name string, size uint64) (uint64, error) {
	key := nameHash(name)
	block := uint64(0)
	limit := uint64(len(main)) * 8
	for {
		if block%64 != 0 || block > limit-dirBlockBytes || (block != 0 && block < reservedBytes) {
			return 0, fmt.Errorf("%w: named-region directory links to offset %#x", ErrBadNode, block)
		}
		b := main[block/8 : (block+dirBlockBytes)/8]
		for e := dirFirstWord; e+dirEntryWords <= len(b); e += dirEntryWords {
			h := atomic.LoadUint64(&b[e])
			if h == 0 && atomic.CompareAndSwapUint64(&b[e], 0, key) {
				h = key
			} else if h == 0 {
				h = atomic.LoadUint64(&b[e])
			}
			if h == key {
				return namedRegion(main, &b[e+1], name, size)
			}
		}
		next := atomic.LoadUint64(&b[hdrDir])
		if next == 0 {
			a, err := nodeAlloc(main, dirBlockBytes, 64)
			if err != nil {
				return 0, err
			}
			if atomic.CompareAndSwapUint64(&b[hdrDir], 0, a) {
				next = a
			} else {
				next = atomic.LoadUint64(&b[hdrDir]) // another caller linked one; ours stays unused
			}
		}
		block = next
	}
}

// namedRegion returns the region whose offset is published at *slot,
// allocating and publishing one if none is yet.
func namedRegion(main []uint64, slot *uint64, name string, size uint64) (uint64, error) {
	off := atomic.LoadUint64(slot)
	if off == 0 {
		a, err := nodeAlloc(main, size+64, 64)
		if err != nil {
			return 0, err
		}
		atomic.StoreUint64(&main[(a+56)/8], size)
		if atomic.CompareAndSwapUint64(slot, 0, a+64) {
			off = a + 64
		} else {
			off = atomic.LoadUint64(slot) // another caller published first; ours stays unused
		}
	}
	if off%64 != 0 || off < reservedBytes+64 || off >= uint64(len(main))*8 {
		return 0, fmt.Errorf("%w: named region %q at offset %#x", ErrBadNode, name, off)
	}
	if have := atomic.LoadUint64(&main[off/8-1]); size > have || off+have > uint64(len(main))*8 {
		return 0, fmt.Errorf("%w: named region %q holds %d bytes, %d asked", ErrBadRequest, name, have, size)
	}
	return off, nil
}

// nodeJoin stamps a node into a pool, or checks that it belongs to it. A
// node that belongs to no pool yet is stamped with propose and index when
// create is set. With adopt, the node's existing pool id is accepted (the
// first node of a pool decides its id, also when several pools race to
// create one); without it the node must belong to propose. The node must be
// the index-th of its pool either way. Its pool must have nodes memory
// nodes if the node records a count; with fix, a node that records none yet
// records nodes (a pool fixes the count only once every one of its nodes
// has joined, so that a pool that fails to come up leaves none). It returns
// the node's pool id.
func nodeJoin(main []uint64, propose uint64, adopt bool, index, nodes int, create, fix bool) (uint64, error) {
	if index < 0 || nodes <= index || nodes > MaxMemoryNodes {
		return 0, fmt.Errorf("%w: join as node %d of a pool of %d memory nodes", ErrBadRequest, index, nodes)
	}
	have := atomic.LoadUint64(&main[hdrPool])
	if have == 0 {
		if !create {
			return 0, fmt.Errorf("%w: the memory node belongs to no pool (restarted without its contents?)", ErrBadNode)
		}
		if !atomic.CompareAndSwapUint64(&main[hdrPool], 0, propose) {
			have = atomic.LoadUint64(&main[hdrPool])
		} else {
			have = propose
		}
	}
	if !adopt && have != propose {
		return have, fmt.Errorf("%w: the memory node belongs to pool %#x, not %#x", ErrBadNode, have, propose)
	}
	want := placeWord(index, 0)
	if fix {
		want = placeWord(index, nodes)
	}
	for {
		got := atomic.LoadUint64(&main[hdrIndex])
		if got == 0 {
			if atomic.CompareAndSwapUint64(&main[hdrIndex], 0, want) {
				return have, nil
			}
			continue
		}
		gotIndex, gotNodes := nodePlace(got)
		if gotIndex != index {
			return have, fmt.Errorf("%w: the memory node is node %d of its pool, listed as node %d", ErrBadNode, gotIndex, index)
		}
		if gotNodes != 0 && gotNodes != nodes {
			return have, fmt.Errorf("%w: the memory node's pool has %d memory node(s), this pool lists %d", ErrBadNode, gotNodes, nodes)
		}
		if gotNodes != 0 || !fix || atomic.CompareAndSwapUint64(&main[hdrIndex], got, want) {
			return have, nil
		}
	}
}

// placeWord returns header word 6 of node index of a pool of nodes memory
// nodes (0: not recorded yet).
func placeWord(index, nodes int) uint64 { return uint64(index) + 1 | uint64(nodes)<<32 }

// nodePlace returns the index and pool size that header word 6 records;
// index -1 if the node has joined no pool.
func nodePlace(w uint64) (index, nodes int) { return int(uint32(w)) - 1, int(w >> 32) }
