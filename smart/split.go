package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// nodeImage builds a new internal node (rev pointer, header, slots) in
// buf: only the bytes of its type are written; the rest of its 256-slot
// allocation stays zero.
func nodeImage(buf []byte, rev remote.Addr, h header, slots ...slot) []byte {
	n := h.nodeType().readBytes()
	buf = grow(buf, n)
	clear(buf)
	binary.LittleEndian.PutUint64(buf[nodeRevOff:], uint64(rev))
	binary.LittleEndian.PutUint64(buf[nodeHeaderOff:], uint64(h))
	for i, sl := range slots {
		binary.LittleEndian.PutUint64(buf[nodeSlotsOff+8*i:], uint64(sl))
	}
	return buf
}

// piece is one staged WRITE: bytes [off, off+n) of session.staged to at.
type piece struct {
	at     remote.Addr
	off, n int
}

// stage copies img into the session's staging buffer as a WRITE to at.
func (s *session) stage(at remote.Addr, img []byte) {
	s.pieces = append(s.pieces, piece{at, len(s.staged), len(img)})
	s.staged = append(s.staged, img...)
}

// stagedOps returns the staged WRITEs as a batch.
func (s *session) stagedOps() []remote.Op {
	ops := s.batch()
	for _, p := range s.pieces {
		ops = append(ops, remote.Write(p.at, s.staged[p.off:p.off+p.n]))
	}
	return ops
}

func nodeSlotAddr(node remote.Addr, i int) remote.Addr {
	return node.Add(uint64(nodeSlotsOff + 8*i))
}

// insertIntoNode is the normal insert: the key's next byte has no slot in
// s.node. Write the leaf, then CAS the first empty slot. Partial keys are
// placed in increasing slot order and slots never become empty again, so an
// inserter that tries the slots in order either wins one or learns from the
// failed CAS that its partial key is already there. Slots behind the node's
// capacity are used the same way (node type switch), after which the type is
// raised in the header before Put returns.
func (s *session) insertIntoNode(ctx context.Context, d descent, key, value []byte) (bool, cursor, error) {
	n := &s.node
	b := s.enc[d.pos]
	limit := 256
	if !s.t.opts.PaperNodes {
		// By size class a node holds its type's slots: a full one moves.
		limit = n.typ.capacity()
		if n.firstEmpty() >= limit {
			return s.growNode(ctx, d, key, value)
		}
	}
	class := s.t.lf.classOf(key, value)
	la, err := s.allocLeaf(ctx, n.addr.MN(), class)
	if err != nil {
		return false, d.cur, err
	}
	// Normal insert (docs/smart-protocol.md):
	//  1. W(leaf), complete before the CAS that links it (I3; link decides
	//     between one batch and two round trips).
	//  2. CAS(slot j: empty → leaf) from the first slot the snapshot saw
	//     empty (I2). Slots never return to empty and keep their partial
	//     key (I1), so a failed CAS names what took the slot: our key (follow
	//     it) or another (try the next slot).
	//  3. A slot past the capacity: raise the header type before returning
	//     (I5), also when helping another insert that used one (I6).
	j := n.firstEmpty()
	s.img = s.t.lf.image(s.img, n.slotAddr(j), key, value, class, s.t.epoch())
	want := leafSlot(b, class, la)
	ops := append(s.batch(), remote.Write(la, s.img))
	for ; j < limit; j++ {
		if ops, err = s.link(ctx, ops, remote.CAS(n.slotAddr(j), 0, uint64(want))); err != nil {
			return false, d.cur, err
		}
		got := slot(ops[len(ops)-1].Old)
		if got.isEmpty() {
			if sn, ok := s.snapshotOf(d.pos, n.addr); ok {
				s.cacheInserted(sn, j, want)
			}
			if j >= n.h.nodeType().capacity() {
				return true, d.cur, s.raiseType(context.WithoutCancel(ctx), d.cur, n.addr, n.h, typeFor(j))
			}
			return true, d.cur, nil
		}
		if got.partial() == b {
			if j >= n.h.nodeType().capacity() {
				// Another insert put the key behind the node's capacity and may
				// not have raised the type yet: help, so that nothing this
				// operation does on top of it can be invisible once it returns.
				if err := s.raiseType(context.WithoutCancel(ctx), d.cur, n.addr, n.h, typeFor(j)); err != nil {
					return false, d.cur, err
				}
			}
			return false, cursor{addr: n.slotAddr(j), sl: got, depth: int16(d.pos + 1), level: d.cur.level + 1, node: n.addr}, nil
		}
		// Slot j went to another partial key: fix the leaf's reverse pointer
		// and try the next slot (in the same round trip if the leaf is on
		// the node's memory node).
		s.img = putWord(s.img[:0], uint64(n.slotAddr(j+1)))
		ops = append(s.batch(), remote.Write(la.Add(leafRevOff), s.img[:8]))
	}
	if limit < 256 {
		// Other inserts filled the node: read it again, and move it.
		s.dropUnlinked(la, class)
		return false, d.cur, nil
	}
	return false, d.cur, corruptf("node %v has no free slot for partial key %#02x", n.addr, b)
}

