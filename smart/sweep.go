package smart

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// Recover sweeps the whole tree and repairs what dead clients left: leaf
// locks (and, with Options.LockedInternal, node locks) held by clients
// judged dead, and moving flags of splits that did not finish. It returns
// the number of locks and flags it recovered. It is safe to run while
// operations run.
//
// A holder the registry already knows dead (a client the tree saw stop, a
// closed client) is recovered in the first walk. Locks and flags that look
// alive are watched: after a lease on this compute node's clock, a second
// walk recovers those whose word and holder's heartbeat stood still all
// that time. A flag carries no owner (only a nonce, revNonce): it is judged
// by time alone, and a
// split that did not finish is completed (its object's reverse pointer
// moved to the slot the walk found it in, a node's header lowered to its
// depth there) or undone (the flag cleared) by what the walk found. A
// header that a finished split did not lower is lowered.
func (t *Tree) Recover(ctx context.Context) (int, error) {
	s, err := t.sessionFor(ctx)
	if err != nil {
		return 0, err
	}
	defer t.release(s)
	if t.hasUnburied.Load() {
		// Crashed clients whose members could not be marked dead: until
		// they are, their locks look live (their compute node beats).
		if err := s.markBuried(); err != nil {
			return 0, fmt.Errorf("smart: recover: marking crashed clients dead: %w", err)
		}
	}
	w := sweeper{s: s, watched: make(map[remote.Addr]*watched)}
	if err := w.walk(ctx); err != nil {
		return w.recovered, wrapRemote(err)
	}
	if len(w.watched) == 0 {
		return w.recovered, nil
	}
	start := s.c.Now()
	for attempt := 0; s.c.Now()-start <= t.reg.Lease(); attempt++ {
		if err := ctx.Err(); err != nil {
			return w.recovered, err
		}
		s.c.Backoff(attempt)
		s.touchIn(ctx)
	}
	w.second = true
	err = w.walk(ctx)
	return w.recovered, wrapRemote(err)
}

// watched is a lock or flag word the first walk found held.
type watched struct {
	word  uint64
	watch registry.Watch
}

// sweeper is one Recover.
type sweeper struct {
	s         *session
	second    bool // the walk after the lease
	watched   map[remote.Addr]*watched
	recovered int
	seen      map[remote.Addr]bool
}

func (w *sweeper) walk(ctx context.Context) error {
	w.seen = make(map[remote.Addr]bool)
	root, err := w.s.root(ctx)
	if err != nil {
		return err
	}
	return w.node(ctx, root, 0)
}

// node sweeps the node cur leads to, at key depth depth (the length of the
// path to it).
func (w *sweeper) node(ctx context.Context, cur cursor, depth int) error {
	a := cur.sl.addr()
	if w.seen[a] {
		return nil
	}
	w.seen[a] = true
	buf := make([]byte, w.s.t.nodeReadBytes(cur.sl))
	if err := w.s.c.Read(ctx, a, buf); err != nil {
		return err
	}
	rev := remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:]))
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	if !w.s.t.opts.PaperNodes && rev&revMoving != 0 && (h.isForwarded() || frozenIn(buf)) {
		return w.moving(ctx, cur, rev, buf)
	}
	if rev&revMoving != 0 {
		if err := w.flag(ctx, a.Add(nodeRevOff), rev, cur.addr, func(ctx context.Context) error {
			return w.s.lowerTo(ctx, a, depth)
		}); err != nil {
			return err
		}
	}
	if rev&revMoving == 0 && rev == cur.addr && h.depth() < depth {
		// A header split that moved the reverse pointer and died before
		// lowering the header: readers skip the bytes matched above, and
		// the header only ever drops them, so finishing it is safe at any
		// time.
		if err := w.s.lowerTo(context.WithoutCancel(ctx), a, depth); err != nil {
			return err
		}
		w.s.t.rstats.recovered.Add(1)
		w.recovered++
	}
	want := cur.sl.nodeType()
	for i := slotsRead(buf) - 1; i >= h.nodeType().capacity(); i-- {
		if !slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:])).isEmpty() {
			want = max(want, typeFor(i)) // an insert behind the capacity that died before raising the type
			break
		}
	}
	if want > h.nodeType() {
		// A type switch that died before raising the header (see readNode).
		old, err := w.s.c.CAS(context.WithoutCancel(ctx), a.Add(nodeHeaderOff), uint64(h), uint64(h.withType(want)))
		if err != nil {
			return err
		}
		if old == uint64(h) {
			w.s.t.rstats.recovered.Add(1)
			w.recovered++
		}
	}
	if w.s.t.opts.LockedInternal {
		lock := binary.LittleEndian.Uint64(buf[nodeLockOff:])
		if err := w.lock(ctx, a.Add(nodeLockOff), lock, func(ctx context.Context, word uint64, _ time.Duration) error {
			// A node holds no state under its lock (locked.go).
			old, err := w.s.c.CAS(ctx, a.Add(nodeLockOff), word, 0)
			if err == nil && old == word {
				w.s.t.rstats.recovered.Add(1)
			}
			return err
		}); err != nil {
			return err
		}
	}
	// The children's depth from the node's own header (depth and prefix),
	// which stays right while a header split has not lowered it yet.
	return w.children(ctx, a, buf, h.depth()+h.prefixLen()+1)
}

