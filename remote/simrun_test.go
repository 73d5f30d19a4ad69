package remote

import (
	"context"
	"encoding/binary"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/childtest"
)

// finishes runs fn and fails the test if it has not returned after d: a lost
// wake-up leaves a goroutine blocked for ever.
func finishes(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("still running after %v:\n%s", d, buf[:runtime.Stack(buf, true)])
	}
}

// TestSimPlainBesideGo has plain goroutines use clients while goroutines
// started by Go run, as a test's own goroutine may between phases (the epoch
// test of internal/registry does). Goroutines started by Go run as
// coroutines: a plain goroutine's call must queue for the token, not be
// taken for the coroutine holding it, which would switch the wrong
// goroutine (a lost wake-up, or a panic in iter.Pull).
func TestSimPlainBesideGo(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		finishes(t, time.Minute, func() {
			p := newTestPool(t, Config{MemoryNodes: 2, Sim: simConfig(InOrder, uint64(round))})
			cn := p.NewComputeNode()
			setup := cn.NewClient()
			ctr, err := setup.Alloc(ctx, 8)
			if err != nil {
				t.Error(err)
				return
			}
			const started, plain, ops = 8, 3, 200
			add := func(c *Client) {
				for range ops {
					if _, err := c.FAA(ctx, ctr, 1); err != nil {
						t.Error(err)
						return
					}
				}
			}
			for range started {
				c := cn.NewClient()
				p.Go(func() { add(c) })
				// Runs the goroutines started so far meanwhile; they are
				// still running when the next call begins.
				if _, err := setup.FAA(ctx, ctr, 1); err != nil {
					t.Error(err)
					return
				}
			}
			var wg sync.WaitGroup
			for range plain {
				c := cn.NewClient()
				wg.Go(func() { add(c) })
			}
			wg.Wait()
			if err := p.Wait(); err != nil {
				t.Error(err)
				return
			}
			var b [8]byte
			if err := setup.Read(ctx, ctr, b[:]); err != nil {
				t.Error(err)
				return
			}
			if got, want := binary.LittleEndian.Uint64(b[:]), uint64(started*ops+started+plain*ops); got != want {
				t.Errorf("round %d: counter %d, want %d", round, got, want)
			}
		})
	}
}

// TestSimDriverEnds checks the coroutine driver's life: it starts when a
// plain goroutine first hands the token to a goroutine started by Go (here
// Pool.Wait, or a Signal from the test goroutine), ends once none is left,
// and a later Go starts a new one. Every round must complete (a missing
// driver strands the coroutines) and no driver may outlive its round.
func TestSimDriverEnds(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
	cn := p.NewComputeNode()
	ping, pong, waiter, plain := cn.NewClient(), cn.NewClient(), cn.NewClient(), cn.NewClient()
	a, err := plain.Alloc(ctx, 16)
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for round := range 50 {
		finishes(t, time.Minute, func() {
			// Coroutine to coroutine: a ping-pong of Wait and Signal.
			if err := plain.Write(ctx, a, make([]byte, 8)); err != nil {
				t.Error(err)
				return
			}
			pingPong(t, p, ping, pong, a, 10)
			// Plain to coroutine: the test goroutine's Signal wakes a
			// goroutine parked in Wait while nobody runs the agenda.
			woke := make(chan error, 1)
			p.Go(func() { woke <- waiter.Wait(ctx) })
			if _, err := plain.FAA(ctx, a.Add(8), 1); err != nil { // runs it up to its Wait
				t.Error(err)
				return
			}
			waiter.Signal()
			if err := p.Wait(); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
			if err := <-woke; err != nil {
				t.Errorf("round %d: Wait: %v", round, err)
			}
		})
	}
	// The last driver ends shortly after handing the token back.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the rounds, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestSimGoPanicStack checks that a panic in a goroutine started by Go,
// re-raised by the coroutine driver, still shows where it happened.
func TestSimGoPanicStack(t *testing.T) {
	c := childtest.Start(t, childtest.Options{Test: "TestSimGoPanicChild", Arg: "panic", Timeout: time.Minute})
	if err := c.Wait(); err == nil {
		t.Fatal("the child's panic went unnoticed")
	}
	out := c.Output()
	for _, want := range []string{"boom in Go", "goroutine started by Pool.Go", "panicInGo"} {
		if !strings.Contains(out, want) {
			t.Errorf("the child's output lacks %q:\n%s", want, out)
		}
	}
}

// TestSimGoPanicChild panics in a goroutine started by Go; it runs only as
// TestSimGoPanicStack's child.
func TestSimGoPanicChild(t *testing.T) {
	if _, ok := childtest.Arg(); !ok {
		t.Skip("run by TestSimGoPanicStack")
	}
	p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
	p.Go(panicInGo)
	_ = p.Wait()
}

//go:noinline
func panicInGo() { panic("boom in Go") }

// TestSimPlainServedBeforeIdle: a plain goroutine's call queued behind a
// goroutine started by Go must get the token when that goroutine next
// blocks, not only once the simulation is idle: here the goroutine polls a
// word until the plain goroutine's WRITE sets it.
func TestSimPlainServedBeforeIdle(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, Config{Sim: simConfig(InOrder, 0)})
	cn := p.NewComputeNode()
	plain, poller := cn.NewClient(), cn.NewClient()
	a, err := plain.Alloc(ctx, 16)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 100_000
	polls := 0
	p.Go(func() {
		var b [8]byte
		for ; polls < limit; polls++ {
			if err := poller.Read(ctx, a, b[:]); err != nil || b[0] != 0 {
				return
			}
		}
	})
	// Runs the poller meanwhile and leaves the token with it.
	if _, err := plain.FAA(ctx, a.Add(8), 1); err != nil {
		t.Fatal(err)
	}
	if err := plain.Write(ctx, a, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if polls == limit {
		t.Fatalf("the poller never saw the WRITE in %d READs", limit)
	}
}
