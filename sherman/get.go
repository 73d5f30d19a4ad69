package sherman

import (
	"bytes"
	"context"

	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Get returns the value stored under key. A cached search reads one leaf in
// one round trip; a leaf torn by a concurrent writer is read again.
func (t *Tree) Get(ctx context.Context, key []byte) (_ []byte, _ bool, err error) {
	defer func() { err = closedError(err) }()
	if err := t.checkKey(key); err != nil {
		return nil, false, err
	}
	s, err := t.session(ctx)
	if err != nil {
		return nil, false, err
	}
	defer t.release(s)
	if t.rdwc != nil {
		return t.rdwc.Read(ctx, s.c, key, s.getInWindow)
	}
	return s.get(ctx, key)
}

// getInWindow is Get's search run by rdwc (Options.RDWC). It seals the
// window at once: the search linearizes at its next verbs (the leaf READ),
// and Sherman has no earlier verb whose result could be shared.
func (s *session) getInWindow(ctx context.Context, w *rdwc.Window) ([]byte, bool, error) {
	w.Seal()
	return s.get(ctx, w.Key())
}

// get is the body of Get.
func (s *session) get(ctx context.Context, key []byte) ([]byte, bool, error) {
	p, err := s.readLeaf(ctx, key)
	if err != nil {
		return nil, false, err
	}
	if i, _ := p.findLeaf(key); i >= 0 {
		_, v := p.leafKV(i)
		return bytes.Clone(v), true, nil
	}
	return nil, false, nil
}

// read reads the page at a into buf and returns it once valid, re-reading a
// torn page within the retry budget. A page that stays torn while its
// global lock word is set may have been torn by a dead holder: a session
// that holds no lock then locks and unlocks it (helpTorn), which takes the
// word over and repairs the page if the holder is dead. level is the page's expected level, or
// -1 if unknown (then a whole allocation unit is read).
func (s *session) read(ctx context.Context, a remote.Addr, level int, buf []byte) (page, error) {
	if a == 0 {
		return page{}, corrupt("nil page pointer")
	}
	b := buf[:s.t.g.bytesFor(level)]
	for attempt := 0; ; attempt++ {
		if err := s.c.Read(ctx, a, b); err != nil {
			return page{}, err
		}
		p := page{&s.t.g, b}
		if p.valid() {
			if level >= 0 && p.level() != level {
				return page{}, corrupt("page %v has level %d, expected %d", a, p.level(), level)
			}
			return p, nil
		}
		s.t.stats.tornReads.Add(1)
		if err := s.retry("torn or invalid page", a); err != nil {
			return page{}, err
		}
		if attempt >= judgeFirst && (attempt-judgeFirst)%judgeEvery == 0 && !s.locked && !s.verifying {
			if err := s.helpTorn(ctx, a); err != nil {
				return page{}, err
			}
		}
		s.c.Backoff(attempt)
	}
}

// located is where a leaf operation starts.
type located struct {
	leaf   remote.Addr // the leaf that should hold the key
	e      *centry     // the cache entry that routed to it, or nil
	parent remote.Addr // the level-1 page routed from (0 if the leaf is the root)
	p      page        // the leaf's bytes if the descent already read it (a root leaf)
}

// locate finds the leaf that should hold key: from the index cache if a
// cached level-1 page covers key, else by a descent from the root.
func (s *session) locate(ctx context.Context, key []byte) (located, error) {
	if c := s.t.cache; c != nil {
		if leaf, e := c.lookup(key); e != nil {
			s.t.stats.cacheHits.Add(1)
			return located{leaf: leaf, e: e, parent: e.addr}, nil
		}
		s.t.stats.cacheMisses.Add(1)
	}
	leaf, p, err := s.descend(ctx, key, 0)
	return located{leaf: leaf, parent: s.path[1], p: p}, err
}

// descend walks from the root down to level to and returns the address of
// the page at that level that covers key. If that page is the root, it was
// read and is returned as p; otherwise p is the zero page and the address
// comes from the parent's routing. The descent moves right along siblings
// where a page's high fence is at or below key, records the pages it read in
// s.path and adds the level-1 pages it read to the index cache. A cached root
// that turns out stale (it has a sibling or is below level to) is refreshed
// from the root pointer once; errNoLevel reports a tree lower than to.
func (s *session) descend(ctx context.Context, key []byte, to int) (remote.Addr, page, error) {
	t := s.t
	r := t.root.Load()
	a, level := r.addr, r.level
	atRoot, refreshed := true, false
	for hops := 0; ; hops++ {
		p, err := s.read(ctx, a, level, s.buf[0])
		if err != nil {
			return 0, page{}, err
		}
		if atRoot {
			lv := p.level()
			if (p.sibling() != 0 || !p.highInf() || lv < to) && !refreshed {
				if a, err = s.refreshRoot(ctx); err != nil {
					return 0, page{}, err
				}
				level, refreshed = -1, true
				continue
			}
			if lv < to {
				return 0, page{}, errNoLevel
			}
			if cur := t.root.Load(); cur.addr == a && cur.level != lv {
				t.root.CompareAndSwap(cur, &rootRef{addr: a, level: lv})
			}
			level, atRoot = lv, false
			if level == to {
				if p.covers(key) == 0 {
					return a, p, nil
				}
				return a, page{}, nil // a root being split: move right from it
			}
		}
		switch p.covers(key) {
		case 1:
			if a = p.sibling(); a == 0 || hops > 1<<20 {
				return 0, page{}, corrupt("sibling chain broken at level %d", level)
			}
			continue
		case -1:
			return 0, page{}, corrupt("descent for %x reached page %v whose low fence is %x", key, a, p.low())
		}
		s.path[level] = a
		if level == 1 && t.cache != nil {
			t.cache.add(a, p)
		}
		a = p.route(key)
		if level--; level == to {
			return a, page{}, nil
		}
	}
}

// refreshRoot reads the root pointer and caches it with an unknown level.
func (s *session) refreshRoot(ctx context.Context) (remote.Addr, error) {
	var w [8]byte
	if err := s.c.Read(ctx, s.t.meta.Add(offMetaRoot), w[:]); err != nil {
		return 0, err
	}
	a := remote.Addr(le.Uint64(w[:]))
	if a == 0 {
		return 0, corrupt("nil root pointer")
	}
	s.t.root.Store(&rootRef{addr: a, level: -1})
	return a, nil
}

// readLeaf reads the leaf covering key into s.buf[0], starting from the
// index cache and moving right as needed.
func (s *session) readLeaf(ctx context.Context, key []byte) (page, error) {
	loc, err := s.locate(ctx, key)
	if err != nil {
		return page{}, err
	}
	a, e, p := loc.leaf, loc.e, loc.p
	for hops := 0; ; hops++ {
		if p.b == nil {
			if p, err = s.read(ctx, a, 0, s.buf[0]); err != nil {
				return page{}, err
			}
		}
		switch p.covers(key) {
		case 0:
			return p, nil
		case 1:
			s.dropCached(e)
			e = nil
			if a = p.sibling(); a == 0 || hops > 1<<20 {
				return page{}, corrupt("leaf chain broken at %v", a)
			}
		case -1:
			if loc, err = s.reroute(ctx, key, a, e); err != nil {
				return page{}, err
			}
			a, e = loc.leaf, loc.e
			p = loc.p
			continue
		}
		p = page{}
	}
}

// reroute handles a leaf a whose fences put key below it: its route came
// from the stale cache entry e (a leaf reached from the root is never
// below the key), which is dropped before key is located again, within
// the retry budget.
func (s *session) reroute(ctx context.Context, key []byte, a remote.Addr, e *centry) (located, error) {
	if e == nil {
		return located{}, corrupt("leaf %v below its route for %x", a, key)
	}
	s.dropCached(e)
	if err := s.retry("stale cache entry", a); err != nil {
		return located{}, err
	}
	return s.locate(ctx, key)
}

// dropCached invalidates cache entry e (if not nil) after a fence mismatch.
func (s *session) dropCached(e *centry) {
	if e != nil {
		s.t.cache.invalidate(e)
		s.t.stats.cacheInval.Add(1)
	}
}

// helpTorn is called by a reader that keeps finding page a torn: if a's
// global word is set, it locks the page (waiting for a live holder, taking
// the word over from a dead one and repairing the page from its redo
// record) and unlocks it.
func (s *session) helpTorn(ctx context.Context, a remote.Addr) error {
	_, word := s.t.locks.lockWord(a)
	var w [8]byte
	if err := s.c.Read(ctx, word, w[:]); err != nil || le.Uint64(w[:]) == 0 {
		return err
	}
	return s.lockUnlock(ctx, a)
}
