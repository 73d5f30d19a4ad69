package remote

import (
	"bytes"
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

// TestLocalBatchWhole checks that the local transport runs a batch that
// changes memory as a whole with respect to every other changing batch
// that overlaps it, as a NIC applies a posted batch, and checks a DoBy
// deadline after waiting for such a batch: a client's long WRITE is
// running when a second client writes both of its ends in one batch. The
// second batch must land entirely after the first (both ends are its own)
// or, past its deadline, not at all (both ends are the first's). Before,
// it landed in the middle of the first: the first's WRITE then overwrote
// one end and not the other, the tear a holder preempted during its WRITE
// left under a lock that had been taken over and freed
// (docs/recovery.md, "Stale writers").
func TestLocalBatchWhole(t *testing.T) {
	const size, end = 32 << 20, 4 << 10
	for _, tc := range []struct {
		name string
		by   time.Duration // the second batch's deadline after it starts; 0: Do
	}{{"do", 0}, {"do-by", 500 * time.Microsecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := newTestPool(t, Config{MemoryNodes: 1, NodeBytes: size + 1<<20})
			long, short := p.NewComputeNode().NewClient(), p.NewComputeNode().NewClient()
			a, err := long.Alloc(ctx, size)
			if err != nil {
				t.Fatal(err)
			}
			first, last := a, a.Add(size-end)
			late := 0
			for attempt := range 5 {
				fill := byte(2*attempt + 1)
				data, ends := bytes.Repeat([]byte{fill}, size), bytes.Repeat([]byte{fill + 1}, end)
				done := make(chan error, 1)
				go func() { done <- long.Write(ctx, a, data) }()
				word := make([]byte, 8)
				for word[0] != fill { // the long WRITE is running
					if err := short.Read(ctx, first, word); err != nil {
						t.Fatal(err)
					}
				}
				batch := []Op{Write(first, ends), Write(last, ends)}
				if tc.by == 0 {
					err = short.Do(ctx, batch)
				} else {
					err = short.DoBy(ctx, batch, short.Now()+tc.by)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				got := make([]byte, 2)
				for i, at := range []Addr{first, last} {
					if err := short.Read(ctx, at, got[i:i+1]); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case err == nil && got[0] == fill+1 && got[1] == fill+1:
				case errors.Is(err, ErrLate) && tc.by != 0 && got[0] == fill && got[1] == fill:
					late++
				default:
					t.Fatalf("attempt %d: second batch returned %v; its ends read %#x and %#x (its own %#x, the long WRITE's %#x)",
						attempt, err, got[0], got[1], fill+1, fill)
				}
			}
			if tc.by != 0 && late == 0 {
				t.Fatal("no second batch waited past its deadline: the run does not exercise the check under the stripes")
			}
		})
	}
}
