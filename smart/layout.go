package smart

import (
	"fmt"

	"github.com/dmindex/dmindex/remote"
)

// Remote layout (docs/layouts.md has the picture). All words are
// little-endian uint64s accessed atomically.
//
// Slot word (8 bytes) of an internal node:
//
//	bits  0– 7  partial key byte
//	bit      8  leaf flag
//	bits  9–15  leaf: size class of the leaf (7 bits); node: node type (3 bits used)
//	bits 16–23  memory node id
//	bits 24–62  byte offset >> 3 (39 bits: 8-byte aligned, 2^42 bytes per memory node)
//	bit     63  frozen: the node holding the slot is moving (docs/smart-node-growth.md)
//
// The empty slot is 0. A tombstone (leaf flag set, nil address) keeps the
// partial key of a deleted leaf so that a partial key occupies at most one
// slot of a node forever: slots never return to 0.
type slot uint64

const (
	slotLeafBit   = 1 << 8
	slotInfoShift = 9
	slotInfoMask  = 0x7f
	slotAddrShift = 16
	addrShift     = 3
	leafAlign     = 1 << addrShift // leaves: 8-byte granularity (classBytes)
	addrAlign     = 16             // internal nodes: their words need 8, sized in 16-byte steps
	maxSlotMN     = 1 << 8
	maxSlotOffset = 1 << (39 + addrShift)
	slotFrozen    = 1 << 63
)

// MaxMemoryNodes and MaxNodeBytes bound the pools SMART opens on: a slot
// names its child by memory node and offset in that many of each (Open
// refuses a larger pool).
const (
	MaxMemoryNodes = maxSlotMN
	MaxNodeBytes   = maxSlotOffset
)

func (s slot) partial() byte { return byte(s) }
func (s slot) isEmpty() bool { return s == 0 }
func (s slot) isLeaf() bool  { return s&slotLeafBit != 0 }

// isTombstone reports whether s is the tombstone of a deleted leaf.
func (s slot) isTombstone() bool { return s.isLeaf() && s>>slotAddrShift == 0 }

// isChild reports whether s points to a live leaf or node.
func (s slot) isChild() bool { return s&^slotFrozen>>slotAddrShift != 0 }

// isFrozen reports whether s belongs to a node that is moving: it is never
// CASed again, and nobody uses what it names.
func (s slot) isFrozen() bool { return s&slotFrozen != 0 }

// thawed returns s without its frozen bit.
func (s slot) thawed() slot { return s &^ slotFrozen }

func (s slot) info() int { return int(s>>slotInfoShift) & slotInfoMask }

// nodeType returns the type of the node s points to.
func (s slot) nodeType() nodeType { return nodeType(s.info()) }

// leafClass returns the size class of the leaf s points to.
func (s slot) leafClass() int { return s.info() }

func (s slot) addr() remote.Addr { return unpackAddr(uint64(s&^slotFrozen) >> slotAddrShift) }

// packAddr packs an 8-byte aligned address into 47 bits: the memory node
// id, then the offset / 8.
func packAddr(a remote.Addr) uint64 {
	return uint64(a.MN()) | (a.Offset()>>addrShift)<<8
}

// unpackAddr is the inverse of packAddr; 0 is the nil address.
func unpackAddr(v uint64) remote.Addr {
	if v == 0 {
		return 0
	}
	return remote.MakeAddr(int(v&0xff), (v>>8)<<addrShift)
}

func leafSlot(partial byte, class int, a remote.Addr) slot {
	return slot(uint64(partial) | slotLeafBit | uint64(class)<<slotInfoShift | packAddr(a)<<slotAddrShift)
}

func nodeSlot(partial byte, t nodeType, a remote.Addr) slot {
	return slot(uint64(partial) | uint64(t)<<slotInfoShift | packAddr(a)<<slotAddrShift)
}

func tombstone(partial byte) slot { return slot(uint64(partial) | slotLeafBit) }

// withType returns s (a node slot) with its node type raised to t.
func (s slot) withType(t nodeType) slot {
	return s&^(slotInfoMask<<slotInfoShift) | slot(t)<<slotInfoShift
}

func (s slot) String() string {
	switch {
	case s.isEmpty():
		return "empty"
	case s.isFrozen():
		return "frozen " + s.thawed().String()
	case s.isTombstone():
		return fmt.Sprintf("tomb(%#02x)", s.partial())
	case s.isLeaf():
		return fmt.Sprintf("leaf(%#02x,class %d,%v)", s.partial(), s.leafClass(), s.addr())
	}
	return fmt.Sprintf("node(%#02x,%v,%v)", s.partial(), s.nodeType(), s.addr())
}

