package smart

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestReadYourWritesThroughCaches has goroutines on three compute nodes
// insert keys with long shared prefixes (splits of leaves and headers all
// the time) and read each one back at once through their caches: a
// completed Put must never be hidden by a stale cached path, even while other
// splits it built on are still completing.
func TestReadYourWritesThroughCaches(t *testing.T) {
	for name, opts := range map[string]Options{"default": {}, "norw": {NoReadDelegation: true, NoWriteCombining: true}, "rcu": {OutOfPlaceLeaves: true}, "locked": {LockedInternal: true}} {
		fails := 0
		rounds := 30
		if testing.Short() {
			rounds = 5
		}
		for round := range rounds {
			p, _ := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20})
			var trees []*Tree
			for range 3 {
				tr, _ := Open(p.NewComputeNode(), opts)
				trees = append(trees, tr)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			for g := range 24 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), uint64(round)))
					tr := trees[g%3]
					ctx := context.Background()
					for i := range 60 {
						base := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
						k := append([]byte(nil), base[:r.IntN(len(base))]...)
						k = append(k, byte(r.IntN(3)), byte(g), byte(i))
						v := []byte(fmt.Sprint(g, i))
						if err := tr.Put(ctx, k, v); err != nil {
							t.Error(err)
							return
						}
						got, ok, err := tr.Get(ctx, k)
						if err != nil || !ok || string(got) != string(v) {
							mu.Lock()
							fails++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if err := trees[0].Verify(context.Background()); err != nil {
				t.Fatal(name, err)
			}
		}
		if fails > 0 {
			t.Errorf("%s: %d fails", name, fails)
		}
	}
}
