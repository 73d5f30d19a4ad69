package smart

import (
	"context"
	"sync/atomic"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/remote"
)

// snapshot is the cache's copy of the slots of one node: its own entry's
// slot words, or the words its parent's entry keeps for it (WithChild).
type snapshot struct {
	entry *artcache.Entry
	child int      // the slot of entry naming the node (its words are the child's), or -1 (its own)
	words []uint64 // the node's slot words up to its last non-empty one; the cache's, read-only
	plen  int      // the node's full prefix: its slots discriminate on s.enc[plen]
}

// snapshotBelow returns the cache's snapshot of the node cur's slot names,
// a slot of the entry the traversal started from (start), if the cache
// holds one: its own entry, deeper on the key's path than the starting
// entry and of the same address, or the words the starting entry keeps
// for it. Either lacks a slot for the key's byte below the node (Lookup
// would have started there otherwise).
func (s *session) snapshotBelow(cur cursor) (snapshot, bool) {
	e := s.entry
	if !cur.cached || e == nil || cur.node != remote.Addr(e.Addr) || cur.sl.isFrozen() || !cur.sl.isChild() || cur.sl.isLeaf() {
		return snapshot{}, false
	}
	node := uint64(cur.sl.addr())
	if d, plen, ok := s.t.cache.Deepest(s.enc); ok && plen >= int(cur.depth) && d.Addr == node {
		return snapshot{entry: d, child: -1, words: d.Slots(), plen: plen}, true
	}
	if kids := e.ChildSlots(s.entryIdx); len(kids) > 0 && int(cur.depth) < len(s.enc) {
		return snapshot{entry: e, child: s.entryIdx, words: kids, plen: int(cur.depth)}, true
	}
	return snapshot{}, false
}

// snapshotOf returns the cache's snapshot of the node at addr whose full
// prefix is s.enc[:plen], if it holds one.
func (s *session) snapshotOf(plen int, addr remote.Addr) (snapshot, bool) {
	if e, ok := s.t.cache.Get(s.enc[:plen]); ok && e.Addr == uint64(addr) {
		return snapshot{entry: e, child: -1, words: e.Slots(), plen: plen}, true
	}
	if plen == 0 {
		return snapshot{}, false
	}
	p, ok := s.t.cache.Get(s.enc[:plen-1])
	if !ok {
		return snapshot{}, false
	}
	if idx := childIndex(p, s.enc[plen-1], addr); idx >= 0 {
		if kids := p.ChildSlots(idx); len(kids) > 0 {
			return snapshot{entry: p, child: idx, words: kids, plen: plen}, true
		}
	}
	return snapshot{}, false
}

