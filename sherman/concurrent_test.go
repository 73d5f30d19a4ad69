package sherman

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// ownedWorkload is a concurrent workload in which client i of n owns the
// keys k with k % n == i: it alone writes them, so the final state is known,
// while every client reads every key. Values embed their key, so a read of
// another client's key is checked for consistency too.
type ownedWorkload struct {
	cns, clients, ops int
	space             int // keys
	opts              Options
}

// value returns the value a client writes for key k at sequence seq.
func ownedValue(k, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(ikey(k), seq)
}

func (w ownedWorkload) run(t *testing.T, p *remote.Pool, seed uint64) []*Tree {
	t.Helper()
	ctx := context.Background()
	if w.opts.ValueSize == 0 {
		w.opts.ValueSize = 16
	}
	trees := make([]*Tree, w.cns)
	for i := range trees {
		trees[i] = openTree(t, p, w.opts)
	}
	n := w.cns * w.clients
	final := make([]map[uint64][]byte, n) // per client: key → last value (nil: deleted)
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for id := range n {
		tr := trees[id%w.cns]
		r := rand.New(rand.NewPCG(seed, uint64(id)))
		final[id] = map[uint64][]byte{}
		p.Go(func() {
			mine := final[id]
			for op := range w.ops {
				k := uint64(r.IntN(w.space))
				switch x := r.IntN(10); {
				case x < 4:
					k = k - k%uint64(n) + uint64(id)
					if k >= uint64(w.space) {
						continue
					}
					v := ownedValue(k, uint64(op))
					if err := tr.Put(ctx, ikey(k), v); err != nil {
						fail(fmt.Errorf("client %d Put(%d): %w", id, k, err))
						return
					}
					mine[k] = v
				case x < 5:
					k = k - k%uint64(n) + uint64(id)
					found, err := tr.Delete(ctx, ikey(k))
					if err != nil {
						fail(fmt.Errorf("client %d Delete(%d): %w", id, k, err))
						return
					}
					if want := mine[k] != nil; found != want {
						fail(fmt.Errorf("client %d Delete(%d) = %v, want %v", id, k, found, want))
						return
					}
					mine[k] = nil
				default:
					v, ok, err := tr.Get(ctx, ikey(k))
					if err != nil {
						fail(fmt.Errorf("client %d Get(%d): %w", id, k, err))
						return
					}
					if int(k%uint64(n)) == id {
						if want := mine[k]; ok != (want != nil) || !bytes.Equal(v, want) {
							fail(fmt.Errorf("client %d Get(own %d) = %x %v, want %x", id, k, v, ok, want))
							return
						}
					} else if ok && !bytes.Equal(v[:8], ikey(k)) {
						fail(fmt.Errorf("client %d Get(%d) = %x: another key's value", id, k, v))
						return
					}
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	want := map[uint64][]byte{}
	for _, m := range final {
		for k, v := range m {
			if v != nil {
				want[k] = v
			}
		}
	}
	info := verify(t, trees[0])
	got := collect(t, trees[len(trees)-1], nil, nil, -1)
	if len(got) != len(want) || info.keys != len(want) {
		t.Fatalf("tree holds %d keys (scan %d), want %d", info.keys, len(got), len(want))
	}
	for _, kv := range got {
		if k := binary.BigEndian.Uint64(kv.Key); !bytes.Equal(kv.Value, want[k]) {
			t.Fatalf("key %d = %x, want %x", k, kv.Value, want[k])
		}
	}
	return trees
}

// TestConcurrentConfigs runs the battery's concurrent workloads
// (indextest.RunConcurrent, under -race) with Sherman's own settings:
// four-entry pages that split all the time, and no cache with no hand-over
// and a 64-word lock table, so that unrelated pages share lock words.
func TestConcurrentConfigs(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"span4", Options{Span: 4, KeySize: 16, ValueSize: 16}},
		{"nocache-nohandover", Options{Span: 4, KeySize: 16, ValueSize: 16, CacheBytes: -1, HandOver: 1, LockTableSize: 64}},
	} {
		t.Run(c.name, func(t *testing.T) { indextest.RunConcurrent(t, contractTarget("sherman-"+c.name, c.opts)) })
	}
}

// TestSmallTreeStress has many clients of several compute nodes insert into
// an empty tree at once, so that root splits race (upstream issue #26).
func TestSmallTreeStress(t *testing.T) {
	for _, span := range []int{4, 16} {
		t.Run(fmt.Sprint("span", span), func(t *testing.T) {
			p := newPool(t, remote.Config{MemoryNodes: 2})
			smallTreeStress(t, p, span, 4, 16, 60)
		})
	}
}

func smallTreeStress(t *testing.T, p *remote.Pool, span, cns, clients, per int) {
	ctx := context.Background()
	trees := make([]*Tree, cns)
	for i := range trees {
		trees[i] = openTree(t, p, Options{Span: span})
	}
	var failed atomic.Pointer[error]
	for id := range cns * clients {
		tr := trees[id%cns]
		p.Go(func() {
			for j := range per {
				k := ikey(uint64(j*cns*clients + id))
				if err := tr.Put(ctx, k, k); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	n := cns * clients * per
	info := verify(t, trees[0])
	if info.keys != n {
		t.Fatalf("%d keys after %d inserts: %+v", info.keys, n, info)
	}
	for i := range uint64(n) {
		if v, ok, err := trees[int(i)%cns].Get(ctx, ikey(i)); err != nil || !ok || !bytes.Equal(v, ikey(i)) {
			t.Fatalf("Get(%d) = %x %v %v", i, v, ok, err)
		}
	}
	t.Logf("%+v", info)
}

// TestConcurrentScan checks that a scan yields every key present for its
// whole duration exactly once and in order, while other clients insert and
// delete keys around them (splitting leaves under the scan).
func TestConcurrentScan(t *testing.T) {
	p := newPool(t, remote.Config{MemoryNodes: 2})
	scanUnderChurn(t, p, testseed.Seed(t), 3, 4, 3)
}

func scanUnderChurn(t *testing.T, p *remote.Pool, seed uint64, cns, writers, scanners int) {
	ctx := context.Background()
	opts := Options{Span: 6}
	trees := make([]*Tree, cns)
	for i := range trees {
		trees[i] = openTree(t, p, opts)
	}
	const stable = 400 // keys 0, 4, 8, ... stay present
	writes := 600
	if testing.Short() {
		writes = 150
	}
	for i := range uint64(stable) {
		if err := trees[0].Put(ctx, ikey(i*4), ikey(i*4)); err != nil {
			t.Fatal(err)
		}
	}
	var errs sync.Map
	var done atomic.Int32
	for w := range writers {
		tr := trees[w%cns]
		r := rand.New(rand.NewPCG(seed, uint64(w)))
		p.Go(func() {
			defer done.Add(1)
			for range writes {
				k := uint64(r.IntN(stable*4))&^3 | uint64(1+r.IntN(3)) // never a stable key
				var err error
				if r.IntN(3) == 0 {
					_, err = tr.Delete(ctx, ikey(k))
				} else {
					err = tr.Put(ctx, ikey(k), ikey(k))
				}
				if err != nil {
					errs.Store(w, err)
					return
				}
			}
		})
	}
	for sc := range scanners {
		tr := trees[sc%cns]
		p.Go(func() {
			for round := 0; round < 3 || done.Load() < int32(writers); round++ {
				next := uint64(0)
				var prev []byte
				for kv, err := range tr.Scan(ctx, nil, nil) {
					if err != nil {
						errs.Store(100+sc, err)
						return
					}
					if prev != nil && bytes.Compare(prev, kv.Key) >= 0 {
						errs.Store(100+sc, fmt.Errorf("scan out of order: %x after %x", kv.Key, prev))
						return
					}
					prev = kv.Key
					k := binary.BigEndian.Uint64(kv.Key)
					if k%4 != 0 {
						continue
					}
					if k != next {
						errs.Store(100+sc, fmt.Errorf("scan round %d yielded stable key %d, expected %d", round, k, next))
						return
					}
					next += 4
				}
				if next != stable*4 {
					errs.Store(100+sc, fmt.Errorf("scan round %d stopped at stable key %d", round, next))
					return
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	errs.Range(func(k, v any) bool {
		t.Errorf("client %v: %v", k, v)
		return true
	})
	verify(t, trees[0])
}
