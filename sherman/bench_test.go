package sherman

import (
	"context"
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