// raiseType records a node type switch: the header's type must cover the
// new slot before the insert returns (I5; readers trust max(slot type,
// header type)); the parent slot is raised in the same round trip on a best-effort
// basis, and readers repair it when they find it behind.
func (s *session) raiseType(ctx context.Context, parent cursor, node remote.Addr, h header, t nodeType) error {
	hdr := node.Add(nodeHeaderOff)
	ops := s.batch()
	if parent.sl.nodeType() < t && parent.sl.addr() == node {
		ops = append(ops, remote.CAS(parent.addr, uint64(parent.sl), uint64(parent.sl.withType(t))))
	}
	for h.nodeType() < t {
		ops = append(ops, remote.CAS(hdr, uint64(h), uint64(h.withType(t))))
		if err := s.do(ctx, ops); err != nil {
			return err
		}
		h = header(ops[len(ops)-1].Old)
		if h.nodeType() >= t || ops[len(ops)-1].Succeeded() {
			return nil
		}
		ops = s.batch()
	}
	return nil
}

// splitLeaf replaces the leaf at cur (holding another key, old, and locked
// by this session) by a chain of new internal nodes covering the common
// prefix of both encoded keys and ending in a node with both leaves. The
// chain, the new leaf and the old leaf's reverse pointer, moved to its slot
// in the new node, are written first; then one CAS on cur's slot publishes
// the chain; then the old leaf's lock is released, unsignaled.
//
// The lock makes the split one publishing round trip: nothing else moves or
// unlinks a locked leaf (deletes, out-of-place updates and splits all take
// it), so the slot CAS cannot lose, and the reverse pointer can move before
// the CAS (I3: it is part of what the CAS publishes; I6: a reader that
// reaches the leaf through a stale cached slot sees it moved, also after a
// concurrent operation built on the new node). A reader that reads the moved
// pointer before the CAS lands reads the slot again until it does.
func (s *session) splitLeaf(ctx context.Context, cur cursor, old leafView, key, value []byte) (bool, cursor, error) {
	if old.rev != cur.addr || s.lost() {
		// Moved since the slot was read (I5), or decided on what may be
		// reused memory (I8): read the slot again.
		s.unlockAsync(ctx, cur.sl)
		return false, cur, errRestart
	}
	s.enc2 = appendEncoded(s.enc2[:0], old.key)
	e1, e2 := s.enc, s.enc2
	lcp := 0
	for lcp < len(e1) && lcp < len(e2) && e1[lcp] == e2[lcp] {
		lcp++
	}
	if lcp < int(cur.depth) || lcp >= len(e1) || lcp >= len(e2) {
		s.unlockAsync(ctx, cur.sl)
		return false, cur, corruptf("leaf %v under slot %v does not share the path to it", cur.sl.addr(), cur.addr)
	}
	chain, err := s.buildChain(ctx, cur, lcp, key, value)
	if err != nil {
		s.unlockAsync(ctx, cur.sl)
		return false, cur, err
	}
	revAt, newRev := cur.sl.addr().Add(leafRevOff), nodeSlotAddr(chain.final, 0)
	s.img = putWord(s.img[:0], uint64(newRev))
	ops := append(s.stagedOps(), remote.Write(revAt, s.img[:8]))
	repl := nodeSlot(cur.sl.partial(), chain.firstType, chain.first)
	var ok bool
	var next cursor
	if s.t.opts.LockedInternal && cur.node != 0 {
		ok, next, err = s.publishLocked(ctx, cur, leafLockAddr(cur.sl), ops, repl, 0)
	} else {
		ops, err = s.linkUnder(ctx, leafLockAddr(cur.sl), ops, remote.CAS(cur.addr, uint64(cur.sl), uint64(repl)))
		if err == nil {
			got := slot(ops[len(ops)-1].Old)
			ok, next = got == cur.sl, cur.with(got)
		}
	}
	if err == nil && !ok && next.sl == cur.sl|slotFrozen {
		// The node holding the slot is moving: point the reverse pointer
		// where the leaf now is, release, and start again.
		if err := s.followMove(ctx, cur, revAt, newRev); err != nil {
			return false, next, err
		}
		s.dropChain(chain)
		s.unlockAsync(ctx, cur.sl)
		return false, next, nil
	}
	if err == nil && !ok {
		return false, next, lockedSlotChanged(cur, next.sl)
	}
	if err == errRestart {
		// The lock was lost (holding): the repairer points the reverse
		// pointer back; write nothing more.
		s.dropUnlinked(chain.leaf, chain.leafClass)
		return false, cur, err
	}
	if errors.Is(err, ErrContention) {
		// Every batch was late and the session abandoned its locks
		// (session.abandon): the repairer points the reverse pointer back
		// and releases; a WRITE of the release now could free its lock.
		return false, next, err
	}
	if err != nil {
		// The pool failed: put the reverse pointer back before the release.
		s.img = putWord(s.img[:0], uint64(cur.addr))
		ops = append(s.batch(), remote.Write(cur.sl.addr().Add(leafRevOff), s.img[:8]),
			remote.Write(leafLockAddr(cur.sl), zeroWord[:]))
		_ = s.c.Post(ctx, ops) // best effort: err says why it failed
		return false, next, err
	}
	s.unlockAsync(ctx, cur.sl)
	s.rememberNew(cur, repl, e1[:lcp], chain.final, int(cur.level)+chain.n, chain.oldSlot, chain.newSlot)
	return true, cur, nil
}

