package remote

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkLocalRead measures signaled READs of the local transport by size
// on one goroutine.
func BenchmarkLocalRead(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{8, 64, 256, 1024, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			p := newTestPool(b, Config{})
			c := p.NewComputeNode().NewClient()
			a, err := c.Alloc(ctx, 4096)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := c.Read(ctx, a, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "verbs/s")
		})
	}
}

// BenchmarkSimVerbs measures simulated verbs per wall-clock second: clients
// each issue one-verb batches of 8-byte READs (a goroutine hand-off per
// batch whenever the next event belongs to another client) against two
// memory nodes. It also reports the simulated throughput.
func BenchmarkSimVerbs(b *testing.B) {
	ctx := context.Background()
	for _, clients := range []int{1, 64} {
		for _, o := range []Ordering{InOrder, Strict} {
			b.Run(fmt.Sprintf("clients=%d/%v", clients, o), func(b *testing.B) {
				p := newTestPool(b, Config{MemoryNodes: 2, Sim: simConfig(o, 1)})
				cn := p.NewComputeNode()
				per := (b.N + clients - 1) / clients
				b.ReportAllocs()
				b.ResetTimer()
				start, vstart := time.Now(), p.Now()
				for id := range clients {
					c := cn.NewClient()
					p.Go(func() {
						buf := make([]byte, 8)
						for i := range per {
							a := MakeAddr((id+i)%2, reservedBytes+uint64(64*id))
							if err := c.Read(ctx, a, buf); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				if err := p.Wait(); err != nil {
					b.Fatal(err)
				}
				verbs := float64(per * clients)
				b.ReportMetric(verbs/time.Since(start).Seconds(), "verbs/s")
				b.ReportMetric(verbs/(p.Now()-vstart).Seconds()/1e6, "virtual-Mops")
			})
		}
	}
}
