package smart

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// A node allocated by size class that is full moves to a larger one
// (nodeType.grown: NODE_2 → 4 → 16 → 32 → 64 → 256, NODE_8 → 32;
// docs/smart-node-growth.md):
//
//	M1  CAS(N.rev: r → r|moving)
//	M2  [CAS(N.slot[i]: v_i → v_i|frozen)]               until every slot is frozen
//	M3  [W(leaf), W(N'), CAS(N.header: h → fwd(N'))]     the forward is set once
//	M4  [CAS(child_i.rev: N.slot[i] → N'.slot[i])]       again for those that failed
//	M5  CAS(p: N → N')                                   publishes
//	M6  CAS(N.rev: p|moving → nil), unsignaled
//
// Everything after M3 is idempotent and is also what a repairer of a mover
// that died does (repairMove).

// moving is a node move from M3 on: the frozen node, what its slots held,
// and its successor.
type moving struct {
	node   remote.Addr // N
	parent remote.Addr // the node holding N's parent slot, if known (0: not)
	typ    nodeType    // N's type
	h      header      // N's header before the forward
	slots  []slot      // N's slots, thawed
	to     remote.Addr // N'
	toRev  remote.Addr // the parent slot N' names, if known (0: not; see completeMove)
	depth  int         // the depth of N's children (their slots' keys)
}

// growNode is the insert into a full node allocated by size class: move it
// to a larger node (nodeType.grown) holding the new leaf in the slot after
// the old ones. Like a normal insert it linearizes at the CAS that publishes
// (M5). Its cost is five round trips when N, N' and the leaf share a
// memory node; a node moves at most maxMoves times in its life.
func (s *session) growNode(ctx context.Context, d descent, key, value []byte) (bool, cursor, error) {
	n := &s.node
	cur := d.cur
	if n.typ >= node256 {
		return false, cur, corruptf("node %v: NODE_256 full without partial key %#02x", n.addr, s.enc[d.pos])
	}
	if n.rev&revMoving != 0 {
		// A header split or another move of N is under way: wait for it
		// (and repair it after a lease), then start again.
		if err := s.waitMoving(ctx, n.addr.Add(nodeRevOff), s.repairFlag(cur, n.addr.Add(nodeRevOff))); err != nil {
			return false, cur, err
		}
		return false, cur, errRestart
	}
	if cur.addr != n.rev {
		// The node's reverse pointer does not name the slot that led here:
		// a split or a move above is unfinished. The move publishes at the
		// slot the reverse pointer names, so let that finish first.
		//
		// When it does name it, the slot need not be read even if it came
		// from the cache: an unflagged reverse pointer only ever names a
		// slot that links N, frozen or not (a header split or a move of N
		// flags it before the slot changes, a parent's move re-points it at
		// the parent's copy of the slot, M6 clears it), and the mark below
		// succeeds only on the pointer this traversal read. The publish
		// compares with the slot value the traversal came through and reads
		// the slot when that fails (completeMove).
		if _, err := s.unfinishedMove(ctx, cur, n.rev); err != nil {
			return false, cur, err
		}
		return false, cur, s.backoffRestart()
	}
	if s.lost() {
		return false, cur, errRestart // decided on what may be reused memory (I8)
	}
	// The successor and the leaf first: a move that cannot allocate them
	// changes nothing.
	class := s.t.lf.classOf(key, value)
	nt := n.typ.grown()
	to, err := s.allocNear(ctx, n.addr.MN(), s.t.nodeAlloc(nt), addrAlign)
	if err != nil {
		return false, cur, err
	}
	la, err := s.allocLeaf(ctx, to.MN(), class)
	if err != nil {
		return false, cur, s.dropNode(to, nt, err)
	}
	revAddr := n.addr.Add(nodeRevOff)
	// M1: the mark; fails if a header split or another move of N is under way.
	flagAt := s.c.Now()
	flagged := s.flagOf(n.rev)
	old, err := s.c.CAS(ctx, revAddr, uint64(n.rev), uint64(flagged))
	if err == nil && old != uint64(n.rev) {
		err = s.waitMoving(ctx, revAddr, s.repairFlag(cur, revAddr))
		if err == nil {
			err = errRestart
		}
	}
	if err != nil {
		s.dropUnlinked(la, class)
		return false, cur, s.dropNode(to, nt, err)
	}
	// The flag is this session's from here (a crash inside the CAS leaves
	// it to the waiters: it may be another mover's).
	s.holdFlag(cur, revAddr, flagged)
	defer s.dropFlag()
	ctx = context.WithoutCancel(ctx) // a flagged node is always moved
	mv := moving{node: n.addr, parent: cur.node, typ: n.typ, h: n.h, to: to, toRev: n.rev, depth: d.pos + 1}
	if mv.slots, err = s.freeze(ctx, n.addr, n.slots[:n.typ.capacity()], s.commitBy(flagAt)); err != nil {
		if errors.Is(err, remote.ErrLate) {
			// Paused for so long that a waiter may judge the move dead and
			// undo the mark: freeze nothing, and take the mark back if it
			// is still this move's.
			err = cmp.Or(s.clearFlag(ctx, revAddr, flagged), errRestart)
			s.dropUnlinked(la, class)
			return false, cur, s.dropNode(to, nt, err)
		}
		return false, cur, err
	}
	// M3: the new leaf and N', complete before the forward lands.
	j := n.typ.capacity()
	leaf := leafSlot(s.enc[d.pos], class, la)
	succ, err := s.forward(ctx, &mv, n.rev, func() slot {
		s.stage(la, s.t.lf.image(s.img, nodeSlotAddr(to, j), key, value, class, s.t.epoch()))
		return leaf
	})
	if err != nil {
		return false, cur, err
	}
	if succ != to {
		// A repairer forwarded N while this client was stopped for a lease:
		// its successor holds N's slots without this insert.
		s.dropUnlinked(la, class)
		return false, cur, s.dropNode(to, nt, errRestart)
	}
	published, err := s.completeMove(ctx, &mv, flagged, cur.sl)
	if err == nil && published && mv.toRev == cur.addr {
		// Linked at the slot that led here: cache N' as published, so that
		// the next operation through it does not meet N's forward.
		s.rememberNew(cur, nodeSlot(cur.sl.partial(), nt, to), s.enc[:d.pos], to, int(cur.level), append(mv.slots, leaf)...)
	}
	return true, cur, err
}

