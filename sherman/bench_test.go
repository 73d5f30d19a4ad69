package sherman

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// Benchmarks of single operations on one client, in local mode. Besides
// time they report the remote I/O per operation: rtt/op (round trips),
// read-B/op and write-B/op, which do not depend on the transport. The tree
// holds benchKeys random 8-byte keys (height 4 with span 32) and the index
// cache is warm, as in a steady state.

const benchKeys = 200_000

var benchGeometries = []struct {
	name string
	opts Options
}{
	{"span32", Options{}},                // SMART's evaluation
	{"page1k", Options{PageBytes: 1024}}, // upstream's 1 KiB pages
}

// benchTree returns a tree loaded with the keys ikey(keys[i]) and a warm
// cache.
func benchTree(b *testing.B, opts Options, keys []uint64) *Tree {
	b.Helper()
	p := newPool(b, remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30, ChunkBytes: 1 << 20})
	tr := openTree(b, p, opts)
	ctx := context.Background()
	for _, k := range keys {
		if err := tr.Put(ctx, ikey(k), ikey(k)); err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range keys {
		if _, _, err := tr.Get(ctx, ikey(k)); err != nil {
			b.Fatal(err)
		}
	}
	return tr
}

func benchKeySet(n int) []uint64 {
	r := rand.New(rand.NewPCG(1, 1))
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = r.Uint64() >> 1 // even high bit clear: inserts use set ones
	}
	return keys
}

// report adds the I/O per operation since before.
func report(b *testing.B, tr *Tree, before remote.Stats, ops int) {
	io := tr.cn.Stats().Sub(before)
	n := float64(ops)
	b.ReportMetric(float64(io.RoundTrips)/n, "rtt/op")
	b.ReportMetric(float64(io.ReadBytes)/n, "read-B/op")
	b.ReportMetric(float64(io.WriteBytes)/n, "write-B/op")
}

func BenchmarkGet(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(g.name, func(b *testing.B) {
			keys := benchKeySet(benchKeys)
			tr := benchTree(b, g.opts, keys)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(2, 2))
			before := tr.cn.Stats()
			n := 0
			for b.Loop() {
				if _, ok, err := tr.Get(ctx, ikey(keys[r.IntN(len(keys))])); err != nil || !ok {
					b.Fatal(ok, err)
				}
				n++
			}
			report(b, tr, before, n)
		})
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(g.name, func(b *testing.B) {
			keys := benchKeySet(benchKeys)
			tr := benchTree(b, g.opts, keys)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(2, 2))
			before := tr.cn.Stats()
			n := 0
			for b.Loop() {
				k := ikey(keys[r.IntN(len(keys))])
				if err := tr.Put(ctx, k, k); err != nil {
					b.Fatal(err)
				}
				n++
			}
			report(b, tr, before, n)
		})
	}
}

// BenchmarkInsert inserts new random keys; splits are amortized into the
// per-operation figures.
func BenchmarkInsert(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(g.name, func(b *testing.B) {
			tr := benchTree(b, g.opts, benchKeySet(benchKeys))
			ctx := context.Background()
			r := rand.New(rand.NewPCG(3, 3))
			before := tr.cn.Stats()
			n := 0
			for b.Loop() {
				k := ikey(r.Uint64() | 1<<63)
				if err := tr.Put(ctx, k, k); err != nil {
					b.Fatal(err)
				}
				n++
			}
			report(b, tr, before, n)
		})
	}
}

// BenchmarkDelete deletes present keys; every benchKeys deletions the
// deleted keys are put back outside the measurement.
func BenchmarkDelete(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(g.name, func(b *testing.B) {
			keys := benchKeySet(benchKeys)
			tr := benchTree(b, g.opts, keys)
			ctx := context.Background()
			io := remote.Stats{}
			n := 0
			before := tr.cn.Stats()
			for b.Loop() {
				if n > 0 && n%len(keys) == 0 {
					b.StopTimer()
					io = io.Add(tr.cn.Stats().Sub(before))
					for _, k := range keys {
						if err := tr.Put(ctx, ikey(k), nil); err != nil {
							b.Fatal(err)
						}
					}
					before = tr.cn.Stats()
					b.StartTimer()
				}
				if found, err := tr.Delete(ctx, ikey(keys[n%len(keys)])); err != nil || !found {
					b.Fatal(found, err)
				}
				n++
			}
			io = io.Add(tr.cn.Stats().Sub(before))
			b.ReportMetric(float64(io.RoundTrips)/float64(n), "rtt/op")
			b.ReportMetric(float64(io.ReadBytes)/float64(n), "read-B/op")
			b.ReportMetric(float64(io.WriteBytes)/float64(n), "write-B/op")
		})
	}
}

// BenchmarkScan100 reads the first 100 pairs at or after a random key.
func BenchmarkScan100(b *testing.B) {
	for _, g := range benchGeometries {
		b.Run(g.name, func(b *testing.B) {
			keys := benchKeySet(benchKeys)
			tr := benchTree(b, g.opts, keys)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(4, 4))
			before := tr.cn.Stats()
			n := 0
			for b.Loop() {
				got := 0
				for _, err := range tr.Scan(ctx, ikey(r.Uint64()>>1), nil) {
					if err != nil {
						b.Fatal(err)
					}
					if got++; got == 100 {
						break
					}
				}
				n++
			}
			report(b, tr, before, n)
		})
	}
}

// BenchmarkUpdateHandOver runs 8 simulated clients of one compute node
// updating one hot key, so that most updates receive the lock by local
// hand-over: 2 round trips instead of 3. It also reports each client's
// virtual time per update.
func BenchmarkUpdateHandOver(b *testing.B) {
	p := newPool(b, remote.Config{MemoryNodes: 2, Sim: &remote.SimConfig{}})
	tr := openTree(b, p, Options{})
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