// children sweeps the children of the node at a read into buf, whose
// depth is childDepth.
func (w *sweeper) children(ctx context.Context, a remote.Addr, buf []byte, childDepth int) error {
	for i := range slotsRead(buf) {
		sl := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:])).thawed()
		child := cursor{addr: nodeSlotAddr(a, i), sl: sl, depth: int16(childDepth), node: a}
		var err error
		switch {
		case sl.isEmpty() || sl.isTombstone():
		case sl.isLeaf():
			err = w.leaf(ctx, child)
		default:
			err = w.node(ctx, child, childDepth)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// moving handles a node found moving (docs/smart-node-growth.md), read
// into buf through cur: in the first walk the flag is noted and the
// children are swept as the frozen slots name them; in the second, a move
// whose flag stood still is finished, and the node that replaced it is
// swept.
func (w *sweeper) moving(ctx context.Context, cur cursor, rev remote.Addr, buf []byte) error {
	a := cur.sl.addr()
	at := a.Add(nodeRevOff)
	if !w.second {
		if w.watched[at] == nil {
			w.watched[at] = &watched{word: uint64(rev)}
		}
		h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
		if h.isForwarded() {
			return nil // its successor holds the same children
		}
		return w.children(ctx, a, buf, h.depth()+h.prefixLen()+1)
	}
	if o := w.watched[at]; o == nil || o.word != uint64(rev) {
		return nil
	}
	delete(w.watched, at)
	_, published, err := w.s.repairMove(ctx, a)
	if err != nil {
		return err
	}
	if published {
		w.recovered++
	}
	p, err := w.s.readWord(ctx, cur.addr)
	if err != nil || slot(p).isLeaf() || !slot(p).isChild() || slot(p).isFrozen() {
		return err
	}
	return w.node(ctx, cur.with(slot(p)), int(cur.depth))
}

// slotsRead is how many slots a node read into buf (by nodeReadBytes)
// holds: 256 behind the lock word of PaperNodes, else its type's.
func slotsRead(buf []byte) int { return min(256, (len(buf)-nodeSlotsOff)/8) }

// frozenIn reports whether a node read into buf has a frozen slot.
func frozenIn(buf []byte) bool {
	for i := range slotsRead(buf) {
		if slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:])).isFrozen() {
			return true
		}
	}
	return false
}

// leaf sweeps the leaf cur leads to.
func (w *sweeper) leaf(ctx context.Context, cur cursor) error {
	a, class := cur.sl.addr(), cur.sl.leafClass()
	n := classBytes(class)
	buf := make([]byte, n)
	if err := w.s.c.Read(ctx, a, buf); err != nil {
		return err
	}
	lock := binary.LittleEndian.Uint64(buf[n-8:])
	return w.lock(ctx, a.Add(uint64(n-8)), lock, func(ctx context.Context, word uint64, by time.Duration) error {
		_, err := w.s.recoverLeaf(ctx, a, class, word, by)
		return err
	})
}

// lock judges the lock word at at, found holding word, and runs recover
// (which takes it over, by the judgement's deadline, and releases it) if its
// holder is dead.
func (w *sweeper) lock(ctx context.Context, at remote.Addr, word uint64, recover func(context.Context, uint64, time.Duration) error) error {
	if word == 0 || !registry.IsTag(word) {
		return nil
	}
	o := w.watched[at]
	switch {
	case o == nil && w.second:
		return nil // held since the first walk only: alive for all we know
	case o == nil:
		o = &watched{word: word}
		w.watched[at] = o
	case o.word != word:
		return nil // changed hands: its holder was alive
	}
	dead, err := w.s.t.reg.Dead(ctx, w.s.c, &o.watch, word)
	if err != nil || !dead {
		return err
	}
	delete(w.watched, at)
	before := w.s.t.rstats.recovered.Load()
	if err := recover(context.WithoutCancel(ctx), word, o.watch.ActBy()); err != nil {
		return err
	}
	if w.s.t.rstats.recovered.Load() != before {
		w.recovered++
	}
	return nil
}

// flag handles the moving flag found on the reverse pointer at at (holding
// rev) of a node the walk reached through the slot at where: in the first
// walk it is noted; in the second, if it stood still, the header split is
// finished (the node is now under where: complete lowers its header, then
// the reverse pointer moves there) or undone (the node is still in the slot
// the flag protected).
func (w *sweeper) flag(ctx context.Context, at, rev, where remote.Addr, complete func(context.Context) error) error {
	o := w.watched[at]
	if !w.second {
		if o == nil {
			w.watched[at] = &watched{word: uint64(rev)}
		}
		return nil
	}
	if o == nil || o.word != uint64(rev) {
		return nil
	}
	delete(w.watched, at)
	ctx = context.WithoutCancel(ctx)
	if where != revSlot(rev) {
		if err := complete(ctx); err != nil {
			return err
		}
	}
	old, err := w.s.c.CAS(ctx, at, uint64(rev), uint64(where))
	if err == nil && old == uint64(rev) {
		w.s.t.rstats.recovered.Add(1)
		w.recovered++
	}
	return err
}
