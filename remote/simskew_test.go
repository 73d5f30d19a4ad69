package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestSimSkew checks what Skew mode changes: a writer repeats the batch
// [WRITE data = i, WRITE flag = i] (the flag publishes the data) while a
// reader reads the flag, then the data in its next round trip. Data older
// than the flag it was published by is a reorder inside the writer's batch.
// With the data and the flag on different memory nodes, reorders appear in
// Skew mode and never without it; on one memory node they never appear.
func TestSimSkew(t *testing.T) {
	seed := testseed.Seed(t)
	tests := []struct {
		name     string
		skew     time.Duration
		sameNode bool
		reorders bool
	}{
		{"two-nodes/no-skew", 0, false, false},
		{"two-nodes/skew", 20 * time.Microsecond, false, true},
		{"one-node/skew", 20 * time.Microsecond, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim := simConfig(InOrder, seed)
			sim.Skew = tc.skew
			n := skewReorders(t, sim, tc.sameNode)
			t.Logf("%d reorders", n)
			if got := n > 0; got != tc.reorders {
				t.Fatalf("%d reorders observed, want reorders: %v", n, tc.reorders)
			}
		})
	}
}

// skewReorders runs the writer and the reader of TestSimSkew and returns how
// often the reader saw the flag ahead of the data.
func skewReorders(t *testing.T, sim *SimConfig, sameNode bool) int {
	ctx := context.Background()
	p := newTestPool(t, Config{MemoryNodes: 2, Sim: sim})
	cn := p.NewComputeNode()
	w, r := cn.NewClient(), cn.NewClient()
	data, err := w.AllocOn(ctx, 1, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	flagMN := 0
	if sameNode {
		flagMN = 1
	}
	flag, err := w.AllocOn(ctx, flagMN, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 300
	var done atomic.Bool
	reorders := 0
	p.Go(func() {
		defer done.Store(true)
		var d, f [8]byte
		for i := range uint64(rounds) {
			binary.LittleEndian.PutUint64(d[:], i+1)
			binary.LittleEndian.PutUint64(f[:], i+1)
			if err := w.Do(ctx, []Op{Write(data, d[:]), Write(flag, f[:])}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	p.Go(func() {
		var b [8]byte
		for !done.Load() {
			if err := r.Read(ctx, flag, b[:]); err != nil {
				t.Error(err)
				return
			}
			f := binary.LittleEndian.Uint64(b[:])
			if err := r.Read(ctx, data, b[:]); err != nil {
				t.Error(err)
				return
			}
			if binary.LittleEndian.Uint64(b[:]) < f {
				reorders++
			}
		}
	})
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return reorders
}

// TestSimSkewDeterminism checks that Skew mode is deterministic and that it
// really changes the run.
func TestSimSkewDeterminism(t *testing.T) {
	seed := testseed.Seed(t)
	skewed := func() *SimConfig {
		sim := simConfig(Strict, seed)
		sim.Skew = 5 * time.Microsecond
		return sim
	}
	a := simFingerprint(t, skewed(), seed)
	if b := simFingerprint(t, skewed(), seed); a != b {
		t.Fatalf("two runs with Skew and seed %d differ:\n%s\n---\n%s", seed, a, b)
	}
	if c := simFingerprint(t, simConfig(Strict, seed), seed); a == c {
		t.Fatal("Skew did not change the run")
	}
}

func TestSimSkewInvalid(t *testing.T) {
	sim := simConfig(InOrder, 1)
	sim.Skew = -time.Nanosecond
	if _, err := NewPool(Config{Sim: sim}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("negative Skew: %v, want ErrBadRequest", err)
	}
}
