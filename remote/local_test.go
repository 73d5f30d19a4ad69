package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLocalCASStress has many goroutines CAS-increment and FAA shared words
// with real concurrency; every increment must be counted exactly once. Run
// it under -race.
func TestLocalCASStress(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, Config{MemoryNodes: 2, NodeBytes: 1 << 20})
	setup := p.NewComputeNode().NewClient()
	const words = 4
	var addrs [words]Addr
	for i := range addrs {
		a, err := setup.Alloc(ctx, 8) // round-robin: both memory nodes
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	goroutines, perG := 16, 2000
	if testing.Short() {
		perG = 300
	}
	var casFailures uint64
	var mu sync.Mutex
	for g := range goroutines {
		c := p.NewComputeNode().NewClient()
		p.Go(func() {
			buf := make([]byte, 8)
			for i := range perG {
				a := addrs[(g+i)%words]
				if err := c.Read(ctx, a, buf); err != nil {
					t.Error(err)
					return
				}
				old := binary.LittleEndian.Uint64(buf)
				for {
					got, err := c.CAS(ctx, a, old, old+1)
					if err != nil {
						t.Error(err)
						return
					}
					if got == old {
						break
					}
					old = got
				}
				if _, err := c.FAA(ctx, a, 1<<32); err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			casFailures += c.Stats().CASFailures
			mu.Unlock()
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	var cas, faa uint64
	for _, a := range addrs {
		v, err := setup.FAA(ctx, a, 0)
		if err != nil {
			t.Fatal(err)
		}
		cas += v & (1<<32 - 1)
		faa += v >> 32
	}
	if want := uint64(goroutines * perG); cas != want || faa != want {
		t.Fatalf("CAS increments %d, FAA increments %d, want %d each", cas, faa, want)
	}
	st := p.Stats()
	if st.CASes-st.CASFailures != uint64(goroutines*perG) || st.CASFailures != casFailures {
		t.Fatalf("stats: %d CASes, %d failures (clients saw %d)", st.CASes, st.CASFailures, casFailures)
	}
	t.Logf("%d CAS failures under contention", casFailures)
}

// TestLocalWaitSignal plays ping-pong between two clients and checks that a
// permit sent before Wait is kept and that Close wakes a parked client.
func TestLocalWaitSignal(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, Config{})
	cn := p.NewComputeNode()
	ping, pong := cn.NewClient(), cn.NewClient()
	a, err := ping.Alloc(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	pingPong(t, p, ping, pong, a, 500)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}

	// A permit is kept, but only one.
	ping.Signal()
	ping.Signal()
	if err := ping.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := ping.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Wait after two Signals: %v", err)
	}

	// Close wakes a parked client.
	done := make(chan error)
	go func() { done <- pong.Wait(ctx) }()
	time.Sleep(10 * time.Millisecond) // let it park
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("parked Wait returned %v at Close", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a client parked")
	}
}
