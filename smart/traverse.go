package smart

import (
	"context"
	"encoding/binary"

	"github.com/dmindex/dmindex/remote"
)

// cursor is a position in the tree: a slot, the value it was last read
// with, and the depth the child it points to must have (encoded key bytes
// matched above the child). Depth and level fit 16 bits (an encoded key
// has at most 511 bytes), which keeps a scan's frontier entry, a cursor
// and its bookkeeping, in one 64-byte cache line: a scan of 100 pairs
// builds about 140 of them, and with 80-byte entries its bookkeeping
// missed the L1 cache a fifth more often (docs/results/README.md).
type cursor struct {
	addr   remote.Addr
	sl     slot
	node   remote.Addr // the node holding the slot (0: the root slot)
	depth  int16
	level  int16 // internal nodes above the child
	cached bool  // sl comes from a cache snapshot, not from remote memory
	// confirmed: the slot was read again after a leaf it names was found
	// born during the operation, and still names it (session.reused).
	confirmed bool
}

// with returns cur holding sl, as just read from remote memory.
func (c cursor) with(sl slot) cursor {
	c.sl, c.cached, c.confirmed = sl, false, false
	return c
}

// nodeView is an internal node as one traversal read it.
type nodeView struct {
	addr  remote.Addr
	h     header
	rev   remote.Addr
	typ   nodeType // types whose slots were read: max(slot type, header type)
	slots [256]slot
	skip  int // prefix bytes already matched above (header split in flight)
}

// slotAddr returns the address of slot i of the node.
func (n *nodeView) slotAddr(i int) remote.Addr { return n.addr.Add(uint64(nodeSlotsOff + 8*i)) }

// find returns the index of the non-empty slot with partial b, or -1.
func (n *nodeView) find(b byte) int {
	for i := range n.typ.capacity() {
		if s := n.slots[i]; !s.isEmpty() && s.partial() == b {
			return i
		}
	}
	return -1
}

// firstEmpty returns the first empty slot index read, or the capacity of
// the read type if every slot read is used.
func (n *nodeView) firstEmpty() int {
	c := n.typ.capacity()
	for i := range c {
		if n.slots[i].isEmpty() {
			return i
		}
	}
	return c
}

// readNode reads the node cur points to into s.node. It returns false (and
// a nil error) if the node does not belong at cur.depth any more: its
// header moved deeper than the slot claims, so the slot must be re-read.
func (s *session) readNode(ctx context.Context, cur cursor) (bool, error) {
	n := &s.node
	n.addr = cur.sl.addr()
	t := cur.sl.nodeType()
	if t > node256 {
		return false, corruptf("slot %v at %v has a bad node type", cur.sl, cur.addr)
	}
	buf := s.nodeBuf[:t.readBytes()]
	s.nodeReads++
	s.touchIn(ctx)
	if err := s.c.Read(ctx, n.addr, buf); err != nil {
		return false, err
	}
	n.rev = remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:]))
	n.h = header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	if n.h.isForwarded() {
		if cur.cached && n.rev == 0 && !s.t.opts.PaperNodes {
			return false, nil // a finished move: descend follows the forward
		}
		return false, s.movingRestart(ctx, cur, n.addr)
	}
	ht := n.h.nodeType()
	if n.h == 0 || ht > node256 {
		return false, nil
	}
	if ht > t {
		// The node switched type after its parent slot was written: read
		// the slots the slot's type did not cover, and repair the slot
		// (unsignaled; it fails harmlessly if the slot changed).
		rest := s.nodeBuf[t.readBytes():ht.readBytes()]
		if err := s.c.Read(ctx, n.addr.Add(uint64(t.readBytes())), rest); err != nil {
			return false, err
		}
		if !cur.cached {
			s.healOp[0] = remote.CAS(cur.addr, uint64(cur.sl), uint64(cur.sl.withType(ht)))
			_ = s.c.Post(ctx, s.healOp[:]) // best effort
		} else {
			s.raiseCachedType(ht)
		}
		t = ht
	} else if ht < t && !cur.cached {
		// The parent slot's type ran ahead of the header: a type switch
		// raised the slot and not yet the header, or died in between (I9).
		// Raising the header is the switch's own completing step (I5), and
		// monotone: help, so that a reader whose cached slot still carries
		// the old type sees the new slots too once this one returns.
		s.healOp[0] = remote.CAS(n.addr.Add(nodeHeaderOff), uint64(n.h), uint64(n.h.withType(t)))
		if err := s.c.Do(ctx, s.healOp[:]); err != nil {
			return false, err
		}
	}
	n.typ = t
	for i := range t.capacity() {
		n.slots[i] = slot(binary.LittleEndian.Uint64(s.nodeBuf[nodeSlotsOff+8*i:]))
		if n.slots[i].isFrozen() {
			return false, s.movingRestart(ctx, cur, n.addr)
		}
	}
	if n.h.depth() > int(cur.depth) {
		return false, nil
	}
	n.skip = int(cur.depth) - n.h.depth()
	if n.skip > n.h.prefixLen() {
		return false, nil
	}
	return true, nil
}

