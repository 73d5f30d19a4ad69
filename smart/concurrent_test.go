package smart

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestConcurrentDisjoint has goroutines on several compute nodes insert,
// update and delete disjoint keys that share long prefixes (so their splits
// race on shared nodes) and checks every key afterwards.
func TestConcurrentDisjoint(t *testing.T) {
	for _, sim := range []*remote.SimConfig{nil, {Ordering: remote.Strict, Seed: 7}} {
		t.Run(fmt.Sprintf("sim=%v", sim != nil), func(t *testing.T) {
			p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20, Sim: sim})
			if err != nil {
				t.Fatal(err)
			}
			const cns, per, keys = 3, 8, 300
			trees := make([]*Tree, cns)
			for i := range trees {
				if trees[i], err = Open(p.NewComputeNode(), Options{}); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			want := make([]map[string]string, cns*per)
			var mu sync.Mutex
			var firstErr error
			for g := range cns * per {
				want[g] = map[string]string{}
				p.Go(func() {
					tr := trees[g%cns]
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for i := range keys {
						k := make([]byte, 12)
						copy(k, "sharedprefix")
						k = binary.BigEndian.AppendUint32(k[:10], uint32(r.IntN(keys)*cns*per+g))
						v := []byte(fmt.Sprintf("%d-%d-%s", g, i, make([]byte, r.IntN(3)*200)))
						var err error
						if r.IntN(5) == 0 {
							_, err = tr.Delete(ctx, k)
							delete(want[g], string(k))
						} else {
							err = tr.Put(ctx, k, v)
							want[g][string(k)] = string(v)
						}
						if err != nil {
							mu.Lock()
							firstErr = err
							mu.Unlock()
							return
						}
					}
				})
			}
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			if firstErr != nil {
				t.Fatal(firstErr)
			}
			total := 0
			for g := range want {
				for k, v := range want[g] {
					got, ok, err := trees[0].Get(ctx, []byte(k))
					if err != nil || !ok || string(got) != v {
						t.Fatalf("get %x = %q,%v,%v want %q", k, got, ok, err, v)
					}
					total++
				}
			}
			n := 0
			for _, err := range trees[1].Scan(ctx, nil, nil) {
				if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != total {
				t.Fatalf("scan found %d keys, want %d", n, total)
			}
			if err := trees[2].Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConcurrentSameKeys hammers a few hot keys from many goroutines: every
// final value must be one that was written.
func TestConcurrentSameKeys(t *testing.T) {
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		tr, err := Open(p.NewComputeNode(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for i := range 500 {
				k := []byte{byte(r.IntN(4))}
				var err error
				switch r.IntN(4) {
				case 0:
					_, err = tr.Delete(ctx, k)
				case 1:
					_, _, err = tr.Get(ctx, k)
				default:
					err = tr.Put(ctx, k, make([]byte, r.IntN(2)*300+i%7))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tr, _ := Open(p.NewComputeNode(), Options{})
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
