package sherman

import (
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// simPool returns a simulated pool of two memory nodes.
func simPool(t *testing.T, o remote.Ordering, seed uint64) *remote.Pool {
	return newPool(t, remote.Config{MemoryNodes: 2, Sim: &remote.SimConfig{Ordering: o, Seed: seed}})
}

var orderings = []remote.Ordering{remote.InOrder, remote.Strict}

// TestSimSmallPages runs the battery's simulated workloads
// (indextest.RunSim: hundreds of clients, both orderings and Skew) with
// eight-entry pages, so that splits race under torn reads.
func TestSimSmallPages(t *testing.T) {
	indextest.RunSim(t, contractTarget("sherman-span8", Options{Span: 8, KeySize: 16, ValueSize: 16}))
}

// TestSimHotKeys concentrates hundreds of clients on a few leaves, so that
// torn reads (in strict mode), lock contention and hand-overs are frequent,
// with and without RDWC.
func TestSimHotKeys(t *testing.T) {
	for _, c := range []struct {
		o    remote.Ordering
		rdwc bool
	}{{remote.InOrder, false}, {remote.Strict, false}, {remote.InOrder, true}, {remote.Strict, true}} {
		o := c.o
		t.Run(fmt.Sprintf("%v-rdwc=%v", o, c.rdwc), func(t *testing.T) {
			seed := testseed.Seed(t)
			w := ownedWorkload{cns: 4, clients: 50, ops: 40, space: 200, opts: Options{Span: 16, RDWC: c.rdwc}}
			if testing.Short() {
				w.ops = 15
			}
			p := simPool(t, o, seed)
			trees := w.run(t, p, seed)
			st := sumStats(trees)
			if c.rdwc && st.Delegated+st.Combined == 0 {
				t.Errorf("RDWC shared nothing: %+v", st)
			}
			if st.HandOvers == 0 {
				t.Errorf("no local hand-over under contention: %+v", st)
			}
			if o == remote.Strict && st.TornReads == 0 {
				t.Logf("no torn read observed: %+v", st)
			}
			t.Logf("virtual time %v, %+v", p.Report().Elapsed, st)
		})
	}
}

func TestSimSmallTreeStress(t *testing.T) {
	for _, o := range orderings {
		t.Run(o.String(), func(t *testing.T) {
			per := 20
			if testing.Short() {
				per = 8
			}
			smallTreeStress(t, simPool(t, o, testseed.Seed(t)), 4, 4, 64, per)
		})
	}
}

func TestSimScan(t *testing.T) {
	for _, o := range orderings {
		t.Run(o.String(), func(t *testing.T) {
			seed := testseed.Seed(t)
			scanUnderChurn(t, simPool(t, o, seed), seed, 4, 32, 16)
		})
	}
}

// TestSimDeterministic runs one workload twice with one seed and expects
// identical statistics and virtual end time.
func TestSimDeterministic(t *testing.T) {
	seed := testseed.Seed(t)
	run := func() string {
		p := simPool(t, remote.Strict, seed)
		w := ownedWorkload{cns: 2, clients: 16, ops: 30, space: 500, opts: Options{Span: 6}}
		w.run(t, p, seed)
		return fmt.Sprintf("%+v %v", p.Stats(), p.Report().Elapsed)
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same seed, different runs:\n%s\n%s", a, b)
	}
}
