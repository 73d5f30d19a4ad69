package sherman

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/remote"
)

// cache is a compute node's index cache: private copies of level-1 pages
// (the parents of leaves) in a B-tree ordered by high fence, so that the
// entry covering a key is the first one whose high fence exceeds it. Cached
// ranges never overlap: adding a page drops the entries it overlaps. An entry
// is invalidated when a leaf reached through it does not cover the key (its
// page split or gained children since the copy was taken). When the byte
// budget is exceeded, the less used of two random entries is evicted
// (upstream's two-choice LFU).
//
// mu is never held across a verb.
type cache struct {
	g      *geometry
	budget int64

	mu    sync.RWMutex
	tree  *btree.BTreeG[*centry]
	all   []*centry // every entry, for random eviction; centry.idx is its slot
	bytes int64
	rng   *rand.Rand
}

// centry is one cached level-1 page.
type centry struct {
	addr    remote.Addr
	p       page // private copy
	low     []byte
	high    []byte
	highInf bool
	freq    atomic.Uint32 // hits, for eviction
	idx     int           // position in cache.all; -1 once removed
}

// centryOverhead approximates the memory of an entry besides its page copy.
const centryOverhead = 128

func centryLess(a, b *centry) bool {
	if a.highInf || b.highInf {
		return !a.highInf && b.highInf
	}
	return bytes.Compare(a.high, b.high) < 0
}

func newCache(g *geometry, budget int64, seed uint64) *cache {
	return &cache{
		g: g, budget: budget,
		tree: btree.NewG(16, centryLess),
		rng:  rand.New(rand.NewPCG(seed, 0x5e)),
	}
}

// firstAbove returns the entry with the smallest high fence above key, if
// any. c.mu must be held.
func (c *cache) firstAbove(key []byte) *centry {
	var found *centry
	c.tree.AscendGreaterOrEqual(&centry{high: key}, func(e *centry) bool {
		if !e.highInf && bytes.Equal(e.high, key) {
			return true // high fences are exclusive
		}
		found = e
		return false
	})
	return found
}

// lookup returns the leaf that the cached level-1 page covering key routes
// it to, and the entry (nil on a miss).
func (c *cache) lookup(key []byte) (leaf remote.Addr, e *centry) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e = c.firstAbove(key)
	if e == nil || bytes.Compare(key, e.low) < 0 {
		return 0, nil
	}
	e.freq.Add(1)
	return e.p.route(key), e
}

// successors predicts the leaves that follow the leaf next along the leaf
// chain: next must be the child that the cached page covering low (next's
// low fence) routes low to; the prediction continues with that page's later
// children and those of the cached pages adjacent to it, up to n leaves and
// not at or beyond hi (nil: no bound). The entry that predicted each leaf is
// returned with it, to be invalidated if the prediction proves stale; both
// are appended to addrs and from (a scan's reused buffers).
func (c *cache) successors(addrs []remote.Addr, from []*centry, low []byte, next remote.Addr, n int, hi []byte) ([]remote.Addr, []*centry) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.firstAbove(low)
	if e == nil || bytes.Compare(low, e.low) < 0 {
		return addrs, from
	}
	i := e.p.search(low) // entry i-1 (or leftmost) covers low
	if e.p.route(low) != next {
		return addrs, from
	}
	for n += len(addrs); len(addrs) < n; {
		if i == e.p.count() { // continue in the adjacent cached page
			if e.highInf {
				break
			}
			x := c.firstAbove(e.high)
			if x == nil || !bytes.Equal(x.low, e.high) {
				break
			}
			e, i = x, 0
			if hi != nil && bytes.Compare(e.low, hi) >= 0 {
				break
			}
			addrs, from = append(addrs, e.p.leftmost()), append(from, e)
			continue
		}
		if hi != nil && bytes.Compare(e.p.innerKey(i), hi) >= 0 {
			break
		}
		addrs, from = append(addrs, e.p.innerChild(i)), append(from, e)
		i++
	}
	return addrs, from
}

// add caches a copy of the valid level-1 page p read at addr. A cached copy
// of the same page at the same or a newer version is kept instead.
func (c *cache) add(addr remote.Addr, p page) {
	n := p.g.innerHdr + p.count()*p.g.innerEntry
	cp := page{p.g, bytes.Clone(p.b[:n])}
	e := &centry{addr: addr, p: cp, low: cp.low(), high: cp.high(), highInf: cp.highInf()}
	c.mu.Lock()
	defer c.mu.Unlock()
	var overlap []*centry
	c.tree.AscendGreaterOrEqual(&centry{high: e.low}, func(x *centry) bool {
		if !x.highInf && bytes.Equal(x.high, e.low) {
			return true // touches e's range without overlapping it
		}
		if !e.highInf && bytes.Compare(x.low, e.high) >= 0 {
			return false
		}
		overlap = append(overlap, x)
		return true
	})
	for _, x := range overlap {
		if x.addr == addr && x.p.version()-cp.version() < 1<<31 {
			return // x is this page at the same or a newer version
		}
	}
	for _, x := range overlap {
		c.remove(x)
	}
	e.idx = len(c.all)
	c.all = append(c.all, e)
	c.tree.ReplaceOrInsert(e)
	c.bytes += int64(len(cp.b)) + centryOverhead
	for c.bytes > c.budget && len(c.all) > 1 {
		a, b := c.all[c.rng.IntN(len(c.all))], c.all[c.rng.IntN(len(c.all))]
		if b.freq.Load() < a.freq.Load() {
			a = b
		}
		c.remove(a)
	}
}

// remove drops e; c.mu must be held for writing.
func (c *cache) remove(e *centry) {
	if e.idx < 0 {
		return
	}
	c.tree.Delete(e)
	last := c.all[len(c.all)-1]
	c.all[e.idx] = last
	last.idx = e.idx
	c.all = c.all[:len(c.all)-1]
	e.idx = -1
	c.bytes -= int64(len(e.p.b)) + centryOverhead
}

// invalidate drops e if it is still cached.
func (c *cache) invalidate(e *centry) {
	c.mu.Lock()
	c.remove(e)
	c.mu.Unlock()
}

// clear drops every entry.
func (c *cache) clear() {
	c.mu.Lock()
	c.tree.Clear(false)
	for _, e := range c.all {
		e.idx = -1
	}
	c.all, c.bytes = nil, 0
	c.mu.Unlock()
}

// size returns the number of cached pages and their estimated bytes.
func (c *cache) size() (pages int, bytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.all), c.bytes
}
