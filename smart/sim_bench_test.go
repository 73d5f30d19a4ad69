package smart_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// simRun is one closed-loop run in the simulator: cns × per clients, each
// doing ops operations on records keys drawn uniformly or from YCSB's
// scrambled Zipfian (θ 0.99), reads with probability readFrac, updates of
// existing keys otherwise; first as a warm-up, then measured. It returns
// the measured phase's I/O per operation and the virtual throughput.
type simResult struct {
	rtt, verbs, readB float64
	mops              float64
	iopsUtil          float64
}

func simRun(tb testing.TB, opts smart.Options, records, cns, per, ops int, zipf bool, readFrac float64) simResult {
	tb.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 512 << 20, Sim: &remote.SimConfig{Seed: 1}})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	trees := make([]*smart.Tree, cns)
	for i := range trees {
		cn := p.NewComputeNode()
		p.Go(func() { trees[i], err = smart.Open(cn, opts) })
		if werr := p.Wait(); werr != nil || err != nil {
			tb.Fatal(werr, err)
		}
	}
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, ycsb.FNVHash64(i)) }
	for c := range cns * per {
		p.Go(func() {
			for i := c; i < records; i += cns * per {
				if err := trees[c%cns].Put(ctx, key(uint64(i)), key(uint64(i))); err != nil {
					panic(err)
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		tb.Fatal(err)
	}
	run := func(phase uint64) {
		for c := range cns * per {
			p.Go(func() {
				r := rand.New(rand.NewPCG(uint64(c), phase))
				z := ycsb.NewScrambledZipfian(0, uint64(records-1), 0.99)
				tr := trees[c%cns]
				for range ops {
					i := uint64(r.IntN(records))
					if zipf {
						i = z.Next(r)
					}
					var err error
					if r.Float64() < readFrac {
						_, _, err = tr.Get(ctx, key(i))
					} else {
						err = tr.Put(ctx, key(i), key(i+1))
					}
					if err != nil {
						panic(err)
					}
				}
			})
		}
		if err := p.Wait(); err != nil {
			tb.Fatal(err)
		}
	}
	run(1) // warm-up: the compute nodes' caches fill with the internal nodes
	before, start := p.Stats(), p.Now()
	beforeReport := p.Report()
	run(2)
	d := p.Stats().Sub(before)
	n := float64(cns * per * ops)
	el := p.Now() - start
	rep := p.Report()
	var busy float64
	for i, m := range rep.MemoryNodes {
		// Utilisation over the run phase only.
		v := float64(m.Verbs - beforeReport.MemoryNodes[i].Verbs)
		busy += v
	}
	return simResult{
		rtt: float64(d.RoundTrips) / n, verbs: float64(d.Verbs()) / n, readB: float64(d.ReadBytes) / n,
		mops:     n / el.Seconds() / 1e6,
		iopsUtil: busy / el.Seconds() / (2 * remote.CX6().MNIOPS),
	}
}

// BenchmarkSimTechniques measures SMART in the simulator (cx6, 2 memory
// nodes, 4 compute nodes × 64 clients, 100k records): round trips, verbs
// and virtual throughput of searches and updates of existing keys, with and
// without read delegation and write combining, on skewed and uniform keys.
// Run with -benchtime 1x; the figures are virtual and exact.
func BenchmarkSimTechniques(b *testing.B) {
	for _, tc := range []struct {
		name     string
		readFrac float64
		releases []smart.Release
	}{
		{"search", 1, []smart.Release{smart.ReleaseInWrite}},
		{"update", 0, []smart.Release{smart.ReleaseInWrite, smart.ReleaseSecondWrite}},
	} {
		for _, zipf := range []bool{true, false} {
			for _, rdwc := range []bool{true, false} {
				for _, rel := range tc.releases {
					name := fmt.Sprintf("%s/zipf=%v/rdwc=%v", tc.name, zipf, rdwc)
					if len(tc.releases) > 1 {
						name += "/release=" + rel.String()
					}
					b.Run(name, func(b *testing.B) {
						opts := smart.Options{NoReadDelegation: !rdwc, NoWriteCombining: !rdwc, Release: rel}
						var r simResult
						for b.Loop() {
							r = simRun(b, opts, 100000, 4, 64, 3000, zipf, tc.readFrac)
						}
						b.ReportMetric(r.rtt, "rtt/op")
						b.ReportMetric(r.verbs, "verbs/op")
						b.ReportMetric(r.readB, "read-B/op")
						b.ReportMetric(r.mops, "vMops")
						b.ReportMetric(r.iopsUtil, "iops-util")
					})
				}
			}
		}
	}
}
