package smart

import (
	"context"
	"errors"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// Memory reclamation (Options.Reclaim; docs/smart-protocol.md, I8).
//
// Every compute node that opens the tree joins the pool's registry
// (internal/registry) and each session registers a member. An operation
// sends the node's heartbeat when one is due, then pins the node's epoch for
// as long as it may hold addresses read from the tree (session to release).
// A leaf that an operation unlinks and retires (Delete, out-of-place update,
// size-class change) goes to the node's limbo with tag e+1; every
// ReclaimInterval one operation of the node runs Reclaim, which advances the
// global epoch when every live node has published it and hands the leaves
// no live node can still be reading to the tree's leaf pool, where leaf
// allocations find them.
//
// Pins do not cover the cache: it keeps slot words across operations, so a
// cached slot can name a leaf that was freed and reused since. A reused leaf
// is recognised by its birth epoch (the word before its meta word), which is later than
// the epoch stamped on the cache entry that names it; the reader then reads
// the slot itself (session.reused). Nor do pins cover a node that the others
// judged dead while it worked: its operations notice (session.lost) and
// start again with a new pin.

// birthBits is the width of a leaf's birth epoch and of a cache entry's
// epoch stamp; both are kept modulo 2^birthBits and compared as serial
// numbers.
const (
	birthBits = 31
	birthMask = 1<<birthBits - 1
)

// bornAfter reports whether birth epoch b is later than stamp e, both modulo
// 2^birthBits: true when b-e lies in [1, 2^(birthBits-1)). A cache entry
// 2^30 epochs old may be misjudged; the epoch advances at most once per
// ReclaimInterval of some compute node, so that is years of uptime with
// one untouched entry.
func bornAfter(b, e uint32) bool {
	d := (b - e) & birthMask
	return d != 0 && d < 1<<(birthBits-1)
}

// joinRegistry makes the tree's compute node a member of the pool's
// registry: lock tags, liveness (recover.go) and, with Options.Reclaim,
// epochs.
func (t *Tree) joinRegistry(ctx context.Context, c *remote.Client) error {
	keep := func(a remote.Addr, size int) error {
		t.leaves.Put(a, uint64(size))
		return nil
	}
	ro := registry.Options{Lease: t.opts.Lease, Free: keep}
	if t.opts.Reclaim {
		ro.Interval = t.opts.reclaimInterval()
		if ro.Lease == 0 {
			ro.Lease = 10 * ro.Interval
		}
	}
	n, err := registry.Join(ctx, c, ro)
	if err != nil {
		return err
	}
	t.reg = n
	return nil
}

// epoch returns the node's current epoch modulo 2^birthBits (0 without
// reclamation): the birth of a leaf written now, and the stamp of a cache
// entry read by an operation that started now.
func (t *Tree) epoch() uint32 {
	if !t.opts.Reclaim {
		return 0
	}
	return uint32(t.reg.Epoch()) & birthMask
}

// begin starts an operation of s: it tries to mark dead the members of
// crashed clients that could not be marked yet (markBuried; what it
// cannot mark waits for the next operation), registers the session's
// client on first use, sends the heartbeat if one is due, then pins the
// node's epoch (in that order: a node that others judged dead while it was
// idle is live again, in the registry, before it reads an address). Its
// verbs are the tree's upkeep, bounded by the operation's context (s.ctx),
// so that an operation with a deadline returns by it even while the
// registry's memory node does not answer.
func (s *session) begin() error {
	t := s.t
	if t.reg == nil {
		return nil
	}
	ctx := s.ctx
	if t.hasUnburied.Load() {
		_ = s.markBuried()
	}
	if s.m == nil {
		m, err := t.reg.Register(ctx, s.c)
		if err != nil {
			return wrapRemote(err)
		}
		s.m = m
		if err := s.reserveRedo(ctx); err != nil {
			return err
		}
	}
	if _, err := s.m.Touch(ctx, s.c); err != nil {
		return wrapRemote(err)
	}
	s.gen = t.reg.Gen()
	s.epoch = t.epoch()
	s.m.Pin()
	return nil
}

// touch sends the compute node's heartbeat if one is due, from inside an
// operation (before its round trips, scan rounds, lock waits), so that a
// live node is not judged dead while its operations work or wait, however
// long they take. It costs a clock read when no heartbeat is due. A
// failed heartbeat is caught by lost at the operation's next check. The
// heartbeat is bounded by the operation's context; touchIn by ctx, a step's
// own (a step that completes whatever the caller's context, I5, sends it
// under a context that is never cancelled).
func (s *session) touch() { s.touchIn(s.ctx) }

func (s *session) touchIn(ctx context.Context) {
	if s.m != nil {
		_, _ = s.m.Touch(ctx, s.c)
	}
}

// lost reports whether other compute nodes may have judged this one dead
// since the operation pinned its epoch (registry.Node.Lost): their
// reclamation may then have reused memory the operation read, so it must
// not return, or publish a decision based on, anything it read before.
// Checked right before an operation returns what it read and right before
// it publishes a change decided on an unlocked read; the operation then
// starts again with a new pin (renew).
func (s *session) lost() bool {
	return s.t.opts.Reclaim && s.m != nil && s.t.reg.Lost(s.c.Now(), s.gen)
}

// renew ends a lost operation's pin and takes a new one.
func (s *session) renew() error {
	s.t.rstats.renewals.Add(1)
	s.m.Unpin()
	return s.begin()
}

// end ends the operation's pin and, every ReclaimInterval of the compute
// node, reclaims what no live node can still be reading. A failed Reclaim
// changes nothing and is tried again at the next interval.
func (s *session) end() {
	if s.m == nil {
		return
	}
	s.m.Unpin()
	t := s.t
	if !t.opts.Reclaim {
		return
	}
	now := int64(s.c.Now())
	last := t.lastReclaim.Load()
	if now-last < int64(t.reg.Interval()) || !t.lastReclaim.CompareAndSwap(last, now) {
		return
	}
	// A failed Reclaim (the pool closing) frees nothing and loses nothing:
	// the limbo is kept for the next one.
	_, _ = t.reg.Reclaim(context.Background(), s.c)
}

// reused reports whether a leaf read through cur, with meta word meta, may
// be a later life of the leaf cur's slot named: born after the epoch the
// slot word was read in (the cache entry's stamp for a cached slot, the
// operation's start otherwise) and not confirmed by a second read of the
// slot. The caller then reads the slot itself. A leaf freed while the slot
// word was held was retired with a tag τ ≥ that epoch, and is reused only
// by a compute node whose epoch is past τ, so its new life's birth is
// later (I8). A leaf newly inserted during the operation, or by a compute
// node whose epoch runs ahead, also costs that second read: harmless.
func (s *session) reused(cur cursor, birth uint32) bool {
	if !s.t.opts.Reclaim || cur.confirmed {
		return false
	}
	ref := s.epoch
	if cur.cached {
		ref = s.entry.Epoch
	}
	if !bornAfter(birth, ref) {
		return false
	}
	if cur.cached {
		s.dropEntry()
	}
	return true
}

// mayBeReused reports whether cur's slot comes from the cache of a tree
// that reclaims leaves: its leaf may have been freed and reused since the
// snapshot (I8), so a torn or retired leaf read through it says nothing
// about the slot, which the caller reads itself.
func (s *session) mayBeReused(cur cursor) bool { return cur.cached && s.t.opts.Reclaim }

// retireLeaf hands a leaf that the operation unlinked and retired (I4) to
// reclamation.
func (s *session) retireLeaf(sl slot) {
	if s.t.opts.Reclaim && s.m != nil {
		s.m.Retire(sl.addr(), classBytes(sl.leafClass()))
		s.t.rstats.retired.Add(1)
	}
}

// dropUnlinked gives back a leaf that was written but never linked (its
// publishing CAS failed): no slot ever held its address, so no client, and
// no cache, can know it, and it is free at once.
func (s *session) dropUnlinked(a remote.Addr, class int) {
	if s.t.opts.Reclaim {
		s.t.leaves.Put(a, uint64(classBytes(class)))
		return
	}
	_ = s.c.Free(a, classBytes(class)) // a failure only leaks it
}

// allocLeaf allocates a leaf of class c for a slot on memory node mn: with
// reclamation a reclaimed leaf of that size on mn, else new memory near mn
// (allocNear), else, when no memory node has room, a reclaimed leaf on any
// node.
func (s *session) allocLeaf(ctx context.Context, mn, class int) (remote.Addr, error) {
	n := classBytes(class)
	if !s.t.opts.Reclaim {
		return s.allocNear(ctx, mn, n, leafAlign)
	}
	a := s.t.leaves.Take(mn, uint64(n), leafAlign)
	if a.IsNil() {
		var err error
		if a, err = s.allocNear(ctx, mn, n, leafAlign); !errors.Is(err, remote.ErrOutOfMemory) {
			return a, err
		}
		if a = s.t.leaves.Take(-1, uint64(n), leafAlign); a.IsNil() {
			return 0, err
		}
	}
	s.t.rstats.reused.Add(1)
	return a, nil
}

// checkLeaves returns an error wrapping ErrCorrupt if a leaf held for reuse
// is in linked (the leaves a Verify walk reached).
func (t *Tree) checkLeaves(linked map[remote.Addr]bool) error {
	for a, size := range t.leaves.All() {
		if linked[a] {
			return corruptf("I8: leaf %v of %d bytes is free for reuse but linked", a, size)
		}
	}
	return nil
}

// leaveRegistry closes the members of idle sessions and, if none is in use,
// the node's membership. A membership left open (an operation still ran)
// is judged dead by the others after a lease and stops counting.
func (t *Tree) leaveRegistry() {
	if t.reg == nil {
		return
	}
	ctx := context.Background()
	t.mu.Lock()
	free := t.free
	t.free = nil
	t.mu.Unlock()
	if len(free) > 0 && t.hasUnburied.Load() {
		_ = free[0].markBuried()
	}
	t.handOn(ctx, free)
	var c *remote.Client
	for _, s := range free {
		if s.m != nil { // nil: the session Open used, or a failed begin
			_ = s.m.Close(ctx, s.c)
		}
		c = s.c
	}
	if c != nil {
		_ = t.reg.Close(ctx, c)
	}
}
