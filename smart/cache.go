package smart

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// The compute node's cache of internal nodes (artcache): a snapshot of every
// node a traversal reads, keyed by the node's full encoded prefix. An
// operation starts at the deepest cached node whose snapshot has a slot for
// its key's next byte and reads that slot's child directly: one round trip
// for a search whose leaf's parent is cached.
//
// Validation (the paper's reverse check): the first child read from a
// cached slot must point back at that slot (its reverse pointer) and, for a
// node, sit at the depth the slot implies; otherwise the entry is dropped and
// the slot is read fresh. Leaf splits and header splits move reverse
// pointers and headers before they return, so an operation that starts after
// a split completed never trusts the stale slot. A cached tombstone or a key
// absent from a snapshot is never taken as an answer: the slot or the node is
// read fresh.

// cacheCounters are the tree's cache statistics (see index.Stats): per
// operation, lookups and leaf-direct hits; per traversal, starts below the
// root and the levels they skipped.
type cacheCounters struct {
	lookups, hits, starts, levelsSaved, invalidations atomic.Uint64
	cachedInserts, cachedInsertsLost                  atomic.Uint64
}

// Stats returns the compute node's counters: the cache's (a hit is a point
// operation that reached its leaf without reading an internal node), the
// leaves found torn under a fresh lock, and read delegation and write
// combining.
func (t *Tree) Stats() index.Stats {
	if t == nil || t.cn == nil {
		return index.Stats{}
	}
	st := t.cache.Stats()
	rd := t.rd.Stats()
	c := &t.cstats
	return index.Stats{
		CacheLookups: c.lookups.Load(), CacheHits: c.hits.Load(),
		CacheStartsBelowRoot: c.starts.Load(), CacheLevelsSaved: c.levelsSaved.Load(),
		CacheInvalidations: c.invalidations.Load(), CacheEntries: st.Entries, CacheBytes: st.Bytes,
		CachedInserts: c.cachedInserts.Load(), CachedInsertsLost: c.cachedInsertsLost.Load(),
		TornUnderLock: t.tornLocked.Load(),
		Delegated:     rd.Delegated, Combined: rd.Combined,
		Retired: t.rstats.retired.Load(), Reused: t.rstats.reused.Load(), Renewals: t.rstats.renewals.Load(),
		Crashed: t.rstats.crashed.Load(), Recovered: t.rstats.recovered.Load(),
	}
}

func newCache(opts Options) *artcache.Cache {
	b := opts.CacheBytes
	if b == 0 {
		b = DefaultCacheBytes
	}
	return artcache.New(artcache.Options{Bytes: b, Hash: opts.HashCache})
}

// start returns where a traversal of s.enc begins: a cached slot, or the
// root slot with its remembered value (rememberedRoot).
func (s *session) start(ctx context.Context) (cursor, error) {
	t := s.t
	if t.opts.CacheBytes >= 0 {
		if e, idx, plen, ok := t.cache.Lookup(s.enc); ok {
			t.cstats.starts.Add(1)
			s.entry, s.entryPlen, s.entryIdx = e, plen, idx
			cur := cursor{addr: nodeSlotAddr(remote.Addr(e.Addr), idx), sl: slot(e.Slots()[idx]),
				depth: int16(plen + 1), level: int16(e.Level() + 1), cached: true, node: remote.Addr(e.Addr)}
			if plen+1 < len(s.enc) {
				// A small child kept in the entry (rememberChild).
				if j, w, ok := e.Child(idx, s.enc[plen+1]); ok {
					child := cur.sl.addr()
					cur = cursor{addr: nodeSlotAddr(child, j), sl: slot(w), depth: int16(plen + 2),
						level: cur.level + 1, cached: true, node: child}
				}
			}
			t.cstats.levelsSaved.Add(uint64(cur.level))
			return cur, nil
		}
	}
	return s.rememberedRoot(ctx)
}

// stale reports whether the child read through a cached slot does not point
// back at it, or is being moved (its reverse pointer carries revMoving): the
// caller must read the slot itself. A child that moved away drops the cache
// entry.
func (s *session) stale(cur cursor, rev remote.Addr) bool {
	if !cur.cached || rev == cur.addr {
		return false
	}
	if revSlot(rev) != cur.addr {
		s.dropEntry()
	}
	return true
}

// raiseCachedType replaces the cache entry the current traversal started
// from by a copy whose starting slot carries node type t: the node it
// names switched type in place since the entry was read, and without the
// copy every traversal through the entry would read the node twice (the
// slots its stale type covers, then the rest).
func (s *session) raiseCachedType(t nodeType) {
	if e := s.entry; e != nil {
		s.patchEntry(slot(e.Slots()[s.entryIdx]).withType(t))
	}
}

// patchEntry replaces the cache entry the current traversal started from
// (not nil) by a copy whose starting slot holds sl, makes the copy the
// starting entry and returns it (nil if it does not fit an entry). The copy
// keeps the entry's epoch stamp: its other slot words are as old as before
// (I8).
func (s *session) patchEntry(sl slot) *artcache.Entry {
	c := s.entry.WithSlot(s.entryIdx, uint64(sl))
	if c == nil {
		return nil
	}
	s.t.cache.Insert(s.enc[:s.entryPlen], c)
	s.entry = c
	return c
}

// dropEntry drops the cache entry the current traversal started from.
func (s *session) dropEntry() {
	if s.entry != nil {
		s.t.cache.Invalidate(s.enc[:s.entryPlen], s.entry)
		s.t.cstats.invalidations.Add(1)
		s.entry = nil
	}
}

