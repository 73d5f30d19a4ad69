package artcache

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestConcurrent runs Lookup, Get, Insert and Invalidate from several
// goroutines on overlapping prefixes (run it with -race).
func TestConcurrent(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		seed := testseed.Seed(t)
		for _, budget := range []int64{16 << 10, 1 << 30} {
			c := New(Options{Hash: hash, Bytes: budget})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					g := newGen(seed) // the same prefixes in every goroutine,
					g.r = rand.New(rand.NewPCG(seed, uint64(w)))
					g.next = uint64(w) << 32 // but distinct entries
					for range 3000 {
						switch g.r.IntN(10) {
						case 0, 1, 2:
							c.Insert(g.prefix(), g.entry())
							if st := c.Stats(); st.Bytes > budget {
								t.Errorf("over budget: %+v", st)
								return
							}
						case 3:
							p := g.prefix()
							if e, ok := c.Get(p); ok {
								c.Invalidate(p, e)
							}
						default:
							key := g.key()
							e, idx, plen, ok := c.Lookup(key)
							if ok && (plen >= len(key) || e.Slots()[idx] == 0 || byte(e.Slots()[idx]) != key[plen]) {
								t.Errorf("Lookup(%q) = slot %d (%#x) at prefix length %d", key, idx, e.Slots()[idx], plen)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			c.contents(t)
			t.Logf("budget %d: %+v", budget, c.Stats())
		}
	})
}