// dropNode gives back a node that was allocated and never written where
// anyone could see it, and returns err.
func (s *session) dropNode(a remote.Addr, t nodeType, err error) error {
	_ = s.c.Free(a, s.t.nodeAlloc(t)) // a failure only leaks it
	return err
}

// backoffRestart backs off once and restarts the operation.
func (s *session) backoffRestart() error {
	if err := s.retry(); err != nil {
		return err
	}
	s.c.Backoff(s.retries)
	return errRestart
}

// freeze is M2: it freezes every slot of the node at node (snapshot holds
// the values last read) and returns what they held, thawed. by, if not 0,
// is the deadline of the move's commit (session.commitBy): the batches
// before the first that freezes a slot leave by then, or freeze returns
// remote.ErrLate with nothing frozen.
func (s *session) freeze(ctx context.Context, node remote.Addr, snapshot []slot, by time.Duration) ([]slot, error) {
	vals := append([]slot(nil), snapshot...)
	for i := range vals {
		vals[i] = vals[i].thawed()
	}
	frozen := make([]bool, len(vals))
	for left := len(vals); left > 0; {
		ops := s.batch()
		idx := make([]int, 0, left)
		for i, v := range vals {
			if !frozen[i] {
				ops = append(ops, remote.CAS(nodeSlotAddr(node, i), uint64(v), uint64(v|slotFrozen)))
				idx = append(idx, i)
			}
		}
		if err := s.doBy(ctx, ops, by); err != nil {
			return nil, err
		}
		for k, i := range idx {
			got := slot(ops[k].Old)
			switch {
			case ops[k].Succeeded() || got.isFrozen():
				by = 0 // committed: repairers finish the move from here
				frozen[i] = true
				vals[i] = got.thawed()
				left--
			default:
				vals[i] = got // a split, update or delete won: again
			}
		}
	}
	return vals, nil
}

