package remote

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
)

// The expected values below are computed from the profile independently of
// the simulator's code: picoseconds, rates rounded to whole picoseconds.

func psOf(d time.Duration) int64       { return int64(d) * 1000 }
func slotPS(rate float64) int64        { return int64(math.Round(1e12 / rate)) }
func serPS(p Profile, bytes int) int64 { return int64(math.Round(float64(bytes) * 1e12 / p.Bandwidth)) }

// TestSimLatency checks a single client's round trips at low load: the base
// RTT plus CPU, one IOPS slot per NIC and the serialisation of request and
// response.
func TestSimLatency(t *testing.T) {
	ctx := context.Background()
	pr := CX6()
	h := pr.HeaderBytes
	cpu, tCN, tMN := psOf(pr.CPUPerVerb), slotPS(pr.CNIOPS), slotPS(pr.MNIOPS)
	base := psOf(pr.RTT) + tCN + tMN
	cases := []struct {
		name  string
		order Ordering
		ops   func(a, b Addr) []Op // a on memory node 0, b on memory node 1
		want  int64
	}{
		{"READ 8", InOrder, func(a, _ Addr) []Op { return []Op{Read(a, make([]byte, 8))} },
			base + cpu + serPS(pr, h) + serPS(pr, h+8)},
		{"WRITE 4096", InOrder, func(a, _ Addr) []Op { return []Op{Write(a, make([]byte, 4096))} },
			base + cpu + serPS(pr, h+4096) + serPS(pr, h)},
		{"READ 4096", InOrder, func(a, _ Addr) []Op { return []Op{Read(a, make([]byte, 4096))} },
			base + cpu + serPS(pr, h) + serPS(pr, h+4096)},
		{"CAS", InOrder, func(a, _ Addr) []Op { return []Op{CAS(a, 0, 1)} },
			base + cpu + serPS(pr, h+16) + serPS(pr, h+8)},
		{"FAA on chip", InOrder, func(_, _ Addr) []Op { return []Op{FAA(OnChip(0, 8), 1)} },
			base + cpu + serPS(pr, h+8) + serPS(pr, h+8)},
		// Two verbs: two CPU posts; the second leaves its NIC one slot later.
		{"2 READs, 2 MNs", InOrder, func(a, b Addr) []Op { return []Op{Read(a, make([]byte, 8)), Read(b, make([]byte, 8))} },
			base + 2*cpu + tCN + serPS(pr, h) + serPS(pr, h+8)},
		{"2 READs, 1 MN", InOrder, func(a, _ Addr) []Op { return []Op{Read(a, make([]byte, 8)), Read(a.Add(64), make([]byte, 8))} },
			base + 2*cpu + tCN + serPS(pr, h) + serPS(pr, h+8)},
		// Strict: the second verb's window starts when the first one's ends.
		{"2 READs, 1 MN, strict", Strict, func(a, _ Addr) []Op { return []Op{Read(a, make([]byte, 8)), Read(a.Add(64), make([]byte, 8))} },
			base + 2*cpu + psOf(pr.DMATime) + serPS(pr, h) + serPS(pr, h+8)},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			p := newTestPool(t, Config{MemoryNodes: 2, Sim: simConfig(cs.order, 1)})
			c := p.NewComputeNode().NewClient()
			a, err := c.AllocOn(ctx, 0, 4096, 64)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.AllocOn(ctx, 1, 64, 64)
			if err != nil {
				t.Fatal(err)
			}
			t0 := p.Now()
			if err := c.Do(ctx, cs.ops(a, b)); err != nil {
				t.Fatal(err)
			}
			got := psOf(p.Now() - t0)
			if math.Abs(float64(got-cs.want)) > 1000 { // Now has nanosecond resolution
				t.Fatalf("latency %d ps, want %d ps", got, cs.want)
			}
			if cs.want > psOf(pr.RTT)+psOf(time.Microsecond) {
				t.Fatalf("%d ps is not near the RTT", cs.want)
			}
		})
	}

	t.Run("RPC and Compute", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		c := p.NewComputeNode().NewClient()
		t0 := c.Now()
		a, err := c.Alloc(ctx, 8) // fetches the first chunk by RPC
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Now()-t0, pr.RTT+pr.RPCTime; got != want {
			t.Fatalf("RPC took %v, want %v", got, want)
		}
		t0 = c.Now()
		c.Compute(3 * time.Microsecond)
		if got := c.Now() - t0; got != 3*time.Microsecond {
			t.Fatalf("Compute moved the client's clock by %v", got)
		}
		if err := c.Read(ctx, a, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		want := 3*psOf(time.Microsecond) + base + cpu + serPS(pr, h) + serPS(pr, h+8)
		if got := psOf(c.Now() - t0); math.Abs(float64(got-want)) > 1000 {
			t.Fatalf("Compute then READ: %d ps, want %d ps", got, want)
		}
		if r := p.Report(); r.Clients[0].Batches != 1 || math.Abs(float64(psOf(r.Clients[0].Mean)-(want-3e6))) > 1000 {
			t.Fatalf("client report %+v", r.Clients[0])
		}
	})
}

