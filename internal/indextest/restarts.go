package indextest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// RunRestarts checks that compute nodes which close an index hand on the
// memory they hold in their process (internal/depot): the unused rest of
// their chunks, and the objects they retired or freed and did not reuse.
// It runs one random workload twice on a simulated pool of two 4 MiB
// memory nodes (chunks of 64 KiB): once on a compute node that keeps the
// index open, once on a new compute node for each of its 24 cycles, which
// opens the index and closes it at the end of the cycle. In both runs a
// resident compute node keeps the index open and takes a quarter of the
// operations. A cycle runs 1,500 Puts (values of 8, 100 or 300 bytes, so
// that objects change size), Deletes and Gets, each checked against the
// oracle, over a key space that grows by 50 keys a cycle, so that the index
// allocates in every cycle. The restarting run may have the memory nodes
// hand out (Pool.MemoryUsed) at most two chunks more than the other, where
// a compute node that leaves with what it holds loses up to a chunk per
// memory node it allocated on, every cycle. In each run the index must then
// hold the oracle's pairs, and Verify must pass on the resident, and on
// the last compute node once the resident closed the index.
func RunRestarts(t *testing.T, tg Target) {
	checkTarget(t, tg)
	seed := seedFor(t)
	steady := runCycles(t, tg, seed, false)
	restarting := runCycles(t, tg, seed, true)
	t.Logf("bytes handed out: %d with one compute node, %d with a new one each cycle", steady, restarting)
	if restarting > steady+2*restartChunk {
		t.Errorf("compute nodes that close lose memory: %d bytes handed out with a new compute node each cycle, %d with one (%.1f KiB more a cycle)",
			restarting, steady, float64(restarting-steady)/restartCycles/1024)
	}
}

const (
	restartCycles = 24
	restartChunk  = 64 << 10
)

// runCycles runs RunRestarts' workload, with a new compute node for each
// cycle if restart, and returns the bytes the memory nodes handed out.
func runCycles(t *testing.T, tg Target, seed uint64, restart bool) uint64 {
	const (
		keys = 300
		grow = 50
		ops  = 1_500
		name = "indextest/restarts"
	)
	rng := newRand(seed)
	p := newPool(t, remote.Config{MemoryNodes: 2, NodeBytes: 4 << 20, ChunkBytes: restartChunk, Sim: &remote.SimConfig{Seed: seed}})
	ctx := t.Context()
	resident := tg.open(t, p.NewComputeNode(), name)
	o := newOracle()
	key := func(i int) []byte { return tg.fitKey(fmt.Appendf(nil, "restart-%05d", i)) }
	var idx index.Index
	for cycle := range restartCycles {
		if idx == nil {
			idx = tg.open(t, p.NewComputeNode(), name)
		}
		for op := range ops {
			on := idx
			if rng.IntN(4) == 0 {
				on = resident
			}
			k := key(rng.IntN(keys + grow*cycle))
			if err := restartStep(ctx, tg, on, o, rng, k, byte(op)); err != nil {
				t.Fatalf("restart %v, cycle %d, op %d: %v", restart, cycle, op, err)
			}
		}
		if restart && cycle < restartCycles-1 {
			if err := idx.Close(); err != nil {
				t.Fatalf("cycle %d: Close: %v", cycle, err)
			}
			idx = nil
		}
	}
	for i := range keys + grow*restartCycles {
		k := key(i)
		v, ok, err := idx.Get(ctx, k)
		want, wok := o.get(k)
		if err != nil || ok != wok || string(v) != want {
			t.Errorf("restart %v, at the end: Get(%q) = %d bytes, %v, %v; the oracle has %d bytes, %v", restart, k, len(v), ok, err, len(want), wok)
		}
	}
	tg.verify(t, ctx, resident, fmt.Sprintf("restart %v, on the resident compute node", restart))
	// Closed, the resident hands on what it holds: Verify checks that
	// none of it is in use.
	if err := resident.Close(); err != nil {
		t.Fatalf("restart %v: closing the resident compute node: %v", restart, err)
	}
	tg.verify(t, ctx, idx, fmt.Sprintf("restart %v, on the last compute node", restart))
	return memoryUsed(t, p)
}

// memoryUsed returns the bytes p's memory nodes handed out, together.
func memoryUsed(t *testing.T, p *remote.Pool) uint64 {
	t.Helper()
	u, err := p.MemoryUsed()
	if err != nil {
		t.Fatalf("MemoryUsed: %v", err)
	}
	var sum uint64
	for _, b := range u {
		sum += b
	}
	return sum
}

