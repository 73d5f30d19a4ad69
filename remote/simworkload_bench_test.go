package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/cputime"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// BenchmarkSimWorkload measures the simulator on a real workload: each
// iteration is the whole run of `dmbench run --workload a --records 200000
// --ops 1000000 --cns 8 --clients 32` (load and run phases) in InOrder mode,
// and the metric is every simulated verb of both phases per wall-clock second
// (and per second of the process's CPU time). Run it with -benchtime=1x and
// GOMAXPROCS=1 for the one-core figure of docs/simulator.md; -short runs a
// tenth of the records and operations.
func BenchmarkSimWorkload(b *testing.B) {
	records, ops := int64(200_000), int64(1_000_000)
	if testing.Short() {
		records, ops = records/10, ops/10
	}
	for _, index := range []string{"smart", "sherman"} {
		b.Run(index, func(b *testing.B) {
			var verbs uint64
			start, cpu := time.Now(), cputime.Process()
			for range b.N {
				verbs += runWorkload(b, index, records, ops)
			}
			b.ReportMetric(float64(verbs)/time.Since(start).Seconds(), "verbs/s")
			if used := cputime.Process() - cpu; used > 0 {
				b.ReportMetric(float64(verbs)/used.Seconds(), "verbs/cpu-s")
			}
		})
	}
}

// runWorkload runs YCSB-A against index as dmbench's defaults would and
// returns the number of verbs simulated.
func runWorkload(b *testing.B, index string, records, ops int64) uint64 {
	var pool *remote.Pool
	open := func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
		pool = cn.Pool()
		if index == "sherman" {
			return sherman.Open(cn, sherman.Options{Name: cfg.Name, KeySize: cfg.KeySize, ValueSize: cfg.ValueSize, CacheBytes: cfg.CacheBytes})
		}
		return smart.Open(cn, smart.Options{Name: cfg.Name, CacheBytes: cfg.CacheBytes})
	}
	w, err := ycsb.Preset("a")
	if err != nil {
		b.Fatal(err)
	}
	res, err := ycsb.Run(context.Background(), ycsb.Config{
		Index: index, Open: open, CacheBytes: 64 << 20, Workload: w, Records: records, Ops: ops,
		MemoryNodes: 2, ComputeNodes: 8, ClientsPerCN: 32,
		Sim: remote.SimConfig{Profile: remote.CX6()}, Seed: 1, MaxRuntime: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	if res.Errors > 0 {
		b.Fatalf("%d operations failed: %s", res.Errors, res.FirstError)
	}
	return pool.Stats().Verbs()
}