// outcome is where a descent stopped.
type outcome uint8

const (
	atLeaf     outcome = iota // cur is a leaf slot
	atMissing                 // s.node has no slot for the key's next byte
	atMismatch                // the key diverges inside s.node's prefix at mismatchAt
	atTomb                    // cur is a tombstone slot for the key's next byte
	atEnd                     // the key's encoding ended inside s.node's prefix (cannot happen for well-formed keys)
)

// descent is the result of descend.
type descent struct {
	out        outcome
	cur        cursor // the slot that led to the stopping point
	mismatchAt int    // atMismatch: index into the node's remaining prefix
	pos        int    // atMissing: position of the discriminating byte
}

// descend follows enc from cur down to a leaf slot or to the node where the
// key leaves the tree.
func (s *session) descend(ctx context.Context, enc []byte, cur cursor) (descent, error) {
	for {
		if cur.sl.isFrozen() {
			return descent{}, s.movingRestart(ctx, cur, cur.node)
		}
		if cur.sl.isTombstone() {
			if cur.cached {
				// A snapshot's tombstone may have been reused since.
				var err error
				if cur, err = s.reread(ctx, cur); err != nil {
					return descent{}, err
				}
				continue
			}
			return descent{out: atTomb, cur: cur}, nil
		}
		if cur.sl.isLeaf() {
			return descent{out: atLeaf, cur: cur}, nil
		}
		if !cur.sl.isChild() {
			return descent{}, corruptf("slot %v at %v leads nowhere", cur.sl, cur.addr)
		}
		ok, err := s.readNode(ctx, cur)
		if err != nil {
			return descent{}, err
		}
		if !ok && s.node.h.isForwarded() {
			cur = s.followForward(cur)
			continue
		}
		if !ok || s.stale(cur, s.node.rev) {
			if cur, err = s.reread(ctx, cur); err != nil {
				return descent{}, err
			}
			continue
		}
		n := &s.node
		depth := int(cur.depth)
		for i := n.skip; i < n.h.prefixLen(); i++ {
			if depth >= len(enc) {
				return descent{out: atEnd, cur: cur}, nil
			}
			if enc[depth] != n.h.prefixByte(i) {
				return descent{out: atMismatch, cur: cur, mismatchAt: i - n.skip}, nil
			}
			depth++
		}
		if depth >= len(enc) {
			return descent{out: atEnd, cur: cur}, nil
		}
		if n.skip == 0 {
			s.remember(depth, int(cur.level))
		}
		i := n.find(enc[depth])
		if i < 0 {
			return descent{out: atMissing, cur: cur, pos: depth}, nil
		}
		cur = cursor{addr: n.slotAddr(i), sl: n.slots[i], depth: int16(depth + 1), level: cur.level + 1, node: n.addr}
	}
}

