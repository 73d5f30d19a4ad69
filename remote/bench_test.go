package remote

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/cputime"
	"github.com/dmindex/dmindex/internal/memnodetest"
)

// BenchmarkLocalRead measures signaled READs of the local transport by size
// on one goroutine.
func BenchmarkLocalRead(b *testing.B) { benchLocalVerb(b, (*Client).Read) }

// BenchmarkLocalWrite measures signaled WRITEs of the local transport by
// size on one goroutine: beside the copy, each takes the stripes of the
// lines it writes (stripes.go).
func BenchmarkLocalWrite(b *testing.B) { benchLocalVerb(b, (*Client).Write) }

// benchLocalVerb measures one-verb batches of verb by size.
func benchLocalVerb(b *testing.B, verb func(*Client, context.Context, Addr, []byte) error) {
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
			start, cpu := time.Now(), cputime.Process()
			for range b.N {
				if err := verb(c, ctx, a, buf); err != nil {
					b.Fatal(err)
				}
			}
			reportRates(b, float64(b.N), start, cpu)
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
				start, cpu, vstart := time.Now(), cputime.Process(), p.Now()
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
				reportRates(b, verbs, start, cpu)
				b.ReportMetric(verbs/(p.Now()-vstart).Seconds()/1e6, "virtual-Mops")
			})
		}
	}
}

// reportRates reports verbs per wall-clock second and, where the platform
// measures it, per second of the process's CPU time (all threads): the
// machine-load-independent figure on a shared machine.
func reportRates(b *testing.B, verbs float64, start time.Time, cpu time.Duration) {
	b.ReportMetric(verbs/time.Since(start).Seconds(), "verbs/s")
	if used := cputime.Process() - cpu; used > 0 {
		b.ReportMetric(verbs/used.Seconds(), "verbs/cpu-s")
	}
}

// BenchmarkNetVerbs measures verbs per second over the network transports
// against one memnode process on loopback: 8-byte CASes and 64-byte READs
// from 1 and from 64 clients of one compute node, each client issuing one
// verb per round trip (so 64 clients keep 64 requests in flight on the
// compute node's shared connections). The memnode's CPU executes the verbs,
// and client and server share this machine's cores.
func BenchmarkNetVerbs(b *testing.B) {
	ctx := context.Background()
	nodes := memnodetest.Start(b, 1, memnodetest.Options{Bytes: 64 << 20})
	p := newTestPool(b, Config{NodeBytes: 64 << 20, TCP: &TCPConfig{MemoryNodes: memnodetest.Addrs(nodes), Token: memnodetest.Token}})
	for _, verb := range []string{"CAS8", "READ64"} {
		for _, clients := range []int{1, 64} {
			b.Run(fmt.Sprintf("tcp/%s/clients=%d", verb, clients), func(b *testing.B) {
				cn := p.NewComputeNode()
				per := (b.N + clients - 1) / clients
				b.ResetTimer()
				start, cpu := time.Now(), cputime.Process()
				for range clients {
					c := cn.NewClient()
					a, err := c.Alloc(ctx, 64)
					if err != nil {
						b.Fatal(err)
					}
					p.Go(func() {
						buf := make([]byte, 64)
						for i := range per {
							var err error
							if verb == "CAS8" {
								_, err = c.CAS(ctx, a, uint64(i), uint64(i+1))
							} else {
								err = c.Read(ctx, a, buf)
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
				reportRates(b, float64(per*clients), start, cpu)
			})
		}
	}
}
