package artcache

import (
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

type staleEntry struct {
	prefix []byte
	e      *Entry
}

// TestOracle runs random operations on an unbounded cache and checks each
// result against a map of the entries that must be cached.
func TestOracle(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		seed := testseed.Seed(t)
		g := newGen(seed)
		c := New(Options{Hash: hash, Bytes: 1 << 40})
		oracle := make(map[string]*Entry)
		var stale []staleEntry
		ops := 30000
		if testing.Short() {
			ops = 5000
		}
		for i := range ops {
			switch r := g.r.IntN(100); {
			case r < 35:
				p, e := g.prefix(), g.entry()
				if old := oracle[string(p)]; old != nil {
					stale = append(stale, staleEntry{p, old})
				}
				c.Insert(p, e)
				oracle[string(p)] = e
			case r < 45:
				p := g.prefix()
				if e := oracle[string(p)]; e != nil {
					c.Invalidate(p, e)
					delete(oracle, string(p))
					stale = append(stale, staleEntry{p, e})
				}
			case r < 50 && len(stale) > 0:
				s := stale[g.r.IntN(len(stale))]
				c.Invalidate(s.prefix, s.e)
			case r < 85:
				key := g.key()
				e, idx, plen, ok := c.Lookup(key)
				we, widx, wplen, wok := bruteLookup(oracle, key)
				if !sameResult(e, idx, plen, ok, we, widx, wplen, wok) {
					t.Fatalf("op %d: Lookup(%q) = (%v, %d, %d, %v), want (%v, %d, %d, %v)",
						i, key, e, idx, plen, ok, we, widx, wplen, wok)
				}
				if e, plen, _ := c.Deepest(key); e != nil && e != oracle[string(key[:plen])] || e != bruteDeepest(oracle, key) {
					t.Fatalf("op %d: Deepest(%q) = (%v, %d), want %v", i, key, e, plen, bruteDeepest(oracle, key))
				}
			default:
				p := g.prefix()
				if e, _ := c.Get(p); e != oracle[string(p)] {
					t.Fatalf("op %d: Get(%q) = %v, want %v", i, p, e, oracle[string(p)])
				}
			}
			if st := c.Stats(); st.Entries != len(oracle) || st.Evictions != 0 {
				t.Fatalf("op %d: %+v, oracle has %d entries", i, st, len(oracle))
			}
			if i%1000 == 0 || i == ops-1 {
				checkSame(t, c.contents(t), oracle)
			}
		}
		t.Logf("%d entries, %d bytes; %s", len(oracle), c.Stats().Bytes, kindCounts(c))
	})
}

// TestOracleEvicting runs random operations on a cache under a small budget:
// what it holds must be a subset of what was inserted and not invalidated,
// and every Lookup must match a brute-force search over what it holds.
func TestOracleEvicting(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		seed := testseed.Seed(t)
		g := newGen(seed)
		c := New(Options{Hash: hash, Bytes: 64 << 10})
		live := make(map[string]*Entry)
		ops := 10000
		if testing.Short() {
			ops = 2000
		}
		for i := range ops {
			switch r := g.r.IntN(100); {
			case r < 40:
				p, e := g.prefix(), g.entry()
				c.Insert(p, e)
				live[string(p)] = e
			case r < 50:
				p := g.prefix()
				if e := live[string(p)]; e != nil {
					c.Invalidate(p, e)
					delete(live, string(p))
				}
			default:
				have := c.contents(t)
				key := g.key()
				e, idx, plen, ok := c.Lookup(key)
				we, widx, wplen, wok := bruteLookup(have, key)
				if !sameResult(e, idx, plen, ok, we, widx, wplen, wok) {
					t.Fatalf("op %d: Lookup(%q) = (%v, %d, %d, %v), want (%v, %d, %d, %v)",
						i, key, e, idx, plen, ok, we, widx, wplen, wok)
				}
				if e, plen, _ := c.Deepest(key); e != nil && e != have[string(key[:plen])] || e != bruteDeepest(have, key) {
					t.Fatalf("op %d: Deepest(%q) = (%v, %d), want %v", i, key, e, plen, bruteDeepest(have, key))
				}
			}
			for p, e := range c.contents(t) {
				if live[p] != e {
					t.Fatalf("op %d: cache holds %q, which is not live", i, p)
				}
			}
		}
		st := c.Stats()
		if st.Evictions == 0 {
			t.Fatalf("no evictions: %+v", st)
		}
		t.Logf("%+v", st)
	})
}