// closedLoop runs clients on cns compute nodes, each issuing n batches made
// by mk back to back, and returns the verbs completed per virtual second.
func closedLoop(t *testing.T, p *Pool, cns, clients, n int, mk func(id, i int) []Op) float64 {
	t.Helper()
	ctx := context.Background()
	var nodes []*ComputeNode
	for range cns {
		nodes = append(nodes, p.NewComputeNode())
	}
	before := p.Stats().Verbs()
	for id := range clients {
		c := nodes[id%cns].NewClient()
		p.Go(func() {
			for i := range n {
				if err := c.Do(ctx, mk(id, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	t0 := p.Now()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return float64(p.Stats().Verbs()-before) / (p.Now() - t0).Seconds()
}

// within fails unless got is within tol (relative) below bound and not
// above it.
func within(t *testing.T, what string, got, bound, tol float64) {
	t.Helper()
	t.Logf("%s: %.4g (bound %.4g, %.2f%%)", what, got, bound, 100*got/bound)
	if got < bound*(1-tol) || got > bound*(1+1e-3) {
		t.Errorf("%s = %.4g, want within %.0f%% below the bound %.4g", what, got, 100*tol, bound)
	}
}

// TestSimThroughputBounds drives closed-loop clients into each of the NIC
// model's limits and checks the throughput against the analytic bound.
func TestSimThroughputBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("long: closed-loop saturation runs")
	}
	pr := CX6()
	bufs := make([][]byte, 512)
	for i := range bufs {
		bufs[i] = make([]byte, 4096)
	}

	t.Run("IOPS, small READs, 1 MN", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		base := MakeAddr(0, reservedBytes)
		got := closedLoop(t, p, 4, 160, 250, func(id, i int) []Op {
			return []Op{Read(base.Add(uint64(64*id)), bufs[id][:8])}
		})
		within(t, "small READ verbs/s", got, pr.MNIOPS, 0.02)
		r := p.Report()
		if u := r.MemoryNodes[0].IOPSUtil; u < 0.98 || u > 1.001 {
			t.Errorf("memory node IOPS utilisation %.3f", u)
		}
	})

	t.Run("IOPS, small READs, 2 MNs", func(t *testing.T) {
		p := newTestPool(t, Config{MemoryNodes: 2, Sim: simConfig(InOrder, 1)})
		got := closedLoop(t, p, 8, 320, 150, func(id, i int) []Op {
			return []Op{Read(MakeAddr((id+i)%2, reservedBytes+uint64(64*id)), bufs[id][:8])}
		})
		within(t, "small READ verbs/s over 2 MNs", got, 2*pr.MNIOPS, 0.02)
	})

	t.Run("bandwidth, 4 KiB READs", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		got := closedLoop(t, p, 4, 32, 150, func(id, i int) []Op {
			return []Op{Read(MakeAddr(0, reservedBytes+uint64(4096*id)), bufs[id])}
		})
		within(t, "4 KiB READ verbs/s", got, pr.Bandwidth/float64(4096+pr.HeaderBytes), 0.02)
		r := p.Report()
		if u := r.MemoryNodes[0].TxUtil; u < 0.98 || u > 1.001 {
			t.Errorf("memory node tx utilisation %.3f", u)
		}
	})

	t.Run("bandwidth, 4 KiB WRITEs", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		got := closedLoop(t, p, 4, 32, 150, func(id, i int) []Op {
			return []Op{Write(MakeAddr(0, reservedBytes+uint64(4096*id)), bufs[id])}
		})
		within(t, "4 KiB WRITE verbs/s", got, pr.Bandwidth/float64(4096+pr.HeaderBytes), 0.02)
	})

	atomics := func(t *testing.T, what string, addr func(id int) Addr, bound float64) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		got := closedLoop(t, p, 4, 64, 100, func(id, i int) []Op {
			return []Op{CAS(addr(id), uint64(i), uint64(i+1))} // mostly failing: failures use the unit too
		})
		within(t, what, got, bound, 0.02)
	}
	t.Run("same-address CAS, host memory", func(t *testing.T) {
		atomics(t, "CAS/s on one host word", func(int) Addr { return MakeAddr(0, reservedBytes) }, pr.AtomicRate)
	})
	t.Run("same-address CAS, on chip", func(t *testing.T) {
		atomics(t, "CAS/s on one on-chip word", func(int) Addr { return OnChip(0, 0) }, pr.OnChipAtomicRate)
	})
	t.Run("CAS on two addresses", func(t *testing.T) {
		atomics(t, "CAS/s on two host words", func(id int) Addr { return MakeAddr(0, reservedBytes+8*uint64(id%2)) },
			2*pr.AtomicRate)
	})

	t.Run("latency at low load", func(t *testing.T) {
		// Two clients far below every limit see the unloaded round trip.
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 1)})
		closedLoop(t, p, 2, 2, 200, func(id, i int) []Op {
			return []Op{Read(MakeAddr(0, reservedBytes+uint64(64*id)), bufs[id][:8])}
		})
		want := pr.RTT + pr.CPUPerVerb + psDur(slotPS(pr.CNIOPS)+slotPS(pr.MNIOPS)+serPS(pr, pr.HeaderBytes)+
			serPS(pr, pr.HeaderBytes+8))
		for _, c := range p.Report().Clients {
			if d := c.Mean - want; d < -time.Nanosecond || d > 30*time.Nanosecond {
				t.Errorf("client %d mean latency %v, want about %v", c.Client, c.Mean, want)
			}
		}
	})
}

