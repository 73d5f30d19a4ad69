package sherman

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// BenchmarkBattery runs the module's benchmark battery (indextest.Bench) on
// Sherman in SMART's evaluation setup (8-byte keys and values, span 32);
// SMART's package runs the same battery, so benchstat compares the two.
func BenchmarkBattery(b *testing.B) {
	indextest.Bench(b, contractTarget("sherman", Options{KeySize: 8, ValueSize: 8}))
}

// report adds the I/O per operation since before.
func report(b *testing.B, tr *Tree, before remote.Stats, ops int) {
	io := tr.cn.Stats().Sub(before)
	n := float64(ops)
	b.ReportMetric(float64(io.RoundTrips)/n, "rtt/op")
	b.ReportMetric(float64(io.ReadBytes)/n, "read-B/op")
	b.ReportMetric(float64(io.WriteBytes)/n, "write-B/op")
}

// BenchmarkUpdateHandOver runs 8 simulated clients of one compute node
// updating one hot key, so that most updates receive the lock by local
// hand-over: 2 round trips instead of 3. It also reports each client's
// virtual time per update.
func BenchmarkUpdateHandOver(b *testing.B) {
	p := newPool(b, remote.Config{MemoryNodes: 2, Sim: &remote.SimConfig{}})
	tr := openTree(b, p, Options{KeySize: 8, ValueSize: 8})
	ctx := context.Background()
	for i := range uint64(1000) { // two levels, so that the leaf's parent is cached
		if err := tr.Put(ctx, ikey(i), ikey(i)); err != nil {
			b.Fatal(err)
		}
	}
	k := ikey(42)
	if _, _, err := tr.Get(ctx, k); err != nil {
		b.Fatal(err)
	}
	const clients = 8
	before, t0 := tr.cn.Stats(), p.Now()
	for range clients {
		p.Go(func() {
			for range b.N {
				if err := tr.Put(ctx, k, k); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		b.Fatal(err)
	}
	report(b, tr, before, clients*b.N)
	b.ReportMetric(float64(p.Now()-t0)/float64(b.N)/1e3, "virtual-µs/op")
}

// BenchmarkRedo measures the cost of the redo record (Options.NoRedo) on
// an update-only and a 50/50 read/update workload: 4 compute nodes of 16
// simulated clients over 20,000 8-byte keys with 8-byte values, uniform.
// It reports verbs, round trips and bytes written per operation and the
// throughput in virtual time (Mops).
//
//	go test ./sherman -run '^$' -bench Redo -benchtime 20000x
func BenchmarkRedo(b *testing.B) {
	for _, w := range []struct {
		name    string
		updates int // percent
	}{{"update", 100}, {"ycsb-a", 50}} {
		for _, noRedo := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/NoRedo=%v", w.name, noRedo), func(b *testing.B) {
				benchRedo(b, w.updates, noRedo)
			})
		}
	}
}

func benchRedo(b *testing.B, updates int, noRedo bool) {
	const cns, clients, keys = 4, 16, 20000
	p := newPool(b, remote.Config{MemoryNodes: 2, Sim: &remote.SimConfig{Seed: 1}})
	opts := Options{KeySize: 8, ValueSize: 8, NoRedo: noRedo}
	trees := make([]*Tree, cns)
	for i := range trees {
		trees[i] = openTree(b, p, opts)
	}
	ctx := context.Background()
	for i := range uint64(keys) {
		if err := trees[0].Put(ctx, ikey(i), ikey(i)); err != nil {
			b.Fatal(err)
		}
	}
	per := max(b.N/(cns*clients), 1)
	for id := range cns * clients { // warm every client: cache, redo slots
		tr := trees[id%cns]
		p.Go(func() {
			if _, _, err := tr.Get(ctx, ikey(uint64(id))); err != nil {
				b.Error(err)
			}
		})
	}
	if err := p.Wait(); err != nil {
		b.Fatal(err)
	}
	before, t0 := p.Stats(), p.Now()
	b.ResetTimer()
	for id := range cns * clients {
		tr := trees[id%cns]
		r := rand.New(rand.NewPCG(1, uint64(id)))
		p.Go(func() {
			for range per {
				k := ikey(uint64(r.IntN(keys)))
				var err error
				if r.IntN(100) < updates {
					err = tr.Put(ctx, k, k)
				} else {
					_, _, err = tr.Get(ctx, k)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	io, n := p.Stats().Sub(before), float64(per*cns*clients)
	b.ReportMetric(float64(io.Verbs())/n, "verbs/op")
	b.ReportMetric(float64(io.RoundTrips)/n, "rtt/op")
	b.ReportMetric(float64(io.WriteBytes)/n, "write-B/op")
	b.ReportMetric(float64(io.ReadBytes)/n, "read-B/op")
	b.ReportMetric(n/(p.Now()-t0).Seconds()/1e6, "Mops")
}