// TestDeterministic replays one random run twice: the same entries must
// survive, in the same CLOCK order, with the same counters.
func TestDeterministic(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		seed := testseed.Seed(t)
		run := func() ([]uint64, Stats) {
			g := newGen(seed)
			c := New(Options{Hash: hash, Bytes: 32 << 10})
			for range 5000 {
				if g.r.IntN(3) == 0 {
					c.Lookup(g.key())
				} else {
					c.Insert(g.prefix(), g.entry())
				}
			}
			var order []uint64
			for e := c.clock.hand; e != nil; e = c.next(e) {
				order = append(order, e.Addr, uint64(len(e.leaf.prefix)), uint64(e.meta.Load()))
				if c.next(e) == c.clock.hand {
					break
				}
			}
			return order, c.Stats()
		}
		o1, s1 := run()
		o2, s2 := run()
		if s1 != s2 || len(o1) != len(o2) {
			t.Fatalf("runs differ: %+v vs %+v", s1, s2)
		}
		for i := range o1 {
			if o1[i] != o2[i] {
				t.Fatalf("CLOCK rings differ at %d", i)
			}
		}
	})
}

// TestGrowShrink fills one position with 256 children and empties it again,
// checking the node kind at each step.
func TestGrowShrink(t *testing.T) {
	c := New(Options{})
	parent := NewEntry(0, make([]uint64, 256), 0)
	c.Insert([]byte("p"), parent)
	kindAt := func() kind { return parent.leaf.parent.kind }
	entries := make([]*Entry, 256)
	for b := range 256 {
		entries[b] = NewEntry(uint64(b), []uint64{word('x', 1), 0, 0, 0}, 0)
		c.Insert([]byte{'p', byte(b), 'q'}, entries[b])
		want := kind256
		switch n := b + 1; {
		case n <= 4:
			want = kind4
		case n <= 8:
			want = kind8
		case n <= 16:
			want = kind16
		case n <= 48:
			want = kind48
		}
		if got := kindAt(); got != want {
			t.Fatalf("%d children: kind %d, want %d", b+1, got, want)
		}
		c.contents(t)
	}
	for b := range 256 {
		c.Invalidate([]byte{'p', byte(b), 'q'}, entries[b])
		c.contents(t)
		n := 255 - b
		if n == 0 {
			if parent.leaf.kind != kindLeaf {
				t.Fatalf("no children: parent entry is not a leaf")
			}
			break
		}
		want := kind256
		switch {
		case n <= shrinkAt[kind8]:
			want = kind4
		case n <= shrinkAt[kind16]:
			want = kind8
		case n <= shrinkAt[kind48]:
			want = kind16
		case n <= shrinkAt[kind256]:
			want = kind48
		}
		if got := kindAt(); got != want {
			t.Fatalf("%d children: kind %d, want %d", n, got, want)
		}
	}
	if st := c.Stats(); st.Entries != 1 || st.Bytes != parent.bytes()+1 {
		t.Fatalf("%+v, want the parent alone (%d bytes)", st, parent.bytes()+1)
	}
}

func checkSame(t *testing.T, have, want map[string]*Entry) {
	t.Helper()
	if len(have) != len(want) {
		t.Fatalf("cache holds %d entries, want %d", len(have), len(want))
	}
	for p, e := range want {
		if have[p] != e {
			t.Fatalf("cache holds %v under %q, want %v", have[p], p, e)
		}
	}
}

// kindCounts describes how many inner nodes of each kind c's ART has.
func kindCounts(c *Cache) string {
	if c.art == nil {
		return "hash index"
	}
	var n [kind256 + 1]int
	var walk func(*node)
	walk = func(x *node) {
		n[x.kind]++
		for _, ch := range x.children() {
			walk(ch)
		}
	}
	if c.art.root != nil {
		walk(c.art.root)
	}
	return fmt.Sprintf("leaves %d, node4 %d, node8 %d, node16 %d, node48 %d, node256 %d",
		n[kindLeaf], n[kind4], n[kind8], n[kind16], n[kind48], n[kind256])
}