// followForward returns cur, a cached slot whose node readNode found moved out
// and unlinked (s.node: a forwarded header and a nil reverse pointer: M6 of
// the move is done, so M5 linked the successor), holding instead the slot
// as the move left it, naming the successor with the grown type. It
// is a guess, as cached as cur was: the successor's reverse pointer must
// name cur's slot (stale), or the slot is read (a parent that moved, or a
// successor that moved on). A chain of moves is followed one forward at a
// time, at most four (nodeType.grown). The cache entry the traversal
// started from takes the guess if cur is its slot; the words it keeps for
// the old node stay, an older snapshot of the successor, whose slots a
// move copies to the same indexes.
//
// Without it a reader that meets a moved node through its cache waited
// for the move, dropped the entry and started again from the root.
func (s *session) followForward(cur cursor) cursor {
	guess := cur
	guess.sl, guess.confirmed = nodeSlot(cur.sl.partial(), s.node.h.nodeType().grown(), s.node.h.successor()), false
	e := s.entry
	if e == nil || cur.node != remote.Addr(e.Addr) || cur.addr != nodeSlotAddr(cur.node, s.entryIdx) || e.Slots()[s.entryIdx] != uint64(cur.sl) {
		return guess
	}
	if s.t.patched.has(e) {
		// Patched recently and stale again: the node changes under the
		// snapshot (a young tree filling), so read it afresh instead.
		s.dropEntry()
		return guess
	}
	if c := s.patchEntry(guess.sl); c != nil {
		s.t.patched.add(c)
	}
	return guess
}

// reread reads cur's slot again after finding it stale. A slot that read
// from the tree before (not from a snapshot) and holds what it held then
// is another client's change still in progress (an unlink or a split
// between its marks and its slot CAS): the re-read counts as a wait
// (session.wait); a changed slot or a snapshot's counts as a retry.
func (s *session) reread(ctx context.Context, cur cursor) (cursor, error) {
	w, err := s.readWord(ctx, cur.addr)
	if err != nil {
		return cur, err
	}
	if slot(w) == cur.sl && !cur.cached {
		err = s.wait()
	} else {
		err = s.retry()
	}
	if err != nil {
		return cur, err
	}
	if slot(w).isFrozen() {
		// The node holding the slot is moving or moved: what the slot
		// holds no longer counts (docs/smart-node-growth.md).
		return cur, s.movingRestart(ctx, cur, cur.node)
	}
	cur.confirmed = cur.sl.isLeaf() && slot(w) == cur.sl
	if cur.cached && slot(w) != cur.sl {
		s.dropEntry() // the snapshot is stale
	}
	cur.sl, cur.cached = slot(w), false
	if cur.addr == s.t.rootSlot {
		s.t.rootHint.Store(w)
	}
	if cur.sl.isEmpty() && cur.addr != s.t.rootSlot {
		return cur, corruptf("slot %v emptied", cur.addr)
	}
	return cur, nil
}

// rememberedRoot returns a cursor at the root slot holding the value the
// compute node last read there, and reads it if there is none: the root's
// address never changes, and a type it switched to since is found in its
// header by the node read.
func (s *session) rememberedRoot(ctx context.Context) (cursor, error) {
	if w := s.t.rootHint.Load(); w != 0 {
		return cursor{addr: s.t.rootSlot, sl: slot(w)}, nil
	}
	cur, err := s.root(ctx)
	if err == nil {
		s.t.rootHint.Store(uint64(cur.sl))
	}
	return cur, err
}

// root returns a cursor at the root slot, read fresh.
func (s *session) root(ctx context.Context) (cursor, error) {
	w, err := s.readWord(ctx, s.t.rootSlot)
	if err != nil {
		return cursor{}, err
	}
	return cursor{addr: s.t.rootSlot, sl: slot(w)}, nil
}