// RunProcessRestarts checks RunRestarts' hand-over across pools, the way
// processes that come and go share memory nodes over a transport
// (tg.Config: shm or tcp). It runs one workload of 10 cycles (6 with
// -short) twice, on
// indexes of their own: once in one pool that stays open, once opening a
// new pool for each cycle, and the index on a compute node of it, and
// closing both at the end of the cycle. A cycle runs 4 goroutines of
// random Puts, Deletes and Gets on keys of their own (checked against an
// oracle each), over key spaces that grow every cycle, so that the index
// allocates in every cycle. The restarting run may have the memory nodes
// hand out at most four chunks more than the other, where a pool that
// leaves with what its compute node holds loses up to a chunk per client
// and memory node, every cycle. Verify must pass at the end of each run.
func RunProcessRestarts(t *testing.T, tg Target) {
	checkTarget(t, tg)
	if tg.Config == nil {
		t.Fatal("indextest: RunProcessRestarts needs Target.Config")
	}
	cfg := *tg.Config
	seed := seedFor(t)
	monitor := newPool(t, cfg)
	before := memoryUsed(t, monitor)
	runProcessCycles(t, tg, monitor, seed, false)
	steady := memoryUsed(t, monitor) - before
	before = memoryUsed(t, monitor)
	runProcessCycles(t, tg, monitor, seed, true)
	restarting := memoryUsed(t, monitor) - before
	chunk := uint64(cfg.ChunkBytes)
	t.Logf("bytes handed out: %d with one pool, %d with a new pool each cycle", steady, restarting)
	if restarting > steady+4*chunk {
		t.Errorf("pools that close lose memory: %d bytes handed out with a new pool each cycle, %d with one", restarting, steady)
	}
}

// runProcessCycles runs RunProcessRestarts' workload on an index of its
// own, in a new pool for each cycle if restart, else in p.
func runProcessCycles(t *testing.T, tg Target, p *remote.Pool, seed uint64, restart bool) {
	const (
		workers = 4
		keys    = 50 // per worker, and as many more each cycle
	)
	cycles, ops := 10, 400
	if testing.Short() {
		cycles, ops = 6, 200
	}
	name := fmt.Sprintf("indextest/process-restarts-%v", restart)
	cfg := *tg.Config
	oracles := make([]*oracle, workers)
	for w := range oracles {
		oracles[w] = newOracle()
	}
	key := func(w, i int) []byte { return tg.fitKey(fmt.Appendf(nil, "proc-%d-%05d", w, i)) }
	ctx := t.Context()
	var idx index.Index
	for cycle := range cycles {
		if restart {
			var err error
			if p, err = remote.NewPool(cfg); err != nil {
				t.Fatalf("cycle %d: NewPool: %v", cycle, err)
			}
		}
		if idx == nil {
			var err error
			if idx, err = tg.Open(p.NewComputeNode(), name); err != nil {
				t.Fatalf("cycle %d: Open: %v", cycle, err)
			}
		}
		errs := make(chan error, workers)
		for w := range workers {
			go func() {
				rng := newRand(seed + uint64(cycle*workers+w))
				o := oracles[w]
				for op := range ops {
					k := key(w, rng.IntN(keys*(cycle+1)))
					if err := restartStep(ctx, tg, idx, o, rng, k, byte(op)); err != nil {
						errs <- fmt.Errorf("cycle %d: %w", cycle, err)
						return
					}
				}
				errs <- nil
			}()
		}
		var failed error
		for range workers {
			if err := <-errs; err != nil && failed == nil {
				failed = err
			}
		}
		if failed == nil && cycle == cycles-1 {
			tg.verify(t, ctx, idx, fmt.Sprintf("restart %v, after the last cycle", restart))
		}
		if restart || cycle == cycles-1 {
			if err := idx.Close(); err != nil && failed == nil {
				failed = fmt.Errorf("cycle %d: Close: %w", cycle, err)
			}
			idx = nil
		}
		if restart {
			p.Close()
		}
		if failed != nil {
			t.Fatalf("restart %v: %v", restart, failed)
		}
	}
}

// restartSizes are the value sizes of the restart workloads: objects are
// reused by size, so that more sizes take more cycles to settle.
var restartSizes = []int{8, 100, 300}

// restartStep runs one random operation of the restart workloads on idx
// for key k and checks it against o, which it updates: a Put half the
// time (a value of one of restartSizes, of bytes fill), a Delete three
// times in ten, else a Get. It returns what went wrong.
func restartStep(ctx context.Context, tg Target, idx index.Index, o *oracle, rng *rand.Rand, k []byte, fill byte) error {
	switch r := rng.IntN(10); {
	case r < 5:
		v := bytes.Repeat([]byte{fill}, tg.vlen(restartSizes[rng.IntN(len(restartSizes))]))
		if err := idx.Put(ctx, k, v); err != nil {
			return fmt.Errorf("Put(%q): %w", k, err)
		}
		o.put(k, v)
	case r < 8:
		found, err := idx.Delete(ctx, k)
		if want := o.del(k); err != nil || found != want {
			return fmt.Errorf("Delete(%q) = %v, %v; the oracle has it: %v", k, found, err, want)
		}
	default:
		v, ok, err := idx.Get(ctx, k)
		if want, wok := o.get(k); err != nil || ok != wok || string(v) != want {
			return fmt.Errorf("Get(%q) = %d bytes, %v, %v; the oracle has %d bytes, %v", k, len(v), ok, err, len(want), wok)
		}
	}
	return nil
}