// nodeType is the adaptive type of an internal node: its slot capacity is
// 1<<(t+1). By default a node is allocated at its type's size (allocBytes)
// and moves when it is full (docs/smart-node-growth.md); with
// Options.PaperNodes every node has room for 256 slots and switches type in
// place, as in the paper. By size class a leaf split creates a NODE_2
// under a sparse node and a NODE_8 under a dense one (Tree.splitType),
// where the paper's creates a NODE_4.
type nodeType uint8

const (
	node2   nodeType = 0
	node4   nodeType = 1
	node8   nodeType = 2
	node16  nodeType = 3
	node32  nodeType = 4
	node64  nodeType = 5
	node256 nodeType = 7
)

// maxMoves is how many times a node allocated by size class moves in its
// life at most: NODE_2 → NODE_4 → NODE_16 → NODE_32 → NODE_64 → NODE_256
// (grown).
const maxMoves = 5

func (t nodeType) capacity() int { return 1 << (t + 1) }

// readBytes is how much of a node of type t one READ fetches.
func (t nodeType) readBytes() int { return nodeHeaderBytes + t.capacity()*8 }

// grown is the type a full node of type t moves to: NODE_2 → NODE_4 →
// NODE_16 → NODE_32 → NODE_64 → NODE_256, and NODE_8 → NODE_32. NODE_4,
// NODE_8 and NODE_64 grow fourfold, so a node moves at most maxMoves times
// in its life (one that starts as a NODE_2 once more than one that starts
// as a NODE_4, the first move of two children; one that starts as a
// NODE_8 at most three times) and one that ends with 256 children has
// cost 116 slot freezes and 116 pointer moves from a NODE_4 (118 from a
// NODE_2, 104 from a NODE_8; 252 each one type at a time); NODE_32 is kept because a node two levels above random keys
// most often ends with 10 to 40 children, for which a NODE_64 would leave
// most slots empty (docs/results/README.md, "Memory-node footprint"). A
// NODE_8 is created under a dense node, where the keys of a young tree
// collide by a few and those of a grown one by dozens: it holds the few
// without moving, and the dozens cost it one move, to the NODE_32 that
// the NODE_4's two moves reached (docs/smart-node-growth.md, "The first
// type").
func (t nodeType) grown() nodeType {
	switch t {
	case node4, node8, node64:
		return t + 2
	}
	return min(t+1, node256)
}

// allocBytes is the size of a node of type t allocated by size class.
func (t nodeType) allocBytes() int { return (t.readBytes() + addrAlign - 1) &^ (addrAlign - 1) }

// typeFor returns the smallest node type whose capacity exceeds slot index i.
func typeFor(i int) nodeType {
	t := node4
	for t.capacity() <= i {
		t++
	}
	return t
}

func (t nodeType) String() string { return fmt.Sprintf("NODE_%d", t.capacity()) }

// Internal node: rev pointer (8), header (8), 256 slots (2048), and a lock
// word used only by the locked-internal-node variant (Options.LockedInternal).
const (
	nodeRevOff      = 0
	nodeHeaderOff   = 8
	nodeSlotsOff    = 16
	nodeHeaderBytes = 16
	nodeLockOff     = nodeSlotsOff + 256*8
	nodeAllocBytes  = nodeLockOff + 8
	maxHeaderBytes  = 6
)

// header is an internal node's 8-byte pessimistic header:
//
//	bits  0– 9  depth: encoded key bytes consumed above this node
//	bits 10–12  node type
//	bits 13–15  number of prefix bytes (0..6)
//	bits 16–63  prefix bytes 0..5
//
// A node at depth d with prefix p matches encoded key bytes [d, d+len(p))
// and its slots discriminate on byte d+len(p). Longer compressed paths are
// chains of nodes. A header split raises the depth and drops prefix bytes.
type header uint64

func makeHeader(depth int, t nodeType, prefix []byte) header {
	h := uint64(depth) | uint64(t)<<10 | uint64(len(prefix))<<13
	for i, b := range prefix {
		h |= uint64(b) << (16 + 8*i)
	}
	return header(h)
}

func (h header) depth() int         { return int(h & 0x3ff) }
func (h header) nodeType() nodeType { return nodeType(h>>10) & 7 }
func (h header) prefixLen() int     { return int(h>>13) & 7 }
func (h header) prefixByte(i int) byte {
	return byte(h >> (16 + 8*i))
}

// withType returns h with its node type raised to t.
func (h header) withType(t nodeType) header { return h&^(7<<10) | header(t)<<10 }

// fwdDepth and fwdPrefixLen mark a forwarded header: impossible as a real
// header (a prefix holds at most maxHeaderBytes), and deeper than any slot,
// so a reader that does not look for the mark re-reads its slot.
const (
	fwdDepth     = 0x3ff
	fwdPrefixLen = 7
)