// dropChain frees the nodes and the new leaf of a chain that was never
// linked and that nothing points into any more (the old leaf's reverse
// pointer moved on).
func (s *session) dropChain(c chain) {
	for i, a := range c.nodes {
		_ = s.dropNode(a, c.nodeType(i), nil)
	}
	s.dropUnlinked(c.leaf, c.leafClass)
}

// chainAlloc allocates the first node of a split's chain at cur. A child
// of the root goes to the memory node its partial key picks (b mod the
// number of memory nodes: the same on every compute node, whatever the
// timing), so that the tree's subtrees spread over them evenly for uniform
// keys; a chain further down goes on the memory node of the slot that links
// it, so that the slot's CAS can share the round trip of the chain's WRITEs
// (a WRITE to another memory node must complete before the CAS is posted,
// I3), unless this compute node has placed more than its share there
// (lighter: subtrees differ in size when keys are not uniform) or it is
// short of room (allocNear).
func (s *session) chainAlloc(ctx context.Context, cur cursor, typ nodeType) (remote.Addr, error) {
	switch cur.depth {
	case 0: // the root slot
		return s.allocOn(ctx, -1, s.t.nodeAlloc(typ), addrAlign)
	case 1: // the root's slots: by partial key, the same on every compute node
		return s.allocNear(ctx, int(s.enc[0])%len(s.t.placed), s.t.nodeAlloc(typ), addrAlign)
	}
	return s.allocNear(ctx, s.t.lighter(cur.addr.MN()), s.t.nodeAlloc(typ), addrAlign)
}

