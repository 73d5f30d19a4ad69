package remote

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestInjectStalls checks that stalls delay batches by their pause in
// virtual time, that a seed repeats them exactly, that a stall stops when
// asked, and that a DoBy batch a stall makes late executes nothing.
func TestInjectStalls(t *testing.T) {
	const pause = 50 * time.Microsecond
	run := func(rate float64, seed uint64) (stalls uint64, end time.Duration) {
		p, c0, a := simWord(t)
		cn, ctx := c0.ComputeNode(), context.Background()
		p.InjectStalls(Stalls{Rate: rate, Pause: pause, Seed: seed})
		for range 4 {
			p.Go(func() {
				c := cn.NewClient()
				for range 200 {
					if _, err := c.FAA(ctx, a, 1); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		stalls = p.InjectStalls(Stalls{})
		if v, err := cn.NewClient().FAA(ctx, a, 0); err != nil || v != 800 {
			t.Fatalf("counter %d, %v after 800 FAAs", v, err)
		}
		return stalls, p.Now()
	}
	_, calm := run(0, 0)
	s1, e1 := run(20_000, 7) // one every 50 µs
	s2, e2 := run(20_000, 7)
	if s1 == 0 || s1 != s2 || e1 != e2 {
		t.Fatalf("two runs with seed 7: %d and %d stalls, ending at %v and %v; want equal and some stalls", s1, s2, e1, e2)
	}
	// Four clients share the stalls: the run takes at least a quarter of
	// their pauses longer.
	if e1 < calm+time.Duration(s1)*pause/4 {
		t.Fatalf("%d stalls of %v: the run ended at %v, only %v after the run without stalls", s1, pause, e1, e1-calm)
	}

	t.Run("max", func(t *testing.T) {
		p, c, a := simWord(t)
		ctx := context.Background()
		p.InjectStalls(Stalls{Rate: 1e9, Pause: time.Microsecond, Max: 3, Seed: 1})
		for range 10 {
			c.Compute(time.Microsecond)
			if _, err := c.FAA(ctx, a, 1); err != nil {
				t.Fatal(err)
			}
		}
		if n := p.Stalls(); n != 3 {
			t.Fatalf("%d stalls with Max 3 and one due before every batch", n)
		}
	})

	t.Run("late", func(t *testing.T) {
		p, c, a := simWord(t)
		ctx := context.Background()
		p.InjectStalls(Stalls{Rate: 1e9, Pause: pause, Seed: 1}) // due within nanoseconds
		c.Compute(time.Microsecond)
		err := c.DoBy(ctx, []Op{Write(a, []byte{1, 0, 0, 0, 0, 0, 0, 0})}, c.Now()+pause/2)
		if !errors.Is(err, ErrLate) {
			t.Fatalf("DoBy with a deadline half a pause away, a stall due: %v, want ErrLate", err)
		}
		if p.InjectStalls(Stalls{}) != 1 {
			t.Fatalf("%d stalls, want 1", p.Stalls())
		}
		var buf [8]byte
		if err := c.Read(ctx, a, buf[:]); err != nil || buf[0] != 0 {
			t.Fatalf("the late WRITE landed: %v, %v", buf, err)
		}
	})
}

// simWord returns a simulated pool of one memory node, a client of a new
// compute node, and an 8-byte word that client allocated.
func simWord(t *testing.T) (*Pool, *Client, Addr) {
	t.Helper()
	p := newTestPool(t, Config{MemoryNodes: 1, Sim: &SimConfig{Seed: 1}})
	c := p.NewComputeNode().NewClient()
	a, err := c.Alloc(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	return p, c, a
}
