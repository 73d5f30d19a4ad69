package artcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// contents verifies every invariant of c (index structure, byte accounting,
// CLOCK ring, budget) and returns its entries by prefix.
func (c *Cache) contents(tb testing.TB) map[string]*Entry {
	tb.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := make(map[string]*Entry)
	var idxBytes int64
	if c.hash != nil {
		idxBytes = checkHash(tb, c.hash, m)
	} else {
		idxBytes = checkART(tb, c.art, m)
	}
	if got := c.indexSize(); got != idxBytes {
		tb.Fatalf("index accounts %d bytes, holds %d", got, idxBytes)
	}
	var entryBytes int64
	for _, e := range m {
		entryBytes += e.bytes()
	}
	if entryBytes != c.entryBytes || len(m) != c.entries {
		tb.Fatalf("cache accounts %d entries of %d bytes, holds %d of %d", c.entries, c.entryBytes, len(m), entryBytes)
	}
	if c.size() > c.budget {
		tb.Fatalf("cache holds %d bytes, budget %d", c.size(), c.budget)
	}
	// The hand's sweep visits every entry once per revolution, in prefix
	// order for the ART.
	ring := make(map[*Entry]bool)
	if (c.clock.hand == nil) != (len(m) == 0) {
		tb.Fatalf("CLOCK hand %v with %d entries", c.clock.hand, len(m))
	}
	var prev []byte
	for e := c.clock.hand; e != nil; {
		if ring[e] {
			tb.Fatalf("CLOCK order visits %#x twice", e.Addr)
		}
		ring[e] = true
		e = c.next(e)
		if c.hash == nil && e != c.clock.hand {
			p := prefixOf(tb, m, e)
			if prev != nil && string(p) <= string(prev) && e != firstEntry(c.art.root) {
				tb.Fatalf("CLOCK order: %q after %q", p, prev)
			}
			prev = p
		}
		if e == c.clock.hand {
			break
		}
	}
	for p, e := range m {
		if !ring[e] {
			tb.Fatalf("entry %q not in the CLOCK order", p)
		}
	}
	if len(ring) != len(m) {
		tb.Fatalf("CLOCK order has %d entries, index %d", len(ring), len(m))
	}
	return m
}

// prefixOf returns the prefix under which m holds e.
func prefixOf(tb testing.TB, m map[string]*Entry, e *Entry) []byte {
	tb.Helper()
	for p, x := range m {
		if x == e {
			return []byte(p)
		}
	}
	tb.Fatalf("entry %#x not in the index", e.Addr)
	return nil
}

// checkART verifies the tree, records its entries in m and returns the
// bytes it should account.
func checkART(tb testing.TB, t *artTree, m map[string]*Entry) int64 {
	tb.Helper()
	var total int64
	var walk func(n, parent *node, key []byte)
	walk = func(n, parent *node, key []byte) {
		key = append(key, n.prefix...)
		total += int64(len(n.prefix))
		if n.parent != parent || int(n.depth) != len(key) {
			tb.Fatalf("node %q: bad parent or depth %d", key, n.depth)
		}
		if n.kind == kindLeaf {
			if n.n != 0 {
				tb.Fatalf("leaf %q has %d children", key, n.n)
			}
			m[string(key)] = n.asEntry()
			return
		}
		if n.kind < kind4 || n.kind > kind256 {
			tb.Fatalf("node %q has kind %d", key, n.kind)
		}
		total += nodeBytes[n.kind]
		e := n.asInner().entry
		if e != nil {
			if e.leaf.kind != kindHeld || e.leaf.parent != n {
				tb.Fatalf("entry at %q is not held by its node", key)
			}
			m[string(key)] = e
		}
		lo := [...]int{kind4: 1, kind8: shrinkAt[kind8] + 1, kind16: shrinkAt[kind16] + 1, kind48: shrinkAt[kind48] + 1, kind256: shrinkAt[kind256] + 1}[n.kind]
		if int(n.n) < lo || int(n.n) > capacity[n.kind] || (e == nil && n.n < 2) {
			tb.Fatalf("node %q of kind %d has %d children (entry %v)", key, n.kind, n.n, e != nil)
		}
		var bs []byte
		for b, c := range n.children() {
			if c == nil || c.edge != b || n.child(b) != c || *n.childRef(b) != c {
				tb.Fatalf("node %q: child %#x misplaced", key, b)
			}
			bs = append(bs, b)
			walk(c, n, append(key, b))
		}
		if len(bs) != int(n.n) || !slices.IsSorted(bs) || len(slices.Compact(bs)) != len(bs) {
			tb.Fatalf("node %q: children %x, count %d", key, bs, n.n)
		}
		switch n.kind {
		case kind4, kind8, kind16:
			keys, child := n.sorted()
			checkUnused(tb, key, keys[n.n:], child[n.n:])
		case kind48:
			used := 0
			for _, c := range n.as48().child {
				if c != nil {
					used++
				}
			}
			if used != int(n.n) {
				tb.Fatalf("node48 %q: %d children for count %d", key, used, n.n)
			}
		}
	}
	if t.root != nil {
		walk(t.root, nil, nil)
	}
	return total
}