// splitType is the type of a node that a leaf split creates under a slot
// of a node that is dense or not (parentDense): the paper's NODE_4 with
// Options.PaperNodes; otherwise a NODE_8 under a dense node and a NODE_2
// under any other. Under a dense node a key is likely to be followed by
// others: the nodes two levels above YCSB's keys end with about 3
// children at 100 k keys and 30 at 1 M, and a NODE_8 holds the first
// without moving (a NODE_4 moved for the fifth, one in five of them at
// 100 k) and reaches a NODE_32 for the second in one move (NODE_8 grows
// fourfold, where a NODE_4 took two). Under a sparse node two keys sharing
// a slot are a rare collision, and a third rarer still (the nodes three
// levels down at 1 M random keys, about 60 k of them, hold two leaves
// almost all), so NODE_2's 32 bytes save 16 on each, and the rare node
// that grows moves once more (docs/smart-node-growth.md, "The first
// type").
func (t *Tree) splitType(dense bool) nodeType {
	switch {
	case t.opts.PaperNodes:
		return node4
	case dense:
		return node8
	}
	return node2
}

// parentDense reports whether the node holding cur's slot is dense for
// splitType, as this session last saw it: the node its descent read, or
// the cache entry (or the small child an entry keeps) the traversal
// started from. Without either it reports false: the choice is only a
// node's size, never a matter of correctness. The root slot counts as
// dense: a node at depth 0 is a NODE_8 (a NODE_4 with PaperNodes), so
// that no header is 0.
func (s *session) parentDense(cur cursor) bool {
	switch {
	case cur.node == 0:
		return true
	case !cur.cached && s.node.addr == cur.node:
		return dense(s.node.slots[:s.node.typ.capacity()])
	case !cur.cached || s.entry == nil:
		return false
	case remote.Addr(s.entry.Addr) == cur.node:
		return dense(s.entry.Slots())
	case s.entryIdx < len(s.entry.Slots()) && slot(s.entry.Slots()[s.entryIdx]).addr() == cur.node:
		return dense(s.entry.ChildSlots(s.entryIdx))
	}
	return false
}

// dense reports whether a node with these slots is dense for splitType:
// more than 64 children, or internal nodes for at least a quarter of its
// children. Either says that keys share its partial keys often (a node two
// levels above random keys, where 1 M keys fill 256 partial keys; a node of
// text keys, where a few dozen letters are shared by many keys each), so
// that a new node under it is likely to get more children; a node of few
// children, mostly leaves, is where two keys sharing a partial key is a
// rare collision.
func dense[W ~uint64](slots []W) bool {
	children, nodes := 0, 0
	for _, w := range slots {
		if sl := slot(w); sl.isChild() {
			children++
			if !sl.isLeaf() {
				nodes++
			}
		}
	}
	return children > node64.capacity() || 4*nodes >= children && nodes > 0
}

// chain is the new structure of a leaf split, staged in the session.
type chain struct {
	first, final     remote.Addr // the chain's first and last node
	firstType, rest  nodeType    // the type of the first node, and of the others
	h                header      // final's header
	n                int         // nodes before final
	oldSlot, newSlot slot        // final's slots: the old leaf, the new one
	leaf             remote.Addr // the new leaf
	leafClass        int
	// nodes are all the chain's nodes, first to final. The session's
	// staged pieces hold them too, but only until something else is
	// staged: a move that the split waits for and repairs (followMove)
	// stages its successor there.
	nodes []remote.Addr
}

// nodeType returns the type of the chain's node i (0: the first).
func (c chain) nodeType(i int) nodeType {
	if i == 0 {
		return c.firstType
	}
	return c.rest
}