// forward is M3: it writes N' (the successor mv.to, of the grown type)
// holding mv.slots and, if extra is set, what extra stages (the new leaf)
// and the slot it returns, after them; then it CASes N's header from mv.h
// to the forward, in one batch when every write goes to N's memory node.
// It returns the successor whose forward landed: mv.to, or the one a
// repairer (or a stale mover) set first. A header split's second step may
// lower N's header meanwhile (its depth and prefix): N' then takes the new
// header, and the forward is tried again.
func (s *session) forward(ctx context.Context, mv *moving, rev remote.Addr, extra func() slot) (remote.Addr, error) {
	for {
		s.staged, s.pieces = s.staged[:0], s.pieces[:0]
		slots := mv.slots
		if extra != nil {
			slots = append(slots[:len(slots):len(slots)], extra())
		}
		s.stage(mv.to, nodeImage(s.img, rev, mv.h.withType(mv.typ.grown()), slots...))
		ops, err := s.link(ctx, s.stagedOps(), remote.CAS(mv.node.Add(nodeHeaderOff), uint64(mv.h), uint64(forwarded(mv.typ, mv.to))))
		if err != nil {
			return 0, err
		}
		switch got := header(ops[len(ops)-1].Old); {
		case got == mv.h:
			return mv.to, nil
		case got.isForwarded():
			return got.successor(), nil
		default:
			mv.h = got
		}
	}
}

// completeMove is M4–M6 of the move of mv.node, whose successor mv.to
// holds mv.slots (thawed) at the same indexes, from the node's reverse
// pointer as its move flagged it (naming the parent slot, which held pw; 0:
// unknown): point
// the children at their new slots (one batch, then again for those whose
// CAS failed), publish, and mark N unlinked. The children come first so
// that N' is complete before it is linked (I3): nothing can build on a
// child of N' before the publish, since N's slots are frozen. Anyone may
// run it (the mover, or a repairer of a mover that died): every step is
// idempotent. published reports whether this call linked N'.
func (s *session) completeMove(ctx context.Context, mv *moving, flagged remote.Addr, pw slot) (published bool, err error) {
	// M4: every child's reverse pointer to its new slot.
	ops := s.batch()
	for i, sl := range mv.slots {
		if sl.isChild() {
			ops = append(ops, remote.CAS(sl.addr().Add(leafRevOff), uint64(nodeSlotAddr(mv.node, i)), uint64(nodeSlotAddr(mv.to, i))))
		}
	}
	if err := s.do(ctx, ops); err != nil {
		return false, err
	}
	failed := make([]bool, len(mv.slots))
	k := 0
	for i, sl := range mv.slots {
		if sl.isChild() {
			failed[i] = !ops[k].Succeeded()
			k++
		}
	}
	for i := range mv.slots {
		if failed[i] {
			if err := s.fixRev(ctx, mv, i); err != nil {
				return false, err
			}
		}
	}
	// M5: publish.
	revAddr := mv.node.Add(nodeRevOff)
	p := revSlot(flagged)
	for attempt := 0; ; attempt++ {
		if pw.isEmpty() {
			w, err := s.readWord(ctx, p)
			if err != nil {
				return false, err
			}
			pw = slot(w)
		}
		if !links(pw, mv.node) {
			break // published (by this client or a repairer)
		}
		if pw.isFrozen() {
			// The parent is moving: its completing steps point N's reverse
			// pointer at the parent's successor slot; publish there.
			if attempt >= maxLockAttempts {
				return false, fmt.Errorf("%w: the parent of moving node %v did not finish its move", ErrContention, mv.node)
			}
			s.c.Backoff(attempt)
			rw, err := s.readWord(ctx, revAddr)
			if err != nil {
				return false, err
			}
			if rw == 0 {
				return false, nil // another completer finished the move (M6)
			}
			if np := revSlot(remote.Addr(rw)); np != p {
				p, flagged, mv.parent = np, np|flagged&revFlag, 0
			} else if mv.parent != 0 && attempt%judgeEvery == judgeEvery-1 {
				if err := s.awaitMove(ctx, mv.parent); err != nil {
					return false, err
				}
			}
			pw = 0
			continue
		}
		// N' names p as its parent slot before it is linked there (I3). Its
		// mover knows what N' names (it wrote N' with rev); a repairer of a
		// node forwarded by someone else reads it, since the parent may have
		// moved since (its rev is N's pointer now). A CAS, not a WRITE: a
		// completer that stalled here cannot take the pointer back once N'
		// is linked and its parent has moved on.
		if mv.toRev != p {
			if mv.toRev == 0 {
				w, err := s.readWord(ctx, mv.to.Add(nodeRevOff))
				if err != nil {
					return false, err
				}
				if mv.toRev, pw = remote.Addr(w), 0; w == 0 {
					return false, nil // N' moved out in turn: published long ago
				}
				continue
			}
			old, err := s.c.CAS(ctx, mv.to.Add(nodeRevOff), uint64(mv.toRev), uint64(p))
			if err != nil {
				return false, err
			}
			if remote.Addr(old) != mv.toRev {
				// Another completer moved it (or N' is linked and moved on):
				// look again.
				mv.toRev, pw = remote.Addr(old), 0
				continue
			}
			mv.toRev = p
		}
		ops, err := s.link(ctx, s.batch(), remote.CAS(p, uint64(pw), uint64(nodeSlot(pw.partial(), mv.typ.grown(), mv.to))))
		if err != nil {
			return false, err
		}
		if published = ops[len(ops)-1].Succeeded(); published {
			break
		}
		pw = 0
	}
	// M6: N is unlinked for good: its reverse pointer becomes nil, so no
	// operation holding an old snapshot of it can flag it again (M1, a
	// header split) or take it for linked. Unsignaled: nothing depends on
	// when it lands (a reader that meets N waits for it, and a flag that
	// never lands, its client dead, is cleared by a repairer after a
	// lease); the only value it can replace is p|moving, since N is no
	// longer any parent's child.
	s.lockOps[0] = remote.CAS(revAddr, uint64(flagged), 0)
	return published, s.c.Post(ctx, s.lockOps[:1])
}

