package artcache

import "sync"

// DefaultBytes is the byte budget of a cache whose Options.Bytes is 0.
const DefaultBytes = 64 << 20

// Options configure a Cache. The zero Options are the paper's design: an
// ART-indexed cache of DefaultBytes.
type Options struct {
	// Bytes is the byte budget (0: DefaultBytes; negative: the cache is
	// disabled and every call is a cheap no-op).
	Bytes int64
	// Hash indexes entries by a hash map of their full prefix instead of the
	// local ART: the factor-analysis baseline, which stores every prefix in
	// full.
	Hash bool
}

// Stats are a cache's counters.
type Stats struct {
	Entries       int    // entries cached now
	Bytes         int64  // memory accounted now (see the package comment)
	Inserts       uint64 // calls of Insert that stored an entry (replacements included)
	Evictions     uint64 // entries removed to stay within the budget
	Invalidations uint64 // entries removed by Invalidate
}

// Cache is a compute node's cache of remote internal nodes, each keyed by
// its node's key prefix. It is safe for concurrent use: Lookup, Get and
// Stats share a read lock, Insert and Invalidate hold the write lock for
// the time of a local update, and nothing else ever blocks.
type Cache struct {
	// The index: exactly one of art and hash is set, unless the cache is
	// disabled. Both have the methods lookup, get, insert (of an uncached
	// entry; it returns the entry replaced), remove (of a cached entry) and
	// size (the index's own memory). They are called directly rather than
	// through an interface so that keys do not escape to the heap.
	art    *artTree
	hash   *hashIndex
	off    bool
	budget int64

	mu            sync.RWMutex
	clock         clock
	entries       int
	entryBytes    int64
	inserts       uint64
	evictions     uint64
	invalidations uint64
}

// New returns an empty cache configured by opts.
func New(opts Options) *Cache {
	c := &Cache{budget: opts.Bytes}
	switch {
	case opts.Bytes < 0:
		c.off = true
	case opts.Hash:
		c.hash = newHashIndex()
	default:
		c.art = &artTree{}
	}
	if opts.Bytes == 0 {
		c.budget = DefaultBytes
	}
	return c
}

// Lookup returns the deepest entry whose prefix is a prefix of key and that
// has a non-empty slot (word != 0) whose partial key, the low 8 bits of the
// slot word, equals key[len(prefix)]; idx is the index of the first such
// slot and plen = len(prefix). ok is false if there is none. Lookup marks
// the entry referenced and does not allocate.
func (c *Cache) Lookup(key []byte) (e *Entry, idx int, plen int, ok bool) {
	if c.off {
		return nil, 0, 0, false
	}
	c.mu.RLock()
	e, idx, plen, ok = c.lookup(key)
	if ok {
		touch(e)
	}
	c.mu.RUnlock()
	return e, idx, plen, ok
}

// Deepest returns the deepest entry whose prefix is a proper prefix of key,
// whatever its slots, and plen = len(prefix); ok is false if there is none.
// Unlike Lookup it does not mark the entry referenced: the caller looks at
// what the cache knows rather than using it.
func (c *Cache) Deepest(key []byte) (e *Entry, plen int, ok bool) {
	if c.off {
		return nil, 0, false
	}
	c.mu.RLock()
	if c.hash != nil {
		e, plen = c.hash.deepest(key)
	} else {
		e, plen = c.art.deepest(key)
	}
	c.mu.RUnlock()
	return e, plen, e != nil
}

// Get returns the entry stored under exactly prefix, whatever its slots,
// and marks it referenced.
func (c *Cache) Get(prefix []byte) (*Entry, bool) {
	if c.off {
		return nil, false
	}
	c.mu.RLock()
	e := c.get(prefix)
	if e != nil {
		touch(e)
	}
	c.mu.RUnlock()
	return e, e != nil
}

// Insert stores e under prefix, replacing any entry there (whose reference
// bit e inherits), then evicts entries until the cache is within its budget;
// if e alone does not fit, it is evicted too. The cache keeps its own copy
// of prefix. e must not be modified afterwards, and must not be cached under
// another prefix or in another cache (Insert panics if it is); inserting the
// entry already stored under prefix changes nothing.
func (c *Cache) Insert(prefix []byte, e *Entry) {
	if c.off {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.leaf.kind != kindNone {
		if c.get(prefix) == e {
			return
		}
		panic("artcache: Insert of an entry that is cached elsewhere")
	}
	c.inserts++
	if old := c.insert(prefix, e); old != nil {
		e.setReferenced(old.referenced())
		if c.clock.hand == old {
			c.clock.hand = e // e takes old's place in the order
		}
		c.account(old, -1)
	}
	c.account(e, 1)
	if c.clock.hand == nil {
		c.clock.hand = e
	}
	for c.size() > c.budget && c.entries > 1 {
		c.drop(c.clock.victim(c.next, e))
		c.evictions++
	}
	if c.size() > c.budget {
		c.drop(e)
		c.evictions++
	}
}

// Invalidate removes the entry under prefix if it is still e: a reader found
// e stale. If e was replaced or evicted meanwhile, Invalidate does nothing.
func (c *Cache) Invalidate(prefix []byte, e *Entry) {
	if c.off {
		return
	}
	c.mu.Lock()
	if e != nil && c.get(prefix) == e {
		c.drop(e)
		c.invalidations++
	}
	c.mu.Unlock()
}

// Stats returns the cache's counters. A disabled cache reports zeros.
func (c *Cache) Stats() Stats {
	if c.off {
		return Stats{}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Stats{
		Entries:       c.entries,
		Bytes:         c.size(),
		Inserts:       c.inserts,
		Evictions:     c.evictions,
		Invalidations: c.invalidations,
	}
}

// size returns the memory accounted: entries and index.
func (c *Cache) size() int64 { return c.entryBytes + c.indexSize() }

// drop removes the cached entry e.
func (c *Cache) drop(e *Entry) {
	c.clock.leave(c.next, e)
	c.remove(e)
	c.account(e, -1)
}

// account adds n times e to the entry counts.
func (c *Cache) account(e *Entry, n int) {
	c.entries += n
	c.entryBytes += int64(n) * e.bytes()
}

// touch sets e's reference bit. Only a clear bit is written, so hits on a
// hot entry do not contend for its cache line.
func touch(e *Entry) {
	if !e.referenced() {
		e.setReferenced(true)
	}
}

func (c *Cache) lookup(key []byte) (*Entry, int, int, bool) {
	if c.hash != nil {
		return c.hash.lookup(key)
	}
	return c.art.lookup(key)
}

func (c *Cache) get(prefix []byte) *Entry {
	if c.hash != nil {
		return c.hash.get(prefix)
	}
	return c.art.get(prefix)
}

func (c *Cache) insert(prefix []byte, e *Entry) *Entry {
	if c.hash != nil {
		return c.hash.insert(prefix, e, c.clock.hand)
	}
	return c.art.insert(prefix, e)
}

// next returns the entry after e in the index's order, wrapping around.
func (c *Cache) next(e *Entry) *Entry {
	if c.hash != nil {
		return c.hash.next(e)
	}
	return c.art.next(e)
}

func (c *Cache) remove(e *Entry) {
	if c.hash != nil {
		c.hash.remove(e)
		return
	}
	c.art.remove(e)
}

func (c *Cache) indexSize() int64 {
	if c.hash != nil {
		return c.hash.size()
	}
	return c.art.size()
}
