package indextest

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// RunStalls runs the mixed workload of RunSim in the simulator while
// remote.Pool.InjectStalls pauses clients at random right before they post
// a batch (about 2% of the operations, at most 3%; the seed of the
// injection is the subtest's), in each ordering mode, with pauses of 0.6 and of 1.5 times
// the index's lease (Target.Lease): a paused client is a compute node that
// the others may judge dead and act against (take its locks over, undo or
// finish what it flagged, reuse memory it still names) while a verb it
// decided on before the pause is still to be posted. docs/recovery.md
// ("Stale writers") gives the protocol's answer: what a client posts after
// such a check leaves by a deadline or not at all.
//
// A stall changes no outcome, so everything is checked exactly, as in
// RunSim's mixed workload: each goroutine's own keys, intact values of the
// others', the stable keys, the hot keys with porcupine, at most 5% of the
// operations failing with ErrContention, a final full scan and Verify. The
// run must have stalled some client, or it proved nothing. It needs a
// target whose indexes use a short lease and skips otherwise; everything
// runs in goroutines started by Pool.Go, so the -seed a failure logs
// repeats it exactly.
func RunStalls(t *testing.T, tg Target) {
	checkTarget(t, tg)
	if tg.Lease <= 0 {
		t.Skipf("%s: Target.Lease is zero: the index offers no option for a short lease, which RunStalls needs", tg.Name)
	}
	cns, per, ops := 3, 16, 80
	if testing.Short() {
		cns, per, ops = 2, 8, 30
	}
	for _, m := range simModes {
		for _, leases := range []float64{0.6, 1.5} {
			pause := time.Duration(leases * float64(tg.Lease))
			t.Run(fmt.Sprintf("%s-pause-%v", m.name, pause), func(t *testing.T) {
				// A run that failed is reported, whether it stalled or not.
				out, seed := runInjected(t, m, func(pool *remote.Pool, seed uint64) mixedRun {
					w := &workload{tg: tg, perCN: per, ops: ops, ownKeys: 8, hot: 6, hotPct: 5, stable: 60, seed: seed,
						clock: func() int64 { return int64(pool.Now()) }, stallFrac: 0.02, stallPause: pause}
					return runMixed(t.Context(), tg, pool, "idx", w, cns)
				}, func(out mixedRun) bool { return out.stalls > 0 || len(out.problems) > 0 })
				for _, p := range out.problems {
					t.Errorf("%s, pauses of %v, seed %#x: %s", m.name, pause, seed, p)
				}
				t.Logf("%d compute nodes × %d goroutines, %d operations (%d failed with ErrContention), %d stalls of %v, virtual time %v",
					cns, per, out.ops, out.contention, out.stalls, pause, time.Duration(out.now))
				if out.stalls == 0 {
					t.Errorf("no client stalled in %d operations: the run proved nothing", out.ops)
				}
				if !t.Failed() {
					checkLinearizable(t, out.history, "hot keys with stalls")
				}
			})
		}
	}
}
