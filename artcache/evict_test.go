package artcache

import (
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

func TestBudgetNeverExceeded(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		seed := testseed.Seed(t)
		for _, budget := range []int64{1, 200, 1 << 10, 4 << 10, 64 << 10} {
			g := newGen(seed)
			c := New(Options{Hash: hash, Bytes: budget})
			for i := range 5000 {
				if g.r.IntN(4) == 0 {
					c.Lookup(g.key())
					continue
				}
				c.Insert(g.prefix(), g.entry())
				if st := c.Stats(); st.Bytes > budget {
					t.Fatalf("budget %d, op %d: %+v", budget, i, st)
				}
				if i%250 == 0 {
					c.contents(t)
				}
			}
			st := c.Stats()
			if budget == 1 && (st.Entries != 0 || st.Bytes != 0 || st.Evictions != st.Inserts) {
				t.Fatalf("budget 1: %+v, want nothing cached", st)
			}
			t.Logf("budget %d: %+v", budget, st)
		}
	})
}

// sized returns n distinct prefixes of equal length and entries of equal
// size, and the budget that holds exactly the first fit of them.
func sized(hash bool, n, fit int) ([][]byte, []*Entry, int64) {
	var ps [][]byte
	var es []*Entry
	c := New(Options{Hash: hash})
	for i := range n {
		p := fmt.Appendf(nil, "node%05d", i)
		if i < fit {
			c.Insert(p, NewEntry(0, []uint64{word('k', 1), 0, 0, 0}, 0))
		}
		ps = append(ps, p)
		es = append(es, NewEntry(uint64(i), []uint64{word('k', 1), 0, 0, 0}, 0))
	}
	return ps, es, c.Stats().Bytes
}

// TestReferencedSurvive: a full cache receives new entries; the ones hit
// since they were cached survive, and the others go oldest first.
func TestReferencedSurvive(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		const n = 200
		ps, es, budget := sized(hash, 2*n, n)
		c := New(Options{Hash: hash, Bytes: budget})
		for i := range n {
			c.Insert(ps[i], es[i])
		}
		for i := 0; i < n; i += 2 { // hit the even ones
			if e, _, _, ok := c.Lookup(append(ps[i], 'k')); !ok || e != es[i] {
				t.Fatalf("entry %d not hit", i)
			}
		}
		for i := n; i < n+n/3; i++ { // needs fewer than n/2 evictions
			c.Insert(ps[i], es[i])
		}
		st := c.Stats()
		if st.Evictions == 0 || st.Evictions >= n/2 || st.Bytes > budget {
			t.Fatalf("evictions not in (0, %d) or over budget: %+v", n/2, st)
		}
		for i := range n {
			_, ok := c.Get(ps[i])
			if i%2 == 0 && !ok {
				t.Errorf("referenced entry %d was evicted", i)
			}
			if i%2 == 1 && !ok && i > 2*int(st.Evictions) {
				t.Errorf("unreferenced entry %d evicted out of order (%d evictions)", i, st.Evictions)
			}
		}
		t.Logf("%+v", st)
	})
}

// TestHotSetSurvivesScan: a small hot set in use survives a stream of new
// entries twenty times larger than the cache (FIFO would lose it).
func TestHotSetSurvivesScan(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		const capacity, hot = 100, 10
		ps, es, budget := sized(hash, capacity, capacity)
		c := New(Options{Hash: hash, Bytes: budget})
		for i := range hot {
			c.Insert(ps[i], es[i])
		}
		for i := range 20 * capacity {
			p := fmt.Appendf(nil, "cold%05d", i)
			c.Insert(p, NewEntry(0, []uint64{word('k', 1), 0, 0, 0}, 0))
			c.Lookup(append(ps[i%hot], 'k'))
		}
		for i := range hot {
			if e, ok := c.Get(ps[i]); !ok || e != es[i] {
				t.Errorf("hot entry %d was evicted", i)
			}
		}
		if st := c.Stats(); st.Evictions < 19*capacity {
			t.Fatalf("too few evictions: %+v", st)
		}
	})
}

func TestReplaceInheritsReference(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		c := New(Options{Hash: hash})
		old := NewEntry(0, []uint64{word('k', 1), 0, 0, 0}, 0)
		c.Insert([]byte("p"), old)
		c.Lookup([]byte("pk"))
		e := NewEntry(0, []uint64{word('k', 2), 0, 0, 0}, 0)
		c.Insert([]byte("p"), e)
		if !e.referenced() {
			t.Fatal("replacement lost the reference bit")
		}
		if old.leaf.kind != kindNone || c.clock.hand == old {
			t.Fatal("replaced entry still looks cached")
		}
	})
}