// insertCached is the normal insert of a key that leaves the tree below
// cur's node, decided on the cache's snapshot of that node instead of a
// fresh read of it: the leaf's WRITE and the CAS of the slot after the
// last one the snapshot holds go in one round trip (docs/smart-protocol.md,
// "Insert from a snapshot"). A snapshot's slots never return to empty and
// keep their partial keys (I1), and the slots in use are always the first
// ones of a node (I2), so a CAS that finds that slot empty proves the key's
// byte is in none of the node's slots. It reports whether the key was
// inserted; otherwise the caller goes on from the cursor returned: the
// slot the CAS found holding the key's byte, or cur, whose node is then
// read as without the snapshot. By size class only: with
// Options.PaperNodes a slot past the header's type must raise it, and
// the snapshot has no header.
func (s *session) insertCached(ctx context.Context, cur cursor, key []byte) (bool, cursor, error) {
	if s.t.opts.PaperNodes || s.t.opts.LockedInternal || s.t.opts.NoCachedInserts {
		return false, cur, nil
	}
	sn, ok := s.snapshotBelow(cur)
	if !ok || sn.plen >= len(s.enc) || !s.t.odds.try() {
		return false, cur, nil
	}
	b, j := s.enc[sn.plen], len(sn.words)
	// A node by size class has its slot's type for life (it moves to
	// grow): j must be inside it. A full node moves on the normal path.
	if j >= cur.sl.nodeType().capacity() {
		return false, cur, nil
	}
	for _, w := range sn.words {
		if sl := slot(w); sl.isEmpty() || sl.isFrozen() || sl.partial() == b {
			return false, cur, nil
		}
	}
	node, value := cur.sl.addr(), s.value()
	class := s.t.lf.classOf(key, value)
	la, err := s.allocLeaf(ctx, node.MN(), class)
	if err != nil {
		return false, cur, err
	}
	at := nodeSlotAddr(node, j)
	s.img = s.t.lf.image(s.img, at, key, value, class, s.t.epoch())
	want := leafSlot(b, class, la)
	ops, err := s.link(ctx, append(s.batch(), remote.Write(la, s.img)), remote.CAS(at, 0, uint64(want)))
	if err != nil {
		return false, cur, err
	}
	got := slot(ops[len(ops)-1].Old)
	if got.isEmpty() {
		s.t.cstats.cachedInserts.Add(1)
		s.t.odds.record(true)
		s.cacheInserted(sn, j, want)
		return true, cur, nil
	}
	s.dropUnlinked(la, class)
	s.t.cstats.cachedInsertsLost.Add(1)
	s.t.odds.record(false)
	if !got.isFrozen() && got.partial() == b {
		return false, cursor{addr: at, sl: got, depth: int16(sn.plen + 1), level: cur.level + 1, node: node}, nil
	}
	// Another key took the slot, or the node is moving: the normal path
	// reads the node (and caches the fresh snapshot).
	return false, cur, nil
}

// cacheInserted adds word, just CASed into slot j of the node sn is a
// snapshot of, to the cache's copy if that still ends right before slot j,
// so that the next operation on the key starts at the new slot. The copy
// keeps the entry's epoch stamp: its other words are as old as before
// (a leaf born since then is checked again when reached, I8).
func (s *session) cacheInserted(sn snapshot, j int, word slot) {
	if len(sn.words) != j {
		return
	}
	if sn.child < 0 {
		prefix := s.enc[:sn.plen]
		if cur, ok := s.t.cache.Get(prefix); ok && cur == sn.entry {
			if c := sn.entry.WithSlot(j, uint64(word)); c != nil {
				s.t.cache.Insert(prefix, c)
			}
		}
		return
	}
	prefix := s.enc[:sn.plen-1]
	if cur, ok := s.t.cache.Get(prefix); ok && cur == sn.entry {
		words := append(append(s.slotWords[:0], sn.words...), uint64(word))
		if c := sn.entry.WithChild(sn.child, sn.entry.Slots()[sn.child], words); c != nil {
			s.t.cache.Insert(prefix, c)
		}
	}
}

// insertOdds judges whether inserting on snapshots pays on this compute
// node. A won CAS saves the node's READ, a lost one costs a round trip on
// top of the normal insert, so it pays when snapshots are fresh more often
// than not: with one compute node, whose own inserts keep its snapshots up
// to date, nearly always; in a load by many compute nodes, whose inserts
// into the same young nodes age every snapshot, seldom. score moves by one
// per outcome, between -oddsBound and oddsBound; below zero only every
// oddsProbe-th insert tries, to notice when the odds turn.
type insertOdds struct {
	score atomic.Int32
	skips atomic.Uint32
}

const (
	oddsBound = 16
	oddsProbe = 32
)

// try reports whether the next insert on a snapshot should try.
func (o *insertOdds) try() bool {
	return o.score.Load() >= 0 || o.skips.Add(1)%oddsProbe == 0
}

// record counts the outcome of a try.
func (o *insertOdds) record(won bool) {
	if v := o.score.Load(); won && v < oddsBound {
		o.score.Add(1)
	} else if !won && v > -oddsBound {
		o.score.Add(-1)
	}
}
