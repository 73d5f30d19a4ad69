package rdwc

import (
	"fmt"
	"testing"
)

// BenchmarkHotKey runs the clients of one compute node on one key, reading
// or writing, with and without RDWC. It reports verbs/op (remote verbs issued
// per operation), shared/op (operations served by another client's verb)
// and, in the simulator, vops/s (operations per virtual second). With 16
// clients the simulated run is bound by latency; with 128 the NICs' IOPS
// limit binds without RDWC.
func BenchmarkHotKey(b *testing.B) {
	for _, sim := range []bool{false, true} {
		for _, op := range []string{"read", "write"} {
			for _, clients := range []int{16, 128} {
				for _, on := range []bool{true, false} {
					name := fmt.Sprintf("sim=%v/op=%s/clients=%d/rdwc=%v", sim, op, clients, on)
					opts := Options{DisableReads: !on, DisableWrites: !on}
					b.Run(name, func(b *testing.B) { benchHotKey(b, sim, op == "write", opts, clients) })
				}
			}
		}
	}
}

func benchHotKey(b *testing.B, sim, write bool, opts Options, clients int) {
	pool := newPool(b, sim)
	st := newStore(b, pool, 1)
	tab := New(opts)
	cn := pool.NewComputeNode()
	fs := make([]*fakeClient, clients)
	for j := range fs {
		fs[j] = newFakeClient(st, cn.NewClient())
	}
	errs := make([]error, clients)
	b.ResetTimer()
	start := pool.Now()
	for j, f := range fs {
		n := b.N / clients
		if j < b.N%clients {
			n++
		}
		pool.Go(func() {
			v := val(uint64(j + 1))
			for range n {
				if write {
					errs[j] = f.Put(tab, 0, v)
				} else {
					_, _, errs[j] = f.Get(tab, 0)
				}
				if errs[j] != nil {
					return
				}
			}
		})
	}
	if err := pool.Wait(); err != nil {
		b.Fatal(err)
	}
	elapsed := pool.Now() - start
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cn.Stats().Verbs())/float64(b.N), "verbs/op")
	b.ReportMetric(float64(tab.Stats().Shared())/float64(b.N), "shared/op")
	if pool.Report().Transport == "sim" {
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "vops/s")
	}
}

// BenchmarkUncontended measures the table's own cost: one client alternating
// reads and writes of one key, so that nothing can be shared.
func BenchmarkUncontended(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("rdwc=%v", on), func(b *testing.B) {
			fx := newFixture(b, Options{DisableReads: !on, DisableWrites: !on}, 1)
			f, v := fx.fs[0], val(1)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var err error
				if i&1 == 0 {
					_, _, err = f.Get(fx.t, 0)
				} else {
					err = f.Put(fx.t, 0, v)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
