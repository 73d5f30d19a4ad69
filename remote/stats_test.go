package remote

import (
	"context"
	"testing"
)

func TestStatsCounting(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: 1 << 20})
			cn0, cn1 := p.NewComputeNode(), p.NewComputeNode()
			c0, c1, c2 := cn0.NewClient(), cn0.NewClient(), cn1.NewClient()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}

			// c0: one RPC (first chunk), then a scripted mix.
			a, err := c0.Alloc(ctx, 512)
			must(err)
			must(c0.Read(ctx, a, make([]byte, 100)))
			must(c0.Write(ctx, a, make([]byte, 50)))
			_, err = c0.CAS(ctx, a, 0, 1) // succeeds
			must(err)
			_, err = c0.CAS(ctx, a, 0, 2) // fails
			must(err)
			_, err = c0.FAA(ctx, a.Add(8), 1)
			must(err)
			must(c0.Do(ctx, []Op{Read(a, make([]byte, 10)), Write(a.Add(64), make([]byte, 20)), CAS(a.Add(16), 5, 6)}))
			must(c0.Post(ctx, []Op{Write(a.Add(128), make([]byte, 30)), FAA(a.Add(8), 1), CAS(a.Add(16), 7, 8)}))
			want0 := Stats{Reads: 2, Writes: 3, CASes: 4, FAAs: 2, ReadBytes: 110, WriteBytes: 100,
				RoundTrips: 6, Unsignaled: 3, RPCs: 1, CASFailures: 2, AllocBytes: 512}

			// c1: a Named region (RPC) and a batch to both memory nodes.
			r, err := c1.Named(ctx, "root", 64)
			must(err)
			b, err := c1.AllocOn(ctx, 1, 64, 8) // second RPC
			must(err)
			must(c1.Do(ctx, []Op{Read(r, make([]byte, 64)), Read(b, make([]byte, 64)), FAA(b, 1)}))
			must(c1.Free(b, 64))
			want1 := Stats{Reads: 2, FAAs: 1, ReadBytes: 128, RoundTrips: 1, RPCs: 2, AllocBytes: 64, FreedBytes: 64}

			// c2 on the other compute node.
			must(c2.Write(ctx, r, make([]byte, 7)))
			must(c2.Post(ctx, []Op{Read(r, make([]byte, 9))}))
			want2 := Stats{Reads: 1, Writes: 1, ReadBytes: 9, WriteBytes: 7, RoundTrips: 1, Unsignaled: 1}

			// A failed batch counts nothing.
			if err := c2.Do(ctx, []Op{Read(r, make([]byte, 8)), Read(0, make([]byte, 8))}); err == nil {
				t.Fatal("invalid batch accepted")
			}
			must(p.Wait()) // lets the simulator finish unsignaled verbs

			for _, cs := range []struct {
				name      string
				got, want Stats
			}{
				{"client 0", c0.Stats(), want0},
				{"client 1", c1.Stats(), want1},
				{"client 2", c2.Stats(), want2},
				{"compute node 0", cn0.Stats(), want0.Add(want1)},
				{"compute node 1", cn1.Stats(), want2},
				{"pool", p.Stats(), want0.Add(want1).Add(want2)},
			} {
				if cs.got != cs.want {
					t.Errorf("%s: stats\n got %+v\nwant %+v", cs.name, cs.got, cs.want)
				}
			}
			if got := want0.Verbs(); got != 11 {
				t.Errorf("Verbs() = %d", got)
			}
			if d := p.Stats().Sub(want0); d != want1.Add(want2) {
				t.Errorf("Sub: %+v", d)
			}
			if p.Transport() != "sim" {
				return
			}
			rep := p.Report()
			var mnVerbs, cnVerbs uint64
			for _, m := range rep.MemoryNodes {
				mnVerbs += m.Verbs
			}
			for _, c := range rep.ComputeNodes {
				cnVerbs += c.Verbs
			}
			if v := p.Stats().Verbs(); mnVerbs != v || cnVerbs != v {
				t.Errorf("report counts %d verbs at memory nodes, %d at compute nodes; stats %d", mnVerbs, cnVerbs, v)
			}
			if len(rep.Clients) != 3 || rep.Clients[0].Batches != 6 || rep.Clients[2].ComputeNode != 1 {
				t.Errorf("client reports: %+v", rep.Clients)
			}
		})
	}
}