// buildChain allocates and stages the nodes of a leaf split at cur whose
// keys share lcp encoded bytes, and the new leaf of key and value: nodes
// holding 6 prefix bytes and one slot down to the last one, which holds the
// old leaf in slot 0 and the new one in slot 1.
func (s *session) buildChain(ctx context.Context, cur cursor, lcp int, key, value []byte) (chain, error) {
	e1, e2 := s.enc, s.enc2
	var c chain
	c.n = (lcp - int(cur.depth)) / 7
	c.firstType, c.rest = s.t.splitType(s.parentDense(cur)), s.t.splitType(false)
	first, err := s.chainAlloc(ctx, cur, c.firstType)
	if err != nil {
		return c, err
	}
	mn := first.MN()
	class := s.t.lf.classOf(key, value)
	la, err := s.allocLeaf(ctx, mn, class)
	if err != nil {
		return c, s.dropNode(first, c.firstType, err)
	}
	s.staged, s.pieces = s.staged[:0], s.pieces[:0]
	node, rev, d := first, cur.addr, int(cur.depth)
	for i := range c.n {
		next, err := s.allocNear(ctx, mn, s.t.nodeAlloc(c.rest), addrAlign)
		if err != nil {
			// Free what this chain allocated: the nodes staged, this
			// one and the leaf.
			for j, p := range s.pieces {
				_ = s.dropNode(p.at, c.nodeType(j), nil)
			}
			s.dropUnlinked(la, class)
			return c, s.dropNode(node, c.nodeType(i), err)
		}
		h := makeHeader(d, c.nodeType(i), e1[d:d+6])
		s.stage(node, nodeImage(s.img, rev, h, nodeSlot(e1[d+6], c.rest, next)))
		c.nodes = append(c.nodes, node)
		node, rev, d = next, nodeSlotAddr(node, 0), d+7
	}
	c.first, c.final, c.nodes = first, node, append(c.nodes, node)
	c.h = makeHeader(d, c.nodeType(c.n), e1[d:lcp])
	c.oldSlot = leafSlot(e2[lcp], cur.sl.leafClass(), cur.sl.addr())
	c.newSlot = leafSlot(e1[lcp], class, la)
	c.leaf, c.leafClass = la, class
	s.stage(node, nodeImage(s.img, rev, c.h, c.oldSlot, c.newSlot))
	s.stage(la, s.t.lf.image(s.img, nodeSlotAddr(node, 1), key, value, class, s.t.epoch()))
	return c, nil
}

// publish links new structure: it flags the reverse pointer at revAddr of
// the object being moved (expecting revOld), executes the writes of the new
// structure (ops), then CASes cur's slot from its read value to repl. The flag
// and the writes share a round trip when the writes go to other memory nodes
// than the slot; otherwise the flag costs its own round trip and the writes
// share the CAS's. After a successful CAS it runs after with the flag's
// word (the completing step, which must ignore cancellation: a published
// change is always completed) before reporting success; after a failed one,
// or one that would leave past the flag's deadline (commitBy), it clears
// the flag.
//
//	CAS(rev: r → r|moving)   ① I6: the mark (with its nonce, flagOf),
//	                          before anything is published; it also
//	                          serialises splits of one object
//	W(new structure)         ② I3: complete before ③ (in ③'s batch only on
//	                          the slot's memory node)
//	CAS(slot: old → repl)    ③ publishes (I1: a slot only moves forward)
//	after()                  ④ I5: the completing steps, before returning
func (s *session) publish(ctx context.Context, cur cursor, ops []remote.Op, repl slot, revAddr, revOld remote.Addr, after func(flagged remote.Addr) error) (bool, cursor, error) {
	if revOld&revMoving != 0 {
		// Another split of this object is in flight: let it finish, then
		// read the slot again.
		return s.waitAndReread(ctx, cur, revAddr)
	}
	if s.lost() || revOld == 0 {
		// Decided on what may be reused memory (I8), or on a node that
		// moved out (its reverse pointer is nil): read the slot again.
		return false, cur, errRestart
	}
	flagged := s.flagOf(revOld)
	mark := remote.CAS(revAddr, uint64(revOld), uint64(flagged))
	flagAt := s.c.Now()
	if onNode(ops, cur.addr.MN()) {
		s.lockOps[0] = mark
		if err := s.c.Do(ctx, s.lockOps[:1]); err != nil {
			return false, cur, err
		}
		mark = s.lockOps[0]
	} else {
		ops = append(ops, mark)
		if err := s.do(ctx, ops); err != nil {
			return false, cur, err
		}
		mark = ops[len(ops)-1]
		ops = s.batch()
	}
	if !mark.Succeeded() {
		return s.waitAndReread(ctx, cur, revAddr)
	}
	// The flag is this session's from here (a crash inside the batch of
	// the mark leaves it to the waiters: it may be another split's).
	s.holdFlag(cur, revAddr, flagged)
	defer s.dropFlag()
	ctx = context.WithoutCancel(ctx) // the flag is always cleared
	by := s.commitBy(flagAt)
	var ok bool
	var next cursor
	var err error
	if s.t.opts.LockedInternal && cur.node != 0 {
		ok, next, err = s.publishLocked(ctx, cur, 0, ops, repl, by)
	} else {
		ops = append(ops, remote.CAS(cur.addr, uint64(cur.sl), uint64(repl)))
		if err = s.doBy(ctx, ops, by); err == nil {
			got := slot(ops[len(ops)-1].Old)
			ok, next = got == cur.sl, cur.with(got)
		}
	}
	if errors.Is(err, remote.ErrLate) {
		// Paused for so long that a waiter may judge the split dead and
		// undo the flag (repairFlag): publish nothing, and take the flag
		// back if it is still this split's.
		next, err = cur, errRestart
	}
	if err != nil || !ok {
		if cerr := s.clearFlag(ctx, revAddr, flagged); err == nil {
			err = cerr
		}
		return false, next, err
	}
	return true, cur, after(flagged)
}

