package smart

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/dmindex/dmindex/remote"
)

// Verify walks the whole remote tree and checks every invariant: the format
// word (magic and protocol variant) matching this tree's options, header
// depths and prefixes consistent with the path, node types covering every
// used slot (and the parent slot's type never ahead of the header's), at
// most one slot per partial key, reverse pointers, leaf checksums, valid
// bits and free locks, each leaf's key matching its path, keys in strictly
// increasing order, and no node or leaf reachable twice. It must run while
// no operation is in flight; it returns an error wrapping ErrCorrupt that
// names the first violation and, where one applies, the invariant of
// docs/smart-protocol.md it breaks ("I5: leaf …": a completing step of an
// operation that returned is missing). It also checks that no object this
// compute node holds freed (remote.ComputeNode.Freed) is linked or held
// twice, with Options.Reclaim, that no leaf it holds for reuse is linked
// (I8), and that the memory compute nodes that closed the tree handed on
// (its depot, internal/depot) is neither linked nor held for reuse.
func (t *Tree) Verify(ctx context.Context) error {
	s, err := t.sessionFor(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	w, err := s.readWord(ctx, t.rootSlot.Add(8))
	if err != nil {
		return wrapRemote(err)
	}
	if w != formatWord(t.opts) {
		return corruptf("format word %#x, want %#x", w, formatWord(t.opts))
	}
	root, err := s.root(ctx)
	if err != nil {
		return err
	}
	v := verifier{s: s, seen: make(map[remote.Addr]bool)}
	if err := v.node(ctx, root, nil); err != nil {
		return wrapRemote(err)
	}
	if err := t.checkLeaves(v.seen); err != nil {
		return err
	}
	if err := t.checkDepot(ctx, s.c, v.seen); err != nil {
		return err
	}
	return checkFreed(s.c.ComputeNode(), v.seen)
}

// checkFreed returns an error wrapping ErrCorrupt if an object that the
// compute node cn holds freed (remote.ComputeNode.Freed) is in linked (the
// objects a Verify walk reached) or is held twice: either lets two
// allocations, or an allocation and the tree, share memory.
func checkFreed(cn *remote.ComputeNode, linked map[remote.Addr]bool) error {
	held := make(map[remote.Addr]bool)
	for a, size := range cn.Freed() {
		switch {
		case linked[a]:
			return corruptf("object %v of %d bytes is freed on compute node %d but linked", a, size, cn.ID())
		case held[a]:
			return corruptf("object %v of %d bytes is freed twice on compute node %d", a, size, cn.ID())
		}
		held[a] = true
	}
	return nil
}

type verifier struct {
	s    *session
	seen map[remote.Addr]bool
	last []byte // last key visited
	any  bool
}

func (v *verifier) node(ctx context.Context, cur cursor, path []byte) error {
	a := cur.sl.addr()
	if cur.sl.isLeaf() || a == 0 {
		return corruptf("slot %v at %v: expected a node", cur.sl, cur.addr)
	}
	if v.seen[a] {
		return corruptf("node %v reachable twice", a)
	}
	v.seen[a] = true
	buf := make([]byte, v.s.t.nodeReadBytes(cur.sl))
	if err := v.s.c.Read(ctx, a, buf); err != nil {
		return err
	}
	rev := remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:]))
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	switch {
	case rev&revMoving != 0:
		return splitLockHeld("node", a, rev, cur.addr)
	case rev != cur.addr:
		return corruptf("I5: node %v: reverse pointer %v, parent slot is %v", a, rev, cur.addr)
	case h.depth() != len(path):
		return corruptf("I5: node %v: header depth %d, path length %d", a, h.depth(), len(path))
	case h.isForwarded():
		return corruptf("node %v: forwarded to %v (moved) but still linked", a, h.successor())
	case h == 0 || h.nodeType() > node256:
		return corruptf("node %v: bad header %#x", a, uint64(h))
	case !v.s.t.opts.PaperNodes && cur.sl.nodeType() != h.nodeType():
		return corruptf("node %v: parent slot type %v, header type %v (size classes switch type by moving)", a, cur.sl.nodeType(), h.nodeType())
	case cur.sl.nodeType() > h.nodeType():
		return corruptf("I5: node %v: parent slot type %v ahead of header type %v", a, cur.sl.nodeType(), h.nodeType())
	case v.s.t.opts.LockedInternal && binary.LittleEndian.Uint64(buf[nodeLockOff:]) != 0:
		return corruptf("I5: node %v: lock held (%#x)", a, binary.LittleEndian.Uint64(buf[nodeLockOff:]))
	}
	path = slices.Clip(path)
	for i := range h.prefixLen() {
		path = append(path, h.prefixByte(i))
	}
	var order [256]int
	var used [256]bool
	n := 0
	for i := range slotsRead(buf) {
		sl := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
		if sl.isEmpty() {
			continue
		}
		if sl.isFrozen() {
			return corruptf("node %v: slot %d frozen (%v) but the node is linked and not moving", a, i, sl)
		}
		if i >= h.nodeType().capacity() {
			return corruptf("I5: node %v: slot %d used beyond type %v", a, i, h.nodeType())
		}
		if used[sl.partial()] {
			return corruptf("I2: node %v: partial key %#02x in two slots", a, sl.partial())
		}
		used[sl.partial()] = true
		order[sl.partial()] = i
		n++
	}
	for b := range 256 {
		if !used[b] {
			continue
		}
		i := order[b]
		sl := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
		child := cursor{addr: nodeSlotAddr(a, i), sl: sl, depth: int16(len(path) + 1)}
		cpath := append(slices.Clip(path), byte(b))
		var err error
		switch {
		case sl.isTombstone():
		case sl.isLeaf():
			err = v.leaf(ctx, child, cpath)
		default:
			err = v.node(ctx, child, cpath)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// splitLockHeld reports an object whose reverse pointer still carries
// revMoving: a split of it took the flag (which serialises splits like a
// lock) and did not finish, because its client is still running or died
// between the flag and the completing CAS (I5). Reported as a held lock,
// which is what it is until recovery completes or undoes the split.
func splitLockHeld(kind string, a, rev, slot remote.Addr) error {
	return corruptf("I5: %s %v: split lock held (reverse pointer %v carries the moving flag, slot is %v): a split did not finish", kind, a, revSlot(rev), slot)
}

func (v *verifier) leaf(ctx context.Context, cur cursor, path []byte) error {
	a := cur.sl.addr()
	if v.seen[a] {
		return corruptf("leaf %v reachable twice", a)
	}
	v.seen[a] = true
	lv, st, err := v.s.readLeaf(ctx, cur.sl, true)
	if err != nil {
		return err
	}
	switch {
	case st == leafTorn:
		return corruptf("I7: leaf %v under %v: bad checksum or lengths", a, cur.addr)
	case st == leafRetired:
		return corruptf("I4: leaf %v under %v: retired but linked", a, cur.addr)
	case lv.lock != 0:
		return corruptf("I5: leaf %v: lock held (%#x)", a, lv.lock)
	case lv.rev&revMoving != 0:
		return splitLockHeld("leaf", a, lv.rev, cur.addr)
	case lv.rev != cur.addr:
		return corruptf("I5: leaf %v: reverse pointer %v, slot is %v", a, lv.rev, cur.addr)
	}
	enc := appendEncoded(nil, lv.key)
	if !bytes.HasPrefix(enc, path) {
		return corruptf("I1: leaf %v: key %q does not match its path %x", a, lv.key, path)
	}
	if v.any && bytes.Compare(v.last, lv.key) >= 0 {
		return corruptf("I1: keys out of order: %q then %q", v.last, lv.key)
	}
	v.last, v.any = append(v.last[:0], lv.key...), true
	return nil
}

// String describes the tree for error messages.
func (t *Tree) String() string { return fmt.Sprintf("smart.Tree(%q)", t.Name()) }