// fixRev moves the reverse pointer of the child in mv.slots[i] from
// N.slot[i] (from) to N'.slot[i] (to) (M4), keeping a header split's
// moving flag. A value that is neither, while the slot to still names the
// child, belongs to a leaf split in flight (see below) or to a header
// split's second step: wait for that, and judge the flag's holder after a
// lease. Once to names another object the child moved on, and nothing is
// left to do.
func (s *session) fixRev(ctx context.Context, mv *moving, i int) error {
	sl, from, to := mv.slots[i], nodeSlotAddr(mv.node, i), nodeSlotAddr(mv.to, i)
	at := sl.addr().Add(leafRevOff)
	for attempt := 0; ; attempt++ {
		w, err := s.readWord(ctx, at)
		if err != nil {
			return err
		}
		switch a := revSlot(remote.Addr(w)); a {
		case to:
			return nil
		case from:
			old, err := s.c.CAS(ctx, at, w, uint64(to)|w&uint64(revFlag))
			if err != nil || old == w {
				return err
			}
			continue
		}
		// Neither: a split of the child is in flight, or (for a repairer
		// or a mover that came late) the child moved on from its new slot
		// since, or the new slot's node moved in turn.
		if tw, err := s.readWord(ctx, to); err != nil || slot(tw).isFrozen() || slot(tw).addr() != sl.addr() {
			return err
		}
		if attempt >= maxLockAttempts {
			return fmt.Errorf("%w: the reverse pointer of %v stayed at %#x (moving it from %v to %v)", ErrContention, sl, w, from, to)
		}
		if sl.isLeaf() {
			// A leaf split in flight under the leaf's lock: before the
			// publish its slot CAS can only fail (frozen), so the pointer
			// belongs at to whatever the splitter does next (its CAS back
			// then fails), and whether the splitter lives or died (its lock
			// is recovered later, and finds the pointer right). After the
			// publish the split may be a real one, on N'.slot[i]: its lock
			// holder keeps the pointer.
			if published, err := s.movePublished(ctx, mv); err != nil || published {
				return err
			}
			old, err := s.c.CAS(ctx, at, w, uint64(to))
			if err != nil || old == w {
				return err
			}
			continue
		}
		s.c.Backoff(attempt)
		if attempt%judgeEvery == judgeEvery-1 && remote.Addr(w)&revMoving != 0 {
			cur := cursor{addr: to, sl: sl.thawed(), depth: int16(mv.depth)}
			if err := s.waitMoving(ctx, at, s.repairFlag(cur, at)); err != nil {
				return err
			}
		}
	}
}