// clearFlag clears the moving flag this session set on the reverse pointer
// at revAddr (to flagged), whatever address part it holds by now: a move of
// the node holding the slot it names may have pointed it at the slot's new
// copy, keeping the flag and its nonce (docs/smart-node-growth.md). A flag
// with another nonce is another operation's: it is left alone.
func (s *session) clearFlag(ctx context.Context, revAddr, flagged remote.Addr) error {
	w := uint64(flagged)
	for {
		old, err := s.c.CAS(ctx, revAddr, w, w&^uint64(revFlag))
		if err != nil || old == w || remote.Addr(old)&revFlag != flagged&revFlag {
			return err
		}
		w = old
	}
}

// waitMoving backs off while another split of an object holds its
// revMoving flag (like a lock held; bounded like one), so the caller can
// read the slot again and see that split's result. A flag that stands
// still for a lease on this client's clock was left by a splitter that
// died (it carries no owner to judge, only a nonce: a flag undone and set
// again by another operation reads as a change): fix, if not nil, then
// finishes or undoes that split (repairFlag).
func (s *session) waitMoving(ctx context.Context, revAddr remote.Addr, fix func(context.Context, remote.Addr) error) error {
	var first remote.Addr
	var since time.Duration
	for s.flagWaits++; ; s.flagWaits++ {
		// With a fix the wait ends by the lease at the latest (a flag that
		// keeps changing is other operations making progress); the bound
		// on attempts, a fraction of a lease of backoffs, is for waits
		// without one.
		if s.flagWaits > maxLockAttempts && fix == nil {
			return fmt.Errorf("%w: a split of the object with reverse pointer at %v did not finish", ErrContention, revAddr)
		}
		s.c.Backoff(s.flagWaits)
		w, err := s.readWord(ctx, revAddr)
		if err != nil || remote.Addr(w)&revMoving == 0 {
			return err
		}
		switch now := s.c.Now(); {
		case remote.Addr(w) != first:
			first, since = remote.Addr(w), now
		case fix != nil && now-since >= s.t.reg.Lease():
			return fix(context.WithoutCancel(ctx), first)
		}
	}
}

// waitAndReread waits for the split whose moving flag is on the reverse
// pointer at revAddr (repairing it after a lease), then reads cur's slot
// again for the caller to go on from. Going on from cur as it was would
// read the same object again: if the split published (the slot leads to a
// new node now) and its client died before clearing the flag, the repair
// finds the slot changed and leaves the flag to a traversal through the
// new node, which the caller would never make.
func (s *session) waitAndReread(ctx context.Context, cur cursor, revAddr remote.Addr) (bool, cursor, error) {
	if err := s.waitMoving(ctx, revAddr, s.repairFlag(cur, revAddr)); err != nil {
		return false, cur, err
	}
	cur, err := s.reread(ctx, cur)
	return false, cur, err
}