// TestSimStrictTearing has a writer alternate two patterns over a 4-line
// block while readers read it: Strict mode must show torn (and reordered)
// reads, InOrder never.
func TestSimStrictTearing(t *testing.T) {
	seed := testseed.Seed(t)
	ctx := context.Background()
	const lines, rounds = 4, 400
	for _, o := range []Ordering{Strict, InOrder} {
		t.Run(o.String(), func(t *testing.T) {
			p := newTestPool(t, Config{Sim: simConfig(o, seed)})
			block := MakeAddr(0, reservedBytes)
			patterns := [2][]byte{bytes.Repeat([]byte{0xAA}, 64*lines), bytes.Repeat([]byte{0xBB}, 64*lines)}
			writer := p.NewComputeNode().NewClient()
			if err := writer.Write(ctx, block, patterns[0]); err != nil {
				t.Fatal(err)
			}
			p.Go(func() {
				for i := range rounds {
					if err := writer.Write(ctx, block, patterns[(i+1)%2]); err != nil {
						t.Error(err)
					}
				}
			})
			var torn, reordered int
			for r := range 3 {
				c := p.NewComputeNode().NewClient()
				p.Go(func() {
					buf := make([]byte, 64*lines)
					for i := range rounds {
						if i%3 == r {
							c.Compute(100 * time.Nanosecond) // vary the phase
						}
						if err := c.Read(ctx, block, buf); err != nil {
							t.Error(err)
							return
						}
						var first [lines]byte
						for l := range lines {
							line := buf[64*l : 64*l+64]
							first[l] = line[0]
							if !bytes.Equal(line, bytes.Repeat(line[:1], 64)) || line[0] != 0xAA && line[0] != 0xBB {
								t.Errorf("line %d torn inside: %x", l, line)
							}
						}
						if bytes.Equal(first[:], bytes.Repeat(first[:1], lines)) {
							continue
						}
						torn++
						// A torn in-order write shows as one switch of
						// pattern along the block; more means reordering.
						switches := 0
						for l := 1; l < lines; l++ {
							if first[l] != first[l-1] {
								switches++
							}
						}
						if switches > 1 {
							reordered++
						}
					}
				})
			}
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d of %d reads torn, %d of them reordered", o, torn, 3*rounds, reordered)
			switch {
			case o == Strict && (torn == 0 || reordered == 0):
				t.Errorf("strict mode produced %d torn and %d reordered reads", torn, reordered)
			case o == InOrder && torn != 0:
				t.Errorf("in-order mode produced %d torn reads", torn)
			}
		})
	}
}
