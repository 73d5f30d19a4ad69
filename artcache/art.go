package artcache

import "strings"

// artTree indexes entries by prefix in a local adaptive radix tree. Entries
// sit at leaves (the Entry is the leaf) and at inner positions (an inner
// node holds the entry whose prefix ends where the node is), because the
// prefixes of a SMART tree's nodes are prefixes of one another. Each node
// stores only its compressed path, so shared key prefixes are stored once.
type artTree struct {
	root  *node
	bytes int64 // inner nodes plus the prefix bytes of every node
}

// size returns the memory of the tree without its entries.
func (t *artTree) size() int64 { return t.bytes }

// lookup descends along key to the deepest matching position, then walks
// back up to the first entry with a slot for the next key byte.
func (t *artTree) lookup(key []byte) (*Entry, int, int, bool) {
	for n := t.deepestNode(key); n != nil; n = n.parent {
		d := int(n.depth)
		if d == len(key) {
			continue
		}
		if e := n.value(); e != nil {
			if i := e.slot(key[d]); i >= 0 {
				return e, i, d, true
			}
		}
	}
	return nil, 0, 0, false
}

// deepest returns the deepest entry whose prefix is a proper prefix of key,
// and the length of that prefix.
func (t *artTree) deepest(key []byte) (*Entry, int) {
	for n := t.deepestNode(key); n != nil; n = n.parent {
		if d := int(n.depth); d < len(key) {
			if e := n.value(); e != nil {
				return e, d
			}
		}
	}
	return nil, 0
}

// deepestNode returns the deepest node whose position is a prefix of key.
func (t *artTree) deepestNode(key []byte) *node {
	var last *node
	for n, depth := t.root, 0; n != nil; {
		p := n.prefix
		if len(key)-depth < len(p) || string(key[depth:depth+len(p)]) != p {
			break
		}
		depth += len(p)
		last = n
		if depth == len(key) {
			break
		}
		n, depth = n.child(key[depth]), depth+1
	}
	return last
}

// get returns the entry stored under exactly prefix, or nil.
func (t *artTree) get(prefix []byte) *Entry {
	for n, depth := t.root, 0; n != nil; {
		p := n.prefix
		if len(prefix)-depth < len(p) || string(prefix[depth:depth+len(p)]) != p {
			return nil
		}
		depth += len(p)
		if depth == len(prefix) {
			return n.value()
		}
		n, depth = n.child(prefix[depth]), depth+1
	}
	return nil
}

// insert stores e, which is not cached, under prefix and returns the entry
// it replaces, or nil.
func (t *artTree) insert(prefix []byte, e *Entry) *Entry {
	if t.root == nil {
		t.root = t.newLeaf(e, prefix, 0)
		return nil
	}
	n, depth := t.root, 0
	for {
		m := commonPrefix(n.prefix, prefix[depth:])
		if m < len(n.prefix) {
			t.split(n, m, prefix, depth, e)
			return nil
		}
		depth += m
		if depth == len(prefix) {
			return t.replace(n, e)
		}
		c := n.child(prefix[depth])
		if c == nil {
			t.addChild(n, prefix[depth], t.newLeaf(e, prefix, depth+1))
			return nil
		}
		n, depth = c, depth+1
	}
}

// remove takes the cached e out of the tree, then compacts the inner node
// it leaves.
func (t *artTree) remove(e *Entry) {
	switch e.leaf.kind {
	case kindLeaf:
		p, b := e.leaf.parent, e.leaf.edge
		t.bytes -= int64(len(e.leaf.prefix))
		e.leaf = node{}
		if p == nil {
			t.root = nil
			return
		}
		p.unlink(b)
		t.compact(p)
	case kindHeld:
		p := e.leaf.parent
		p.asInner().entry = nil
		e.leaf = node{}
		t.compact(p)
	}
}

// newLeaf makes e a leaf for prefix whose compressed path starts at
// prefix[from].
func (t *artTree) newLeaf(e *Entry, prefix []byte, from int) *node {
	e.leaf = node{kind: kindLeaf, depth: uint32(len(prefix))}
	t.setPrefix(&e.leaf, string(prefix[from:]))
	return &e.leaf
}

// split inserts e where prefix, matched up to depth, leaves n's compressed
// path after m bytes: a new node4 takes the shared part and gets n and
// either e itself (prefix ends there) or a new leaf for e as children.
func (t *artTree) split(n *node, m int, prefix []byte, depth int, e *Entry) {
	in := newInner(kind4)
	t.bytes += nodeBytes[kind4]
	*t.ref(n) = in
	in.parent, in.edge, in.depth = n.parent, n.edge, uint32(depth+m)
	t.setPrefix(in, string(prefix[depth:depth+m]))
	b := n.prefix[m]
	t.setPrefix(n, strings.Clone(n.prefix[m+1:]))
	in.link(b, n)
	if depth+m == len(prefix) {
		hold(in, e)
		return
	}
	in.link(prefix[depth+m], t.newLeaf(e, prefix, depth+m+1))
}

