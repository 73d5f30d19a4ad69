package sherman

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Put inserts key or replaces its value (an upsert). Without a split it
// costs three round trips on a cache hit: the global lock CAS, the leaf READ
// and one batch of the entry WRITE and the unlock WRITE; two when the lock
// is handed over locally (no CAS, no unlock).
//
// Put returns nil once the pair is stored, and an error means it was not,
// with three exceptions where it may have been: an error wrapping
// remote.ErrClosed (the pool closed during the final write), one wrapping
// index.ErrCorrupt (the tree is broken), and, with Options.RDWC, the
// context's error of a Put that gave up while combined into another
// client's write after that client took its value. A leaf split stores the
// pair before it inserts the separator into the level above; if that insert
// fails (out of memory, retry budget), Put still returns nil: the new leaf
// is reached through its left sibling (B-link) and counted in
// Stats.UnlinkedSplits.
func (t *Tree) Put(ctx context.Context, key, value []byte) (err error) {
	defer func() { err = closedError(err) }()
	if err := t.checkKey(key); err != nil {
		return err
	}
	if len(value) > t.g.valueSize {
		return fmt.Errorf("%w: %d bytes, the tree's ValueSize is %d", index.ErrValueTooLarge, len(value), t.g.valueSize)
	}
	s, err := t.session(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	if t.rdwc != nil {
		return t.rdwc.Write(ctx, s.c, key, value, s.putInWindow)
	}
	return s.put(ctx, key, func() []byte { return value })
}

// putInWindow is Put's write run by rdwc (Options.RDWC): it publishes the
// latest value combined into the window, taken right before the WRITE.
func (s *session) putInWindow(ctx context.Context, w *rdwc.Window) error {
	return s.put(ctx, w.Key(), w.Value)
}

// lockedLeaf is a leaf read under its lock.
type lockedLeaf struct {
	addr   remote.Addr
	h      held
	p      page        // in s.buf[0]
	parent remote.Addr // a level-1 page whose low fence is at most the leaf's
}

// lockLeaf locks and reads the leaf covering key, moving right (and
// dropping a stale cache entry) as needed. The caller must unlock it.
func (s *session) lockLeaf(ctx context.Context, key []byte) (lockedLeaf, error) {
	loc, err := s.locate(ctx, key)
	if err != nil {
		return lockedLeaf{}, err
	}
	a, e := loc.leaf, loc.e
	for hops := 0; ; hops++ {
		h, p, err := s.lockRead(ctx, a, 0, s.buf[0])
		if err != nil {
			return lockedLeaf{}, err
		}
		switch p.covers(key) {
		case 0:
			return lockedLeaf{addr: a, h: h, p: p, parent: loc.parent}, nil
		case 1:
			next := p.sibling()
			if err := s.unlock(ctx, h); err != nil {
				return lockedLeaf{}, err
			}
			s.dropCached(e)
			e = nil
			if a = next; a == 0 || hops > 1<<20 {
				return lockedLeaf{}, corrupt("leaf chain broken at %v", a)
			}
		case -1:
			if err := s.unlock(ctx, h); err != nil {
				return lockedLeaf{}, err
			}
			if loc, err = s.reroute(ctx, key, a, e); err != nil {
				return lockedLeaf{}, err
			}
			a, e = loc.leaf, loc.e
		}
	}
}

// put is the body of Put. It takes the value to write from value() once the
// leaf is locked and read, immediately before the WRITE that publishes it
// (with RDWC, the latest value combined meanwhile).
//
// A write refused because the compute node was silent and its lock may have
// been taken over (ErrLeaseLost) wrote nothing, so put starts again, within
// the retry budget.
func (s *session) put(ctx context.Context, key []byte, value func() []byte) error {
	for {
		l, err := s.lockLeaf(ctx, key)
		if err != nil {
			return err
		}
		err = s.putLocked(ctx, l, key, value())
		if !errors.Is(err, ErrLeaseLost) {
			return err
		}
		if rerr := s.retry("lock lost while the compute node was silent", l.addr); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
}

// putLocked writes key → value into the locked leaf l and unlocks it.
func (s *session) putLocked(ctx context.Context, l lockedLeaf, key, value []byte) error {
	g := &s.t.g
	slot, free := l.p.findLeaf(key)
	if slot < 0 {
		slot = free
	}
	if slot >= 0 {
		e := s.buf[1][:g.leafEntry]
		g.putEntry(e, l.p.version(), key, value)
		return s.unlock(ctx, l.h, s.pageWrite(l.addr, g.entryOffset(slot), e)...)
	}
	return s.splitLeaf(ctx, l, key, value)
}

// splitLeaf splits the full locked leaf l while inserting key: the sorted
// upper half moves to a new right sibling, written first; then the leaf is
// rewritten with the lower half, the separator as high fence and the new
// sibling, together with the unlock; last the separator goes to the parent.
func (s *session) splitLeaf(ctx context.Context, l lockedLeaf, key, value []byte) error {
	g := &s.t.g
	p := l.p
	kvs := make([]kv, 0, g.leafSpan+1)
	for i := range g.leafSpan {
		if k, v := p.leafKV(i); k != nil {
			kvs = append(kvs, kv{k, v})
		}
	}
	kvs = append(kvs, kv{key, value})
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	m := len(kvs) / 2
	sepKey := bytes.Clone(kvs[m].key)

	right, err := s.alloc(ctx)
	if err != nil {
		return errors.Join(err, s.unlock(ctx, l.h))
	}
	rh := header{version: 1, sibling: p.sibling(), low: sepKey, high: p.high(), highInf: p.highInf()}
	g.encodeLeaf(s.buf[1], &rh, kvs[m:])
	if err := s.c.Write(context.WithoutCancel(ctx), right, s.buf[1][:g.leafBytes]); err != nil {
		return errors.Join(err, s.unlock(ctx, l.h))
	}
	lh := p.headerOf()
	lh.version++
	lh.sibling, lh.high, lh.highInf = right, sepKey, false
	g.encodeLeaf(s.buf[2], &lh, kvs[:m])
	if err := s.unlock(ctx, l.h, s.pageWrite(l.addr, 0, s.buf[2][:g.leafBytes])...); err != nil {
		return err
	}
	s.t.stats.leafSplits.Add(1)
	// The pair is in the tree now; finish the structural change even if the
	// caller gives up, so that no separator is left out needlessly. If it
	// fails anyway (out of memory, retry budget, pool closed), the new leaf
	// stays reachable through its left sibling and the Put has succeeded:
	// only a broken tree is reported.
	ctx = context.WithoutCancel(ctx)
	if err := s.insertSep(ctx, 1, sepKey, right, l.parent); err != nil {
		if errors.Is(err, index.ErrCorrupt) {
			return err
		}
		s.t.stats.unlinked.Add(1)
	}
	return nil
}

// insertSep inserts the separator key → child into the internal page at
// level that covers key, splitting pages and growing the root as needed.
// hint is a page at that level whose low fence is at most key (0: descend
// from the root).
func (s *session) insertSep(ctx context.Context, level int, key []byte, child, hint remote.Addr) error {
	g := &s.t.g
	for {
		a := hint
		hint = 0
		if a == 0 {
			var err error
			a, _, err = s.descend(ctx, key, level)
			if errors.Is(err, errNoLevel) {
				grown, err := s.growRoot(ctx, level, key, child)
				if err != nil || grown {
					return err
				}
				if err := s.retry("concurrent root growth", s.t.meta); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
		}
		h, p, err := s.lockInner(ctx, a, level, key)
		if err != nil {
			return err
		}
		a = h.addr
		// The separator may be there already: Recover inserts the
		// separator of a page it finds on its level's sibling chain and
		// not below the level above, which is also what a live writer's
		// split looks like before its own insert (linkSplits), and the
		// second insert finds the first. An internal split since may have
		// moved it up, leaving it as this page's low bound with the child
		// as its leftmost.
		i := p.search(key)
		var routed remote.Addr // where the separator routes if it is there already
		switch {
		case i > 0 && bytes.Equal(p.innerKey(i-1), key):
			routed = p.innerChild(i - 1)
		case i == 0 && bytes.Equal(p.low(), key):
			routed = p.leftmost()
		}
		if routed != 0 {
			err := s.unlock(ctx, h.held)
			if routed != child {
				return errors.Join(err, corrupt("separator %x at level %d already routes to %v, not %v",
					key, level, routed, child))
			}
			return err
		}
		seps := slices.Insert(p.seps(), i, sep{key, child})
		hd := p.headerOf()
		if len(seps) <= g.innerSpan {
			hd.version++
			g.encodeInner(s.buf[1], &hd, seps)
			n := g.innerHdr + len(seps)*g.innerEntry
			return s.unlock(ctx, h.held, s.pageWrite(a, 0, s.buf[1][:n])...)
		}
		// Split: the middle separator moves up; its child becomes the new
		// page's leftmost child.
		m := len(seps) / 2
		up := seps[m]
		right, err := s.alloc(ctx)
		if err != nil {
			return errors.Join(err, s.unlock(ctx, h.held))
		}
		rh := header{version: 1, level: level, sibling: hd.sibling, leftmost: up.child,
			low: up.key, high: hd.high, highInf: hd.highInf}
		g.encodeInner(s.buf[1], &rh, seps[m+1:])
		if err := s.c.Write(context.WithoutCancel(ctx), right, s.buf[1][:g.innerBytes]); err != nil {
			return errors.Join(err, s.unlock(ctx, h.held))
		}
		hd.version++
		hd.sibling, hd.high, hd.highInf = right, up.key, false
		g.encodeInner(s.buf[2], &hd, seps[:m])
		if err := s.unlock(ctx, h.held, s.pageWrite(a, 0, s.buf[2][:g.innerBytes])...); err != nil {
			return err
		}
		s.t.stats.innerSplits.Add(1)
		level, key, child, hint = level+1, up.key, right, s.path[level+1]
	}
}

// lockedInner is an internal page locked by a session.
type lockedInner struct {
	held
	addr remote.Addr
}

// lockInner locks and reads the internal page at level covering key,
// starting at a and moving right. The page is in s.buf[0].
func (s *session) lockInner(ctx context.Context, a remote.Addr, level int, key []byte) (lockedInner, page, error) {
	for hops := 0; ; hops++ {
		h, p, err := s.lockRead(ctx, a, level, s.buf[0])
		if err != nil {
			return lockedInner{}, page{}, err
		}
		switch p.covers(key) {
		case 0:
			return lockedInner{h, a}, p, nil
		case -1:
			return lockedInner{}, page{}, errors.Join(s.unlock(ctx, h),
				corrupt("page %v at level %d is right of separator %x", a, level, key))
		}
		next := p.sibling()
		if err := s.unlock(ctx, h); err != nil {
			return lockedInner{}, page{}, err
		}
		if a = next; a == 0 || hops > 1<<20 {
			return lockedInner{}, page{}, corrupt("sibling chain broken at level %d", level)
		}
	}
}

// growRoot handles a split at level-1 when the tree has no page at level:
// if the root pointer still names a page at level-1 (necessarily the
// leftmost one), it installs a new root at level with that page as leftmost
// child and the separator key → child, by CAS on the root pointer. It
// reports false if the root had grown already or the CAS lost a race; the
// caller then inserts the separator normally. Any splitter may grow the
// root, so concurrent splits of a small tree need not wait for each other.
func (s *session) growRoot(ctx context.Context, level int, key []byte, child remote.Addr) (bool, error) {
	g := &s.t.g
	old, err := s.refreshRoot(ctx)
	if err != nil {
		return false, err
	}
	p, err := s.read(ctx, old, -1, s.buf[0])
	if err != nil {
		return false, err
	}
	switch lv := p.level(); {
	case lv >= level:
		return false, nil
	case lv < level-1:
		return false, corrupt("root %v at level %d while level %d splits", old, lv, level-1)
	}
	root, err := s.alloc(ctx)
	if err != nil {
		return false, err
	}
	h := header{version: 1, level: level, leftmost: old, highInf: true}
	g.encodeInner(s.buf[1], &h, []sep{{key, child}})
	ctx = context.WithoutCancel(ctx)
	if err := s.c.Write(ctx, root, s.buf[1][:g.innerBytes]); err != nil {
		return false, err
	}
	prev, err := s.c.CAS(ctx, s.t.meta.Add(offMetaRoot), uint64(old), uint64(root))
	if err != nil || prev != uint64(old) {
		return false, err // the new page stays unused
	}
	s.t.root.Store(&rootRef{addr: root, level: level})
	s.t.stats.rootGrows.Add(1)
	return true, nil
}
