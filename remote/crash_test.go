package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestCrashCutPoints arms every fault on a batch of [W 24 bytes, W 8 bytes,
// CAS] behind every transport and checks exactly which bytes landed: the
// verbs before the fault in full, the first Words words of a cut WRITE,
// nothing after; and that the client then fails every call with ErrCrashed.
func TestCrashCutPoints(t *testing.T) {
	ctx := context.Background()
	for _, tc := range allTransports {
		if testing.Short() && tc.name == "tcp" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pool(t, Config{MemoryNodes: 1})
			cn := p.NewComputeNode()
			probe := cn.NewClient()
			for after := range 4 {
				for words := range 4 {
					t.Run(fmt.Sprintf("after=%d/words=%d", after, words), func(t *testing.T) {
						a, err := probe.AllocOn(ctx, 0, 48, 8)
						if err != nil {
							t.Fatal(err)
						}
						c := cn.NewClient()
						c.Crash(Fault{After: after, Words: words})
						first := bytes.Repeat([]byte{0xAA}, 24)
						ops := []Op{Write(a, first), Write(a.Add(24), bytes.Repeat([]byte{0xBB}, 8)), CAS(a.Add(32), 0, 7)}
						err = c.Do(ctx, ops)
						if after >= len(ops) {
							if err != nil {
								t.Fatalf("batch of %d verbs with fault after %d: %v", len(ops), after, err)
							}
							return
						}
						if !errors.Is(err, ErrCrashed) || !c.Crashed() {
							t.Fatalf("Do = %v, Crashed %v; want ErrCrashed", err, c.Crashed())
						}
						want := make([]byte, 40)
						switch {
						case after == 0:
							copy(want, first[:8*min(words, 2)]) // all but the last word
						case after >= 1:
							copy(want, first)
							if after >= 2 {
								copy(want[24:], bytes.Repeat([]byte{0xBB}, 8))
							}
						}
						if err := p.Wait(); err != nil {
							t.Fatal(err)
						}
						got := make([]byte, 40)
						if err := probe.Read(ctx, a, got); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) {
							t.Fatalf("memory after the crash:\n got %x\nwant %x", got, want)
						}
						if _, err := c.CAS(ctx, a.Add(32), 0, 1); !errors.Is(err, ErrCrashed) {
							t.Fatalf("CAS after the crash = %v, want ErrCrashed", err)
						}
						if _, err := c.Alloc(ctx, 64); !errors.Is(err, ErrCrashed) {
							t.Fatalf("Alloc after the crash = %v, want ErrCrashed", err)
						}
					})
				}
			}
		})
	}
}

// TestCrashCountsAcrossBatches checks that After counts the verbs of every
// batch posted after the fault was armed, and that a compute node's fault
// strikes the next client that posts.
func TestCrashCountsAcrossBatches(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, Config{MemoryNodes: 2})
	cn := p.NewComputeNode()
	c1, c2 := cn.NewClient(), cn.NewClient()
	a, err := c1.Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	cn.Crash(Fault{After: 3})
	for i := range 3 {
		if _, err := c2.FAA(ctx, a, 1); err != nil {
			t.Fatalf("FAA %d before the fault: %v", i, err)
		}
	}
	if _, err := c2.FAA(ctx, a, 1); !errors.Is(err, ErrCrashed) {
		t.Fatalf("fourth FAA = %v, want ErrCrashed", err)
	}
	if v, err := c1.FAA(ctx, a, 0); err != nil || v != 3 || c1.Crashed() {
		t.Fatalf("the other client reads %d, %v (crashed %v); want 3 and a live client", v, err, c1.Crashed())
	}
}

// TestCrashCutBytes checks the cut of WRITEs that do not start or end on a
// word boundary.
func TestCrashCutBytes(t *testing.T) {
	for _, tc := range []struct {
		addr        Addr
		n, words, w int
	}{
		{0, 24, 0, 0}, {0, 24, 1, 8}, {0, 24, 2, 16}, {0, 24, 3, 16}, {0, 8, 1, 0},
		{5, 24, 1, 3}, {5, 24, 2, 11}, {5, 24, 3, 19}, {5, 24, 4, 19}, {5, 3, 1, 0}, {5, 4, 1, 3},
	} {
		if got := cutBytes(tc.addr, tc.n, tc.words); got != tc.w {
			t.Errorf("cutBytes(%d, %d, %d) = %d, want %d", tc.addr, tc.n, tc.words, got, tc.w)
		}
	}
}

// TestInjectCrashes runs clients that update a counter under random crash
// injection in the simulator: the crashes happen at the given rate of
// virtual time, the same seed gives the same crashes, and a crashed client's
// counter increments are the only ones missing.
func TestInjectCrashes(t *testing.T) {
	run := func(seed uint64) (crashes uint64, total uint64) {
		p, c0, a := simWord(t)
		cn, ctx := c0.ComputeNode(), context.Background()
		p.InjectCrashes(100_000, seed) // one every 10 µs
		for range 4 {
			p.Go(func() {
				c := cn.NewClient()
				for range 200 {
					if _, err := c.FAA(ctx, a, 1); errors.Is(err, ErrCrashed) {
						c = cn.NewClient()
					} else if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		crashes = p.InjectCrashes(0, 0)
		v, err := cn.NewClient().FAA(ctx, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		return crashes, v
	}
	c1, v1 := run(7)
	c2, v2 := run(7)
	if c1 == 0 || c1 != c2 || v1 != v2 {
		t.Fatalf("two runs with seed 7: %d and %d crashes, counters %d and %d; want equal and some crashes", c1, c2, v1, v2)
	}
	if v1+c1 != 800 {
		t.Fatalf("counter %d + %d crashed FAAs != 800 posted", v1, c1)
	}
}