// remember caches the node just read (s.node, at level, whose full prefix
// is s.enc[:plen]) unless the cache already holds the same snapshot.
func (s *session) remember(plen, level int) {
	t := s.t
	if t.opts.CacheBytes < 0 {
		return
	}
	n := &s.node
	prefix := s.enc[:plen]
	// Up to the last non-empty slot: a slot the snapshot does not hold is
	// empty to a lookup, and a node by size class has room for up to four
	// times the slots it uses.
	used := n.typ.capacity()
	for used > 0 && n.slots[used-1].isEmpty() {
		used--
	}
	slots := s.slotWords[:used]
	for i := range slots {
		slots[i] = uint64(n.slots[i])
	}
	if s.rememberChild(plen, slots) {
		return
	}
	s.cacheNode(prefix, n.addr, slots, level)
}

// cacheNode caches slots (up to the last non-empty one) as the snapshot of
// the node at addr, at level, whose full prefix is prefix, unless the cache
// already holds the same snapshot.
func (s *session) cacheNode(prefix []byte, addr remote.Addr, slots []uint64, level int) {
	t := s.t
	if e, ok := t.cache.Get(prefix); ok && e.Addr == uint64(addr) && slices.Equal(e.Slots(), slots) {
		return
	}
	e := artcache.NewEntry(uint64(addr), slots, level)
	e.Epoch = s.epoch
	t.cache.Insert(prefix, e)
}

// rememberChild keeps the slots of the node just read (s.node, whose full
// prefix is s.enc[:plen]) in its parent's cache entry if it is small (at
// most artcache.MaxChildSlots slots up to its last used one, slots) and
// has no compressed path, so that the parent is the entry under
// s.enc[:plen-1]: a search through the parent then starts at the node's
// slot (start). It reports whether the parent's entry holds them, and
// drops an entry the node had of its own. Not with Options.PaperNodes,
// whose nodes switch type in place (raiseCachedType raises only an entry's
// own slots).
//
// At 4 M random keys a quarter of the keys sit under nodes of two or three
// children one level below nodes of about 60; as entries of their own they
// cost about 110 bytes each and did not fit a 64 MiB cache beside their
// parents (docs/results/README.md, "The compute-node cache").
func (s *session) rememberChild(plen int, slots []uint64) bool {
	t, n := s.t, &s.node
	if t.opts.PaperNodes || plen == 0 || n.h.prefixLen() != 0 || len(slots) == 0 || len(slots) > artcache.MaxChildSlots {
		return false
	}
	parent := s.enc[:plen-1]
	p, ok := t.cache.Get(parent)
	if !ok {
		return false
	}
	idx := childIndex(p, s.enc[plen-1], n.addr)
	if idx < 0 {
		return false
	}
	if !slices.Equal(p.ChildSlots(idx), slots) {
		c := p.WithChild(idx, p.Slots()[idx], slots)
		if c == nil {
			return false
		}
		t.cache.Insert(parent, c)
	}
	if own, ok := t.cache.Get(s.enc[:plen]); ok {
		t.cache.Invalidate(s.enc[:plen], own)
	}
	return true
}

// childIndex returns the index of the slot of p that names the node at
// addr under partial key b, or -1. A node holds each partial key once (I2).
func childIndex(p *artcache.Entry, b byte, addr remote.Addr) int {
	if i, w, ok := p.Slot(b); ok {
		if sl := slot(w); sl.isChild() && !sl.isLeaf() && sl.addr() == addr {
			return i
		}
	}
	return -1
}

// rememberNew caches a node this session just created and published, with
// the given prefix and slots, by a CAS of cur's slot to repl (a split's
// NODE_4, a moved node's successor). A node with no compressed path goes
// into the cache entry of the node holding cur's slot, if that entry still
// shows the slot as the CAS found it, together with the new slot word
// (rememberChild); otherwise it gets an entry, and that parent entry takes
// the new slot word.
func (s *session) rememberNew(cur cursor, repl slot, prefix []byte, addr remote.Addr, level int, slots ...slot) {
	t := s.t
	if t.opts.CacheBytes < 0 {
		return
	}
	words := s.slotWords[:len(slots)]
	for i, sl := range slots {
		words[i] = uint64(sl)
	}
	var parent *artcache.Entry
	idx := -1
	if cur.node != 0 && cur.depth > 0 {
		i := int(cur.addr-cur.node-nodeSlotsOff) / 8
		if p, ok := t.cache.Get(s.enc[:cur.depth-1]); ok && p.Addr == uint64(cur.node) && i < len(p.Slots()) && p.Slots()[i] == uint64(cur.sl) {
			parent, idx = p, i
		}
	}
	if parent != nil && !t.opts.PaperNodes && len(prefix) == int(cur.depth) {
		if c := parent.WithChild(idx, uint64(repl), words); c != nil {
			t.cache.Insert(s.enc[:cur.depth-1], c)
			return
		}
	}
	e := artcache.NewEntry(uint64(addr), words, level)
	e.Epoch = s.epoch
	t.cache.Insert(prefix, e)
	if parent != nil && len(parent.ChildSlots(idx)) == 0 {
		// The parent's entry names the new node too (unless it keeps the
		// slots of the node the slot named before: they would stay).
		if c := parent.WithSlot(idx, uint64(repl)); c != nil {
			t.cache.Insert(s.enc[:cur.depth-1], c)
		}
	}
}

// patchRing remembers the cache entries followForward patched last, so
// that an entry found stale again soon after is dropped, not patched again.
type patchRing struct {
	mu      sync.Mutex
	entries [patchRingSize]*artcache.Entry
	next    int
}

const patchRingSize = 64

func (r *patchRing) has(e *artcache.Entry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.entries[:], e)
}

func (r *patchRing) add(e *artcache.Entry) {
	r.mu.Lock()
	r.entries[r.next] = e
	r.next = (r.next + 1) % patchRingSize
	r.mu.Unlock()
}