// movePublished reports whether the move of mv.node has published: the
// slot its reverse pointer names no longer names it (or the pointer is
// nil: the move is over).
func (s *session) movePublished(ctx context.Context, mv *moving) (bool, error) {
	rw, err := s.readWord(ctx, mv.node.Add(nodeRevOff))
	if err != nil || rw == 0 {
		return true, err
	}
	pw, err := s.readWord(ctx, revSlot(remote.Addr(rw)))
	if err != nil {
		return false, err
	}
	return !links(slot(pw), mv.node), nil
}

// links reports whether the slot value sl, frozen or not, links the node
// at node: a move of that node has not published yet.
func links(sl slot, node remote.Addr) bool { return !sl.isLeaf() && sl.addr() == node }

// followMove is a leaf split that failed on a frozen slot (cur's): its
// WRITE moved the leaf's reverse pointer to wrong, possibly after the mover
// had moved it to the slot's copy (M4), so the split puts it where the leaf
// is: it waits for the move (holding the leaf's lock), then CASes the
// pointer from wrong to the same slot index of the node's successor (to
// cur's slot if the node was not forwarded). A later move that found wrong
// there overwrote it (fixRev), and the CAS then fails: nothing is lost.
func (s *session) followMove(ctx context.Context, cur cursor, revAt, wrong remote.Addr) error {
	last, err := s.lastSuccessor(ctx, cur.node)
	if err != nil {
		return err
	}
	_, err = s.c.CAS(ctx, revAt, uint64(wrong), uint64(last.Add(uint64(cur.addr-cur.node))))
	return err
}

// lastSuccessor follows the forwards from the node at node, waiting for
// each move to finish, to the node that replaced it last (node itself if
// it never moved). A node moves at most maxMoves times.
func (s *session) lastSuccessor(ctx context.Context, node remote.Addr) (remote.Addr, error) {
	for range maxMoves + 1 {
		if err := s.awaitMove(ctx, node); err != nil {
			return node, err
		}
		hw, err := s.readWord(ctx, node.Add(nodeHeaderOff))
		if err != nil || !header(hw).isForwarded() {
			return node, err
		}
		node = header(hw).successor()
	}
	return node, nil
}

// awaitMove waits while the node at node is moving (its reverse pointer
// flagged), and repairs the move if the flag stands still for a lease.
func (s *session) awaitMove(ctx context.Context, node remote.Addr) error {
	return s.waitMoving(ctx, node.Add(nodeRevOff), func(ctx context.Context, _ remote.Addr) error {
		_, _, err := s.repairMove(ctx, node)
		return err
	})
}

// movingRestart is what an operation does on a frozen slot or a forwarded
// header of the node at node: drop the cache entry that led there, wait for
// the move, and restart from the root.
func (s *session) movingRestart(ctx context.Context, cur cursor, node remote.Addr) error {
	if cur.cached {
		s.dropEntry()
	}
	if err := s.awaitMove(ctx, node); err != nil {
		return err
	}
	return s.backoffRestart()
}