func checkUnused(tb testing.TB, key, keys []byte, child []*node) {
	for i := range keys {
		if keys[i] != 0 || child[i] != nil {
			tb.Fatalf("node %q: unused position not cleared", key)
		}
	}
}

func checkHash(tb testing.TB, h *hashIndex, m map[string]*Entry) int64 {
	tb.Helper()
	var total int64
	lens := make([]int32, len(h.lens))
	for k, s := range h.m {
		e := s.e
		if e.leaf.kind != kindHashed || e.leaf.prefix != k {
			tb.Fatalf("entry %q does not know its key", k)
		}
		if s.next.prev != s || s.prev.next != s {
			tb.Fatalf("entry %q: ring broken", k)
		}
		if len(k) >= len(lens) {
			tb.Fatalf("entry %q is longer than the length table", k)
		}
		lens[len(k)]++
		m[k] = e
		total += hashSlotBytes + int64(len(k))
	}
	if !slices.Equal(lens, h.lens) || (len(lens) > 0 && lens[len(lens)-1] == 0) {
		tb.Fatalf("length table %v, want %v", h.lens, lens)
	}
	return total
}

// bruteLookup is Lookup by definition, over a map of entries by prefix.
func bruteLookup(m map[string]*Entry, key []byte) (*Entry, int, int, bool) {
	for plen := len(key) - 1; plen >= 0; plen-- {
		if e := m[string(key[:plen])]; e != nil {
			for i, w := range e.Slots() {
				if w != 0 && w&0xff == uint64(key[plen]) {
					return e, i, plen, true
				}
			}
		}
	}
	return nil, 0, 0, false
}

// bruteDeepest is Cache.Deepest by brute force over the entries of m.
func bruteDeepest(m map[string]*Entry, key []byte) *Entry {
	for plen := len(key) - 1; plen >= 0; plen-- {
		if e := m[string(key[:plen])]; e != nil {
			return e
		}
	}
	return nil
}

// kinds runs f for both index kinds.
func kinds(t *testing.T, f func(t *testing.T, hash bool)) {
	for _, hash := range []bool{false, true} {
		t.Run(map[bool]string{false: "art", true: "hash"}[hash], func(t *testing.T) { f(t, hash) })
	}
}

// gen makes random prefixes and entries over a small alphabet, so that
// prefixes share paths, end inside one another's compressed paths and fill
// inner nodes of every kind.
type gen struct {
	r     *rand.Rand
	next  uint64
	bases [][]byte
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x61727463))}
	for range 4 {
		g.bases = append(g.bases, g.bytes(g.r.IntN(40)))
	}
	g.bases = append(g.bases, g.bytes(511), nil)
	return g
}

func (g *gen) byte() byte {
	if g.r.IntN(4) == 0 {
		return byte(g.r.IntN(256))
	}
	return []byte{0, 1, 'a', 0xff}[g.r.IntN(4)]
}

func (g *gen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = g.byte()
	}
	return b
}

// prefix returns a random prefix of at most 511 bytes.
func (g *gen) prefix() []byte {
	base := g.bases[g.r.IntN(len(g.bases))]
	p := slices.Clone(base[:g.r.IntN(len(base)+1)])
	p = append(p, g.bytes(g.r.IntN(5))...)
	return p[:min(len(p), 511)]
}

// entry returns a new entry with a distinct address and random slots.
func (g *gen) entry() *Entry {
	g.next++
	slots := make([]uint64, []int{4, 4, 4, 8, 16, 48, 256}[g.r.IntN(7)])
	for i := range slots {
		if g.r.IntN(3) > 0 {
			slots[i] = uint64(g.byte()) | g.r.Uint64N(1<<20)<<8
		}
	}
	return NewEntry(g.next<<6, slots, 0)
}

// key returns a lookup key: a cached-like prefix plus a few bytes.
func (g *gen) key() []byte { return append(g.prefix(), g.bytes(g.r.IntN(3))...) }

func sameResult(e1 *Entry, i1, p1 int, ok1 bool, e2 *Entry, i2, p2 int, ok2 bool) bool {
	return ok1 == ok2 && (!ok1 || e1 == e2 && i1 == i2 && p1 == p2)
}
