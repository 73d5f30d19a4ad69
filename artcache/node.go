package artcache

import (
	"encoding/binary"
	"iter"
	"math/bits"
	"unsafe"
)

// kind says what a node header belongs to. The first four kinds are headers
// embedded in an Entry (Entry.leaf); the others are inner nodes of the ART.
type kind uint8

const (
	kindNone   kind = iota // an Entry that is not in any cache
	kindHashed             // an Entry in a hash index; prefix is its full key
	kindHeld               // an Entry stored at an inner node's position; parent is that node
	kindLeaf               // an Entry that is itself an ART leaf
	kind4                  // node4: up to 4 children, sorted keys
	kind8                  // node8: up to 8 children, sorted keys
	kind16                 // node16: up to 16 children, sorted keys
	kind48                 // node48: up to 48 children behind a 256-byte index
	kind256                // node256: a child pointer per byte
)

// node is the header every ART node starts with. Inner nodes embed it (via
// inner) as their first field and a leaf is the header at the start of its
// Entry, so a *node is converted to the concrete type its kind names.
//
// A node stands for a position in key space: the key of length depth that
// leads to it. The bytes between the parent's position and this one are the
// parent's edge byte followed by prefix (path compression).
type node struct {
	parent *node  // inner node holding this one; nil for the root
	prefix string // compressed path, owned and counted by the tree
	depth  uint32 // length of the key ending at this node's position
	kind   kind
	edge   byte   // key byte under which parent holds this node
	n      uint16 // number of children (inner nodes)
}

// inner is the common part of the inner node kinds. An inner node always has
// an entry or at least two children (so the tree stays path-compressed), and
// at least one child (a childless position is a leaf).
type inner struct {
	node
	entry *Entry // entry whose prefix ends at this position, or nil
}

type node4 struct {
	inner
	keys  [4]byte // sorted; the first n are used
	child [4]*node
}

type node8 struct {
	inner
	keys  [8]byte // sorted; the first n are used
	child [8]*node
}

type node16 struct {
	inner
	keys  [16]byte // sorted; the first n are used
	child [16]*node
}

type node48 struct {
	inner
	index [256]uint8 // 1 + position in child of the child under a byte; 0: none
	child [48]*node
}

type node256 struct {
	inner
	child [256]*node
}

// nodeBytes is the memory of one inner node of each kind, capacity the
// number of children it holds and shrinkAt the child count at or below
// which it is replaced by the next smaller kind (with some hysteresis so
// that one insert and one removal at the boundary do not resize twice).
var (
	nodeBytes = [...]int64{
		kind4:   int64(unsafe.Sizeof(node4{})),
		kind8:   int64(unsafe.Sizeof(node8{})),
		kind16:  int64(unsafe.Sizeof(node16{})),
		kind48:  int64(unsafe.Sizeof(node48{})),
		kind256: int64(unsafe.Sizeof(node256{})),
	}
	capacity = [...]int{kind4: 4, kind8: 8, kind16: 16, kind48: 48, kind256: 256}
	shrinkAt = [...]int{kind4: -1, kind8: 3, kind16: 6, kind48: 12, kind256: 37}
)

// A leaf's header is the first field of its Entry: this fails to compile
// otherwise.
var _ = [1]struct{}{}[unsafe.Offsetof(Entry{}.leaf)]

// The conversions below are valid because every inner node is allocated as
// its concrete kind with the header at offset 0, and every leaf header is
// the first field of an Entry.

func (n *node) asEntry() *Entry   { return (*Entry)(unsafe.Pointer(n)) }
func (n *node) asInner() *inner   { return (*inner)(unsafe.Pointer(n)) }
func (n *node) as4() *node4       { return (*node4)(unsafe.Pointer(n)) }
func (n *node) as8() *node8       { return (*node8)(unsafe.Pointer(n)) }
func (n *node) as16() *node16     { return (*node16)(unsafe.Pointer(n)) }
func (n *node) as48() *node48     { return (*node48)(unsafe.Pointer(n)) }
func (n *node) as256() *node256   { return (*node256)(unsafe.Pointer(n)) }
func (n *node) isFull() bool      { return int(n.n) == capacity[n.kind] }
func (n *node) canShrink() bool   { return int(n.n) <= shrinkAt[n.kind] }
func (n *node) smallerKind() kind { return n.kind - 1 }

// newInner allocates an empty inner node of kind k.
func newInner(k kind) *node {
	var n *node
	switch k {
	case kind4:
		n = &new(node4).node
	case kind8:
		n = &new(node8).node
	case kind16:
		n = &new(node16).node
	case kind48:
		n = &new(node48).node
	default:
		n = &new(node256).node
	}
	n.kind = k
	return n
}