// repairMove finishes the move of the node at node whose mover stood
// still for a lease: freeze what is not frozen, forward to a fresh
// successor unless the mover did, then complete (M4–M6). A node that is
// not moving (nothing frozen, not forwarded, or not flagged) is left
// alone; moved reports whether it was moving, published whether this
// repair published it (what Stats().Recovered and Recover count).
func (s *session) repairMove(ctx context.Context, node remote.Addr) (moved, published bool, err error) {
	ctx = context.WithoutCancel(ctx)
	hw, err := s.readWord(ctx, node.Add(nodeHeaderOff))
	if err != nil {
		return false, false, err
	}
	typ := header(hw).nodeType()
	if hw == 0 || typ > node256 {
		return false, false, corruptf("node %v has header %#x", node, hw)
	}
	buf := make([]byte, typ.readBytes())
	if err := s.c.Read(ctx, node, buf); err != nil {
		return false, false, err
	}
	rev := remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:]))
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	snap := make([]slot, typ.capacity())
	anyFrozen := false
	for i := range snap {
		snap[i] = slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
		anyFrozen = anyFrozen || snap[i].isFrozen()
	}
	if rev&revMoving == 0 || (!anyFrozen && !h.isForwarded()) {
		return false, false, nil
	}
	if typ == node256 {
		return true, false, corruptf("NODE_256 %v is moving", node)
	}
	if revSlot(rev) == 0 {
		// Moved out and unlinked (M6): the flag is a stale operation's,
		// which fails on the slot it read and clears it.
		return true, false, nil
	}
	flagged, rev := rev, revSlot(rev)
	mv := moving{node: node, typ: typ, h: h}
	if mv.slots, err = s.freeze(ctx, node, snap, 0); err != nil {
		return true, false, err
	}
	if !h.isForwarded() {
		mv.depth = h.depth() + h.prefixLen() + 1
		if mv.to, err = s.allocNear(ctx, node.MN(), s.t.nodeAlloc(typ.grown()), addrAlign); err != nil {
			return true, false, err
		}
		succ, err := s.forward(ctx, &mv, rev, nil)
		if err != nil {
			return true, false, err
		}
		if succ != mv.to {
			_ = s.dropNode(mv.to, typ.grown(), nil)
			h = forwarded(typ, succ) // another repairer's
		} else {
			mv.toRev = rev
		}
	}
	if h.isForwarded() {
		mv.to = h.successor()
		nh, err := s.readWord(ctx, mv.to.Add(nodeHeaderOff))
		if err != nil {
			return true, false, err
		}
		mv.depth = header(nh).depth() + header(nh).prefixLen() + 1
	}
	published, err = s.completeMove(ctx, &mv, flagged, 0)
	if published {
		// Only a publish repairs what readers could see: a move that
		// published and died before its last step left its node unlinked.
		s.t.rstats.recovered.Add(1)
	}
	return true, published, err
}

// unfinishedMove checks a reverse pointer rev that does not name cur's
// slot for a move that left the child behind: rev is a frozen slot naming
// the child, and the node at the same slot index behind it was forwarded,
// directly or through later moves, to the node holding cur's slot (its
// mover died before M4, or a leaf split put the pointer back after M4).
// If so it waits for those moves (repairing them after a lease), moves the
// pointer to cur's slot itself, and reports true.
func (s *session) unfinishedMove(ctx context.Context, cur cursor, rev remote.Addr) (bool, error) {
	rev = revSlot(rev)
	if s.t.opts.PaperNodes || cur.node == 0 || rev == cur.addr || rev == 0 {
		return false, nil
	}
	// rev is a slot address (reverse pointers only ever name slots): it
	// matters only if it is frozen and still names the child cur names.
	w, err := s.readWord(ctx, rev)
	if err != nil || !slot(w).isFrozen() || slot(w).addr() != cur.sl.addr() {
		return false, err
	}
	idx := uint64(cur.addr - cur.node)
	if rev.Offset() < idx+uint64(addrAlign) {
		return false, nil
	}
	// The node behind rev at cur's index, if the slot at rev is at that
	// index: follow its forwards, reading only, and act (wait, repair) only
	// on a chain that really leads to cur's node. Behind a slot at another
	// index lies some other word, which must never be taken for a node.
	// Nodes are 16-byte aligned, so a slot at an index of the other parity
	// gives away a base that is not; one that is, or a word that reads as a
	// forward, must still name a node of the pool before anything reads it.
	old := remote.Addr(uint64(rev) - idx)
	if !s.t.mayBeNode(old) {
		return false, nil
	}
	var chain [maxMoves + 1]remote.Addr // the nodes forwarded on the way
	hops := 0
	for n := old; n != cur.node; hops++ {
		if hops == len(chain) {
			return false, nil
		}
		chain[hops] = n
		if w, err = s.readWord(ctx, n.Add(nodeHeaderOff)); err != nil || !header(w).isForwarded() {
			return false, err
		}
		if n = header(w).successor(); !s.t.mayBeNode(n) {
			return false, nil
		}
	}
	// A forward is set once: the chain stays; wait for (or repair) the
	// moves along it.
	for _, n := range chain[:hops] {
		if err := s.awaitMove(ctx, n); err != nil {
			return false, err
		}
	}
	// The move's M4 for this child, done here: a leaf split that failed on
	// the frozen slot may have put the pointer back after the mover moved
	// it. From the frozen slot only, so nothing else is overwritten.
	_, err = s.c.CAS(ctx, cur.sl.addr().Add(leafRevOff), uint64(rev), uint64(cur.addr))
	return true, err
}
