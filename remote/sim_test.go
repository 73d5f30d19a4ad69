package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
)

// simFingerprint runs a contended random workload in the simulator and
// returns everything observable about the run: final memory, every value the
// clients saw, statistics, the report and the virtual end time. The workload
// depends on workSeed only; cfg.Sim.Seed drives the simulator.
func simFingerprint(t *testing.T, sim *SimConfig, workSeed uint64) string {
	ctx := context.Background()
	const nodeBytes = 1 << 18
	p := newTestPool(t, Config{MemoryNodes: 2, NodeBytes: nodeBytes, Sim: sim})
	setup := p.NewComputeNode().NewClient()
	var words [2]Addr  // 16 shared words per memory node
	var blocks [2]Addr // a shared 512-byte (8-line) block per memory node
	for mn := range 2 {
		var err error
		if words[mn], err = setup.AllocOn(ctx, mn, 128, 64); err != nil {
			t.Fatal(err)
		}
		if blocks[mn], err = setup.AllocOn(ctx, mn, 512, 64); err != nil {
			t.Fatal(err)
		}
	}
	const clients, opsPer = 64, 150
	hashes := make([]uint64, clients)
	var cns []*ComputeNode
	for range 4 {
		cns = append(cns, p.NewComputeNode())
	}
	for id := range clients {
		c := cns[id%4].NewClient()
		p.Go(func() {
			rng := rand.New(rand.NewPCG(workSeed, uint64(id)))
			h := fnv.New64a()
			var seen [32]uint64
			block := make([]byte, 512)
			word := make([]byte, 8)
			note := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
			for i := range opsPer {
				mn := rng.IntN(2)
				wi := rng.IntN(16)
				w := words[mn].Add(uint64(8 * wi))
				var err error
				switch rng.IntN(7) {
				case 0:
					var old uint64
					old, err = c.CAS(ctx, w, seen[16*mn+wi], seen[16*mn+wi]+uint64(id)+1)
					seen[16*mn+wi] = old
					note(old)
				case 1:
					var old uint64
					old, err = c.FAA(ctx, w, uint64(id))
					note(old)
				case 2:
					err = c.Read(ctx, blocks[mn], block)
					h.Write(block)
				case 3:
					sum := h.Sum64()
					for j := range block {
						block[j] = byte(sum>>(8*(j%8))) ^ byte(id+i)
					}
					err = c.Write(ctx, blocks[mn], block)
				case 4:
					binary.LittleEndian.PutUint64(word, h.Sum64())
					ops := []Op{Write(w, word), Read(blocks[1-mn], block), FAA(words[1-mn], 1)}
					err = c.Do(ctx, ops)
					h.Write(block)
					note(ops[2].Old)
				case 5:
					err = c.Post(ctx, []Op{Write(blocks[mn].Add(64*uint64(rng.IntN(8))), block[:64])})
				case 6:
					c.Compute(time.Duration(rng.IntN(500)) * time.Nanosecond)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
			hashes[id] = h.Sum64()
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	mem := fnv.New64a()
	for _, m := range p.mns {
		for _, w := range m.main {
			mem.Write(binary.LittleEndian.AppendUint64(nil, w))
		}
	}
	return fmt.Sprintf("memory %x\nclients %x\nstats %+v\nnow %v\nreport %+v", mem.Sum64(), hashes, p.Stats(), p.Now(), p.Report())
}

func TestSimDeterminism(t *testing.T) {
	seed := testseed.Seed(t)
	for _, o := range []Ordering{Strict, InOrder} {
		t.Run(o.String(), func(t *testing.T) {
			a := simFingerprint(t, simConfig(o, seed), seed)
			b := simFingerprint(t, simConfig(o, seed), seed)
			if a != b {
				t.Fatalf("two runs with seed %d differ:\n%s\n---\n%s", seed, a, b)
			}
			if o != Strict {
				return // the simulator draws random numbers only for Strict line orders
			}
			c := simFingerprint(t, simConfig(o, seed+1), seed)
			if a == c {
				t.Fatalf("simulator seeds %d and %d gave the same run", seed, seed+1)
			}
		})
	}
}

// TestSimWaitSignal covers the simulator's CN-local blocking: ping-pong in
// virtual time, a kept permit, deadlock detection, Close and cancellation.
func TestSimWaitSignal(t *testing.T) {
	ctx := context.Background()

	t.Run("ping-pong", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		cn := p.NewComputeNode()
		ping, pong := cn.NewClient(), cn.NewClient()
		a, err := ping.Alloc(ctx, 8)
		if err != nil {
			t.Fatal(err)
		}
		const rounds = 100
		pingPong(t, p, ping, pong, a, rounds)
		t0 := p.Now()
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		// Each round is two FAA round trips, one after the other.
		per := (p.Now() - t0) / rounds
		if rtt := CX6().RTT; per < 2*rtt || per > 2*rtt+300*time.Nanosecond {
			t.Fatalf("a ping-pong round took %v of virtual time, want about 2 RTT", per)
		}
	})

	t.Run("permit", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		c := p.NewComputeNode().NewClient()
		c.Signal()
		c.Signal()
		t0 := p.Now()
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("Wait after Signal: %v", err)
		}
		if p.Now() != t0 {
			t.Fatal("consuming a permit took virtual time")
		}
		// Only one permit is kept; waiting again from the test goroutine with
		// nothing else to run is a deadlock.
		if err := c.Wait(ctx); !errors.Is(err, ErrDeadlock) {
			t.Fatalf("second Wait: %v, want ErrDeadlock", err)
		}
	})

	t.Run("deadlock-then-close", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		cn := p.NewComputeNode()
		errs := make([]error, 3)
		for i := range errs {
			c := cn.NewClient()
			p.Go(func() {
				errs[i] = c.Wait(ctx)
				if errs[i] == nil {
					return
				}
				// Verbs after Close fail at once.
				if err := c.Read(ctx, MakeAddr(0, 4096), make([]byte, 8)); !errors.Is(err, ErrClosed) {
					t.Errorf("Read after Close: %v", err)
				}
			})
		}
		err := p.Wait()
		if !errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "3 client(s) parked") {
			t.Fatalf("Wait with every client parked: %v", err)
		}
		p.Close()
		if err := p.Wait(); err != nil {
			t.Fatalf("Wait after Close: %v", err)
		}
		for i, err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("parked client %d woke with %v, want ErrClosed", i, err)
			}
		}
	})

	t.Run("close-while-running", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		cn := p.NewComputeNode()
		parked, closer := cn.NewClient(), cn.NewClient()
		var parkedErr, closerErr error
		p.Go(func() { parkedErr = parked.Wait(ctx) })
		p.Go(func() {
			if _, err := closer.FAA(ctx, MakeAddr(0, 4096), 1); err != nil {
				t.Error(err)
			}
			p.Close()
			_, closerErr = closer.FAA(ctx, MakeAddr(0, 4096), 1)
		})
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(parkedErr, ErrClosed) || !errors.Is(closerErr, ErrClosed) {
			t.Fatalf("after Close: parked client got %v, closer's verb %v", parkedErr, closerErr)
		}
	})

	t.Run("cancel-parked", func(t *testing.T) {
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		c := p.NewComputeNode().NewClient()
		cctx, cancel := context.WithCancel(ctx)
		var werr error
		p.Go(func() { werr = c.Wait(cctx) })
		if err := p.Wait(); !errors.Is(err, ErrDeadlock) {
			t.Fatalf("Wait: %v", err)
		}
		cancel()
		// Cancellation reaches the simulator asynchronously (context.AfterFunc):
		// until it does, the run is still deadlocked.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			err := p.Wait()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrDeadlock) || time.Now().After(deadline) {
				t.Fatalf("Wait after cancel: %v", err)
			}
		}
		if !errors.Is(werr, context.Canceled) {
			t.Fatalf("cancelled Wait returned %v", werr)
		}
	})

	t.Run("plain-goroutines", func(t *testing.T) {
		// A ring of plain goroutines (no Pool.Go) passes a turn with Signal
		// and Wait while other plain goroutines issue verbs: every Wait is
		// woken by a goroutine the simulator cannot see coming.
		p := newTestPool(t, Config{Sim: simConfig(Strict, 0)})
		cn := p.NewComputeNode()
		a, err := cn.NewClient().Alloc(ctx, 16)
		if err != nil {
			t.Fatal(err)
		}
		const ring, noisy, rounds = 4, 4, 50
		cs := make([]*Client, ring)
		for i := range cs {
			cs[i] = cn.NewClient()
		}
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() {
				for r := range rounds {
					if i > 0 || r > 0 {
						if err := c.Wait(ctx); err != nil {
							t.Errorf("ring %d round %d: %v", i, r, err)
							return
						}
					}
					if v, err := c.FAA(ctx, a, 1); err != nil || v != uint64(r*ring+i) {
						t.Errorf("ring %d round %d: counter %d, %v", i, r, v, err)
					}
					cs[(i+1)%ring].Signal()
				}
			})
		}
		for range noisy {
			c := cn.NewClient()
			wg.Go(func() {
				for range rounds {
					if _, err := c.FAA(ctx, a.Add(8), 1); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		c := cn.NewClient()
		if v, err := c.FAA(ctx, a.Add(8), 0); err != nil || v != noisy*rounds {
			t.Fatalf("noise counter %d, %v", v, err)
		}
	})

	t.Run("implicit-participant", func(t *testing.T) {
		// The test goroutine waits; goroutines started by Go (not yet driven
		// by Pool.Wait) run meanwhile and signal it.
		p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
		cn := p.NewComputeNode()
		main := cn.NewClient()
		a, err := main.Alloc(ctx, 8)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			c := cn.NewClient()
			p.Go(func() {
				if _, err := c.FAA(ctx, a, 1); err != nil {
					t.Error(err)
				}
				main.Signal()
			})
		}
		t0 := main.Now()
		if err := main.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if d := main.Now() - t0; d < CX6().RTT {
			t.Fatalf("woken after %v of virtual time, before any FAA completed", d)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if v, err := main.FAA(ctx, a, 0); err != nil || v != 4 {
			t.Fatalf("counter %d, %v", v, err)
		}
	})
}