// forwarded returns the header of a node of type t that moved to to.
func forwarded(t nodeType, to remote.Addr) header {
	return header(fwdDepth | uint64(t)<<10 | fwdPrefixLen<<13 | packAddr(to)<<16)
}

// isForwarded reports whether h is the header of a node that moved: both
// marks, so that a word that is not a header (unfinishedMove may read one)
// is rarely taken for a forward.
func (h header) isForwarded() bool { return h.prefixLen() == fwdPrefixLen && h.depth() == fwdDepth }

// successor returns the node a forwarded header names.
func (h header) successor() remote.Addr { return unpackAddr(uint64(h) >> 16) }

// dropped returns h after a header split that moves the node n bytes deeper:
// the first n prefix bytes are gone (they are matched above now).
func (h header) dropped(n int) header {
	l := h.prefixLen()
	var rest [maxHeaderBytes]byte
	for i := n; i < l; i++ {
		rest[i-n] = h.prefixByte(i)
	}
	return makeHeader(h.depth()+n, h.nodeType(), rest[:l-n])
}

// Leaf (leafFormat in leaf.go): reverse pointer, key (the user key, not its
// encoded form), value, padding, with Options.Reclaim the birth epoch, the
// meta word, and the rear lock word in the last 8 bytes.
//
//	meta bits  0– 7  key length (1..255)
//	     bits  8–24  value length (0..65536)
//	     bit      25  valid (0: retired by a delete or an out-of-place update)
//	     bits 26–32  size class
//	     bits 33–63  checksum (leafChecksum)
const (
	leafRevOff   = 0
	leafKeyOff   = 8
	metaValidBit = 1 << 25
	metaSumShift = 33
	metaFields   = 1<<metaSumShift - 1
)

// revMoving flags a reverse pointer whose object a split is moving: set by
// CAS before the split is published, replaced by the new slot's address
// after. A reader that reaches the object through a cached slot and sees the
// flag reads the slot itself, so it never trusts a stale path to an object
// that a completed operation may already have built on. The flag also
// serialises splits of one object.
const revMoving remote.Addr = 1 << 63

// revNonce holds, in a flagged reverse pointer, the flag's nonce: bits that
// no slot address uses (slots are 8-byte words, and SMART names at most 256
// memory nodes, packAddr), drawn afresh for every flag (session.flagOf). A
// flag carries no owner, so a waiter judges it by watching it stand still
// for a lease, and a setter whose commit came too late takes its flag back
// (clearFlag); without the nonce both took a flag that was undone and set
// again by another operation for the same one (docs/recovery.md, "Stale
// writers"). An unflagged pointer has no nonce.
const revNonce remote.Addr = 0x7f<<56 | 7

// revFlag is every bit of a reverse pointer that is not the slot address.
const revFlag = revMoving | revNonce

// revSlot returns the slot address a reverse pointer names, without its
// flag.
func revSlot(rev remote.Addr) remote.Addr { return rev &^ revFlag }

// lockRetired is the lock word of a retired leaf: it can never be acquired
// again, so a retired leaf is frozen.
const lockRetired = 1 << 63

// makeMeta returns the meta word of a valid leaf without its checksum.
func makeMeta(keyLen, valLen, class int) uint64 {
	return uint64(keyLen) | uint64(valLen)<<8 | metaValidBit | uint64(class)<<26
}

func metaKeyLen(m uint64) int { return int(m & 0xff) }
func metaValLen(m uint64) int { return int(m>>8) & 0x1ffff }
func metaValid(m uint64) bool { return m&metaValidBit != 0 }
func metaClass(m uint64) int  { return int(m>>26) & 0x7f }

// Leaf size classes (7 bits): 8-byte steps from 40 bytes (an 8-byte key
// and value) to 256, 64-byte steps to 4 KiB, then eight steps per doubling
// up to 128 KiB. Leaves are 8-byte aligned, so a leaf may straddle cache
// lines: nothing relies on a leaf's lines, only on its checksum (I7).
const (
	numClasses    = 128
	smallClasses  = 28 // 40, 48, …, 256 bytes
	mediumClasses = 60 // 320, 384, …, 4,096 bytes
)

func classBytes(c int) int {
	switch {
	case c < smallClasses:
		return 8 * (c + 5)
	case c < smallClasses+mediumClasses:
		return 256 + 64*(c-smallClasses+1)
	}
	k, j := (c-smallClasses-mediumClasses)/8, (c-smallClasses-mediumClasses)%8
	return 4096 << k * (9 + j) / 8
}

// classFor returns the smallest class that holds n bytes.
func classFor(n int) int {
	for c := range numClasses {
		if classBytes(c) >= n {
			return c
		}
	}
	return -1
}