// sorted returns the key and child arrays of a node4, node8 or node16
// (whose first n.n keys are sorted), or nil slices for other kinds.
func (n *node) sorted() ([]byte, []*node) {
	switch n.kind {
	case kind4:
		x := n.as4()
		return x.keys[:], x.child[:]
	case kind8:
		x := n.as8()
		return x.keys[:], x.child[:]
	case kind16:
		x := n.as16()
		return x.keys[:], x.child[:]
	}
	return nil, nil
}

// value returns the entry whose prefix ends at n's position, or nil.
func (n *node) value() *Entry {
	if n.kind == kindLeaf {
		return n.asEntry()
	}
	return n.asInner().entry
}

// child returns n's child under b, or nil (always nil for a leaf).
func (n *node) child(b byte) *node {
	switch n.kind {
	case kind4, kind8:
		keys, child := n.sorted()
		for i := range int(n.n) {
			if keys[i] == b {
				return child[i]
			}
		}
	case kind16:
		x := n.as16()
		if i := index16(&x.keys, int(n.n), b); i >= 0 {
			return x.child[i]
		}
	case kind48:
		x := n.as48()
		if i := x.index[b]; i != 0 {
			return x.child[i-1]
		}
	case kind256:
		return n.as256().child[b]
	}
	return nil
}

// childRef returns the address of the pointer to n's child under b, which
// must exist.
func (n *node) childRef(b byte) **node {
	switch n.kind {
	case kind4, kind8:
		keys, child := n.sorted()
		return &child[sortedIndex(keys[:n.n], b)]
	case kind16:
		x := n.as16()
		return &x.child[index16(&x.keys, int(n.n), b)]
	case kind48:
		x := n.as48()
		return &x.child[x.index[b]-1]
	}
	return &n.as256().child[b]
}

// children yields n's children in key order.
func (n *node) children() iter.Seq2[byte, *node] {
	return func(yield func(byte, *node) bool) {
		switch n.kind {
		case kind4, kind8, kind16:
			keys, child := n.sorted()
			for i := range int(n.n) {
				if !yield(keys[i], child[i]) {
					return
				}
			}
		case kind48:
			x := n.as48()
			for b, i := range x.index {
				if i != 0 && !yield(byte(b), x.child[i-1]) {
					return
				}
			}
		case kind256:
			for b, c := range n.as256().child {
				if c != nil && !yield(byte(b), c) {
					return
				}
			}
		}
	}
}

// link adds c under b to the inner node n, which has room and no child
// under b.
func (n *node) link(b byte, c *node) {
	switch n.kind {
	case kind4, kind8, kind16:
		keys, child := n.sorted()
		insertSorted(keys, child, int(n.n), b, c)
	case kind48:
		x := n.as48()
		for i := range x.child {
			if x.child[i] == nil {
				x.child[i], x.index[b] = c, uint8(i+1)
				break
			}
		}
	case kind256:
		n.as256().child[b] = c
	}
	n.n++
	c.parent, c.edge = n, b
}

// unlink removes the child under b from the inner node n.
func (n *node) unlink(b byte) {
	switch n.kind {
	case kind4, kind8, kind16:
		keys, child := n.sorted()
		removeSorted(keys, child, int(n.n), b)
	case kind48:
		x := n.as48()
		x.child[x.index[b]-1], x.index[b] = nil, 0
	case kind256:
		n.as256().child[b] = nil
	}
	n.n--
}

// sortedIndex returns the position of b in keys, which holds it.
func sortedIndex(keys []byte, b byte) int {
	i := 0
	for keys[i] != b {
		i++
	}
	return i
}

// index16 returns the position of b among the first n of keys (whose
// others are zero), or -1. It compares eight keys at a time: in
// (x-0x01…)&^x&0x80… the lowest set bit marks the first zero byte of x.
func index16(keys *[16]byte, n int, b byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for half := 0; half < 16; half += 8 {
		x := binary.LittleEndian.Uint64(keys[half:]) ^ uint64(b)*ones
		if m := (x - ones) &^ x & highs; m != 0 {
			if i := half + bits.TrailingZeros64(m)/8; i < n {
				return i
			}
			return -1
		}
	}
	return -1
}

func insertSorted(keys []byte, child []*node, n int, b byte, c *node) {
	i := 0
	for i < n && keys[i] < b {
		i++
	}
	copy(keys[i+1:n+1], keys[i:n])
	copy(child[i+1:n+1], child[i:n])
	keys[i], child[i] = b, c
}

func removeSorted(keys []byte, child []*node, n int, b byte) {
	i := sortedIndex(keys[:n], b)
	copy(keys[i:n-1], keys[i+1:n])
	copy(child[i:n-1], child[i+1:n])
	keys[n-1], child[n-1] = 0, nil
}
