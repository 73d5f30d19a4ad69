package shmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/childtest"
	"github.com/dmindex/dmindex/internal/cputime"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// benchKeys is the number of keys of the benchmarks' trees.
const benchKeys = 1 << 16

// benchArg is the argument of TestBenchChild.
type benchArg struct {
	Index, Dir, Ctl, Op string
	N                   int // operations
	Seed                uint64
}

// benchDir returns a fresh directory for a benchmark's memory-node files,
// on tmpfs (/dev/shm) where the machine has one, removed at the end.
func benchDir(b *testing.B) string {
	b.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "dmindex-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// populate puts the ids [0, benchKeys) at version 1.
func populate(idx smart.Index) error {
	for id := range benchKeys {
		if err := idx.Put(context.Background(), keyOf(uint64(id)), valueOf(uint64(id), 1)); err != nil {
			return err
		}
	}
	return nil
}

// warm reads every key once, so that the compute node's cache holds the
// tree's inner levels before the measurement.
func warm(idx smart.Index) error {
	for id := range benchKeys {
		if _, _, err := idx.Get(context.Background(), keyOf(uint64(id))); err != nil {
			return err
		}
	}
	return nil
}

// benchLoop runs n Gets or Puts (updates) of uniformly random existing
// keys and returns how long they took.
func benchLoop(idx smart.Index, op string, n int, seed uint64) (time.Duration, error) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 7))
	start := time.Now()
	for i := range n {
		id := r.Uint64N(benchKeys)
		var err error
		var found bool
		switch op {
		case "get":
			_, found, err = idx.Get(ctx, keyOf(id))
			if err == nil && !found {
				err = fmt.Errorf("id %d not found", id)
			}
		case "put":
			err = idx.Put(ctx, keyOf(id), valueOf(id, 2+i%1000))
		default:
			err = fmt.Errorf("unknown op %q", op)
		}
		if err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// TestBenchChild is the second process of the two-process benchmarks: it
// opens the tree, warms its cache, says it is ready, waits for go, runs
// its share of operations and prints how long they took, in wall time and
// in CPU time.
func TestBenchChild(t *testing.T) {
	arg, ok := childtest.Arg()
	if !ok {
		t.Skip("run by BenchmarkShm")
	}
	var a benchArg
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		t.Fatal(err)
	}
	k, err := kindByName(a.Index)
	if err != nil {
		t.Fatal(err)
	}
	idx, _, closeTree, err := openTree(k, remote.Config{Shm: &remote.ShmConfig{Dir: a.Dir}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeTree()
	if err := warm(idx); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Signal(filepath.Join(a.Ctl, "ready")); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Await(childLimit, filepath.Join(a.Ctl, "go")); err != nil {
		t.Fatal(err)
	}
	cpu := cputime.Process()
	d, err := benchLoop(idx, a.Op, a.N, a.Seed)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ELAPSED %d %d\n", d.Nanoseconds(), (cputime.Process() - cpu).Nanoseconds())
}

// benchSetup is one way to run the benchmark.
type benchSetup struct {
	name       string
	shm        bool
	procs      int // processes, each with one goroutine (shm only)
	goroutines int // goroutines of this process
}

var benchSetups = []benchSetup{
	{name: "local/1proc-1g", goroutines: 1},
	{name: "local/1proc-2g", goroutines: 2},
	{name: "shm/1proc-1g", shm: true, goroutines: 1},
	{name: "shm/1proc-2g", shm: true, goroutines: 2},
	{name: "shm/2proc-1g", shm: true, procs: 2, goroutines: 1},
}

// BenchmarkShm measures Gets and Puts (updates) of uniformly random keys of
// a 64 Ki-key tree, on the local transport and on the shared-memory one,
// from one process (one or two goroutines) and from two processes (one
// goroutine each). Each worker runs b.N operations; ops/s is the total
// over the wall time of the slowest worker, and ns/op its inverse;
// ops/cpu-s is the total over the CPU time of every process involved (all
// threads), the figure that depends least on the other tenants of a
// shared machine.
func BenchmarkShm(b *testing.B) {
	for _, k := range kinds {
		for _, s := range benchSetups {
			for _, op := range []string{"get", "put"} {
				b.Run(k.name+"/"+s.name+"/"+op, func(b *testing.B) { benchShm(b, k, s, op) })
			}
		}
	}
}

func benchShm(b *testing.B, k indexKind, s benchSetup, op string) {
	cfg := remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30}
	dir := ""
	if s.shm {
		dir = benchDir(b)
		cfg.Shm = &remote.ShmConfig{Dir: dir}
	}
	idx, _, closeTree, err := openTree(k, cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer closeTree()
	if err := populate(idx); err != nil {
		b.Fatal(err)
	}
	if err := warm(idx); err != nil {
		b.Fatal(err)
	}
	var child *childtest.Child
	ctl := ""
	if s.procs > 1 {
		ctl = b.TempDir()
		arg, err := json.Marshal(benchArg{Index: k.name, Dir: dir, Ctl: ctl, Op: op, N: b.N, Seed: 99})
		if err != nil {
			b.Fatal(err)
		}
		child = childtest.Start(b, childtest.Options{Test: "TestBenchChild", Arg: string(arg), Timeout: 10 * time.Minute})
		if err := childtest.Await(childLimit, filepath.Join(ctl, "ready")); err != nil {
			b.Fatal(err)
		}
	}
	workers := max(s.procs, 1) * s.goroutines
	b.ResetTimer()
	if child != nil {
		if err := childtest.Signal(filepath.Join(ctl, "go")); err != nil {
			b.Fatal(err)
		}
	}
	start, cpu := time.Now(), cputime.Process()
	errs := make([]error, s.goroutines)
	var wg sync.WaitGroup
	for g := range s.goroutines {
		wg.Go(func() { _, errs[g] = benchLoop(idx, op, b.N, uint64(g)) })
	}
	wg.Wait()
	wall, cpuUsed := time.Since(start), cputime.Process()-cpu
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if child != nil {
		if err := child.Wait(); err != nil {
			b.Fatal(err)
		}
		lines := child.Lines("ELAPSED ")
		var childWall, childCPU time.Duration
		if len(lines) != 1 {
			b.Fatalf("child printed %q", child.Output())
		}
		if _, err := fmt.Sscanf(lines[0], "%d %d", &childWall, &childCPU); err != nil {
			b.Fatalf("child printed %q: %v", lines[0], err)
		}
		wall, cpuUsed = max(wall, childWall), cpuUsed+childCPU
	}
	b.StopTimer()
	ops := float64(workers) * float64(b.N)
	b.ReportMetric(ops/wall.Seconds(), "ops/s")
	b.ReportMetric(float64(wall.Nanoseconds())/ops, "ns/op")
	if cpuUsed > 0 {
		b.ReportMetric(ops/cpuUsed.Seconds(), "ops/cpu-s")
	}
}