// splitHeader handles a key that diverges inside s.node's prefix: a new
// NODE_4 takes the matched part of the prefix and points to the old node and
// the new leaf; one CAS on the parent slot publishes it. The old node's
// header then drops the bytes now matched above (a CAS loop that only ever
// raises the depth, so concurrent splits compose) before Put returns.
func (s *session) splitHeader(ctx context.Context, d descent, key, value []byte) (bool, cursor, error) {
	n := &s.node
	cur := d.cur
	m := d.mismatchAt
	pos := int(cur.depth) + m
	nodeAddr, h, typ := n.addr, n.h, n.typ
	ma, err := s.allocOn(ctx, -1, s.t.nodeAlloc(node4), addrAlign)
	if err != nil {
		return false, cur, err
	}
	class := s.t.lf.classOf(key, value)
	la, err := s.allocLeaf(ctx, ma.MN(), class)
	if err != nil {
		return false, cur, err
	}
	mh := makeHeader(int(cur.depth), node4, s.enc[cur.depth:pos])
	s.staged, s.pieces = s.staged[:0], s.pieces[:0]
	s.stage(ma, nodeImage(s.img, cur.addr, mh,
		nodeSlot(h.prefixByte(n.skip+m), typ, nodeAddr),
		leafSlot(s.enc[pos], class, la)))
	s.stage(la, s.t.lf.image(s.img, nodeSlotAddr(ma, 1), key, value, class, s.t.epoch()))
	ops := s.stagedOps()
	target, rev := pos+1, n.rev
	// Header split: ① publish M in the parent slot (I6 flag on N's reverse
	// pointer, I3 M and the leaf written first), ② lower N's header and
	// move its reverse pointer before returning (I5).
	repl := nodeSlot(cur.sl.partial(), node4, ma)
	ok, next, err := s.publish(ctx, cur, ops, repl, nodeAddr.Add(nodeRevOff), rev, func(flagged remote.Addr) error {
		s.rememberNew(cur, repl, s.enc[:pos], ma, int(cur.level),
			nodeSlot(h.prefixByte(n.skip+m), typ, nodeAddr), leafSlot(s.enc[pos], class, la))
		return s.lowerHeader(context.WithoutCancel(ctx), nodeAddr, h, target, flagged, nodeSlotAddr(ma, 0))
	})
	if !ok && (err == nil || err == errRestart) {
		// Never linked: the slot CAS failed, or was not posted.
		s.dropUnlinked(la, class)
		_ = s.dropNode(ma, node4, nil)
	}
	return ok, next, err
}

// lowerHeader is step ② of a header split (I5, before Put returns): it
// raises a node's header depth to target (dropping prefix bytes) unless it
// is already there, and moves its reverse pointer from oldRev (flagged by
// this split, I6) to newRev, the slot of the new node that now points to it.
func (s *session) lowerHeader(ctx context.Context, node remote.Addr, h header, target int, oldRev, newRev remote.Addr) error {
	hdr := node.Add(nodeHeaderOff)
	ops := append(s.batch(), remote.CAS(node.Add(nodeRevOff), uint64(oldRev), uint64(newRev)))
	for h.depth() < target {
		ops = append(ops, remote.CAS(hdr, uint64(h), uint64(h.dropped(target-h.depth()))))
		if err := s.do(ctx, ops); err != nil {
			return err
		}
		if err := s.revCleared(ctx, node, &ops[0], oldRev, newRev); err != nil {
			return err
		}
		last := &ops[len(ops)-1]
		if last.Succeeded() {
			return nil
		}
		// A type switch or another split changed the header: again, until
		// its depth reaches target (depths only grow).
		h = header(last.Old)
		ops = s.batch()
		if h.isForwarded() {
			// The node moved after this split published it: its
			// successor took its header as it was, so the depth is
			// raised there (lowerTo follows the forwards).
			return s.lowerTo(ctx, node, target)
		}
	}
	if len(ops) > 0 {
		if err := s.do(ctx, ops); err != nil {
			return err
		}
		return s.revCleared(ctx, node, &ops[0], oldRev, newRev)
	}
	return nil
}

// revCleared finishes a header split's move of node's reverse pointer to
// newRev when the CAS rev found the flag cleared: a waiter judged the split
// dead after a lease and undid the flag (repairFlag) although the publish
// had left by its deadline (commitBy): on the transports that run in real
// time, where a batch can take longer than that to land or clocks run at
// different rates. The split is published all the same, and this client
// knows where the node is now.
func (s *session) revCleared(ctx context.Context, node remote.Addr, rev *remote.Op, oldRev, newRev remote.Addr) error {
	if rev.Kind != remote.OpCAS || rev.Succeeded() || remote.Addr(rev.Old) != revSlot(oldRev) {
		return nil
	}
	_, err := s.c.CAS(ctx, node.Add(nodeRevOff), rev.Old, uint64(newRev))
	return err
}