// replace stores e at n's position and returns the entry it replaces.
func (t *artTree) replace(n *node, e *Entry) *Entry {
	if n.kind == kindLeaf {
		old := n.asEntry()
		*t.ref(n) = &e.leaf
		e.leaf, old.leaf = old.leaf, node{}
		return old
	}
	old := n.asInner().entry
	hold(n, e)
	if old != nil {
		old.leaf = node{}
	}
	return old
}

// addChild adds c under b to n, turning a leaf into a node4 holding its
// entry and growing a full inner node first.
func (t *artTree) addChild(n *node, b byte, c *node) {
	switch {
	case n.kind == kindLeaf:
		e := n.asEntry()
		in := newInner(kind4)
		t.bytes += nodeBytes[kind4]
		t.takePlace(n, in)
		hold(in, e)
		n = in
	case n.isFull():
		n = t.resize(n, n.kind+1)
	}
	n.link(b, c)
}

// compact restores the invariants of the inner node n after it lost its
// entry or a child: a childless n becomes its entry's leaf, an n without
// entry and with one child merges into that child, a sparse n shrinks.
func (t *artTree) compact(n *node) {
	e := n.asInner().entry
	switch {
	case n.n == 0:
		e.leaf = node{kind: kindLeaf}
		t.takePlace(n, &e.leaf)
		t.bytes -= nodeBytes[n.kind]
	case n.n == 1 && e == nil:
		var b byte
		var c *node
		for b, c = range n.children() {
		}
		*t.ref(n) = c
		var s strings.Builder
		s.Grow(len(n.prefix) + 1 + len(c.prefix))
		s.WriteString(n.prefix)
		s.WriteByte(b)
		s.WriteString(c.prefix)
		t.setPrefix(c, s.String())
		c.parent, c.edge = n.parent, n.edge
		t.bytes -= nodeBytes[n.kind] + int64(len(n.prefix))
	case n.canShrink():
		t.resize(n, n.smallerKind())
	}
}

// resize replaces the inner node n by a node of kind k with the same
// position, entry and children, and returns it.
func (t *artTree) resize(n *node, k kind) *node {
	nn := newInner(k)
	t.bytes += nodeBytes[k] - nodeBytes[n.kind]
	t.takePlace(n, nn)
	if e := n.asInner().entry; e != nil {
		hold(nn, e)
	}
	for b, c := range n.children() {
		nn.link(b, c)
	}
	return nn
}

// takePlace puts nn where old is: same parent slot, position and compressed
// path (whose bytes stay counted once: old is discarded).
func (t *artTree) takePlace(old, nn *node) {
	*t.ref(old) = nn
	nn.parent, nn.prefix, nn.depth, nn.edge = old.parent, old.prefix, old.depth, old.edge
}

// ref returns the address of the pointer to n: its parent's child pointer,
// or the root.
func (t *artTree) ref(n *node) **node {
	if n.parent == nil {
		return &t.root
	}
	return n.parent.childRef(n.edge)
}

func (t *artTree) setPrefix(n *node, s string) {
	t.bytes += int64(len(s) - len(n.prefix))
	n.prefix = s
}

// hold stores e at the position of the inner node n.
func hold(n *node, e *Entry) {
	n.asInner().entry = e
	e.leaf = node{kind: kindHeld, parent: n}
}

// commonPrefix returns the length of the longest common prefix of p and k.
func commonPrefix(p string, k []byte) int {
	i := 0
	for i < len(p) && i < len(k) && p[i] == k[i] {
		i++
	}
	return i
}

// next returns the entry after the cached e in prefix order, wrapping
// around to the first: the order the CLOCK hand sweeps. An entry held at an
// inner position comes before the entries below it.
func (t *artTree) next(e *Entry) *Entry {
	n := &e.leaf
	if n.kind == kindHeld {
		return firstEntry(n.parent.childFrom(0))
	}
	for n.parent != nil {
		if c := n.parent.childFrom(int(n.edge) + 1); c != nil {
			return firstEntry(c)
		}
		n = n.parent
	}
	return firstEntry(t.root)
}

// firstEntry returns the first entry at or below n in prefix order.
func firstEntry(n *node) *Entry {
	for {
		if e := n.value(); e != nil {
			return e
		}
		n = n.childFrom(0) // an inner node without an entry has children
	}
}

// childFrom returns n's child under the smallest key byte ≥ b, or nil.
func (n *node) childFrom(b int) *node {
	switch n.kind {
	case kind4, kind8, kind16:
		keys, child := n.sorted()
		for i := range int(n.n) {
			if int(keys[i]) >= b {
				return child[i]
			}
		}
	case kind48:
		x := n.as48()
		for k := b; k < 256; k++ {
			if i := x.index[k]; i != 0 {
				return x.child[i-1]
			}
		}
	case kind256:
		x := n.as256()
		for k := b; k < 256; k++ {
			if x.child[k] != nil {
				return x.child[k]
			}
		}
	}
	return nil
}
