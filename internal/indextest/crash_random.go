package indextest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// RunCrashRandom runs the battery's concurrent workloads in the simulator,
// in InOrder and Strict modes, while remote.Pool.InjectCrashes stops
// clients at random (at a rate meant to stop about 3% of the operations,
// 6% in the linearizable runs, estimated from the virtual time the preload
// took, and no more than one and a half times that many; the seed of the
// injection is the subtest's). An operation that returns an error wrapping remote.ErrCrashed
// has an unknown outcome:
//
//   - mixed: goroutines on several compute nodes (pool.Go) run the mixed
//     workload of RunSim: each checks its own keys exactly, tracking the
//     states each key may be in (a crashed Put or Delete may or may not have
//     taken effect, and may take effect after a later call observed the key
//     without it, when another client completes what it published; once an
//     acknowledged write replaced it, it can no longer show: acknowledged
//     writes are never lost); reads of other goroutines' keys
//     must return intact values written to them; the preloaded stable keys,
//     which nobody writes, must stay exact; the hot keys shared by everybody
//     are checked with porcupine, a crashed call's return time set to the
//     end of time (it may take effect at any point after its call, or
//     never). At the end, with injection stopped: Recover on every compute
//     node, a Get of every hot key (appended to the history), a full scan
//     against the goroutines' knowledge, and Verify.
//   - linearizable: short concurrent histories of Get, Put and Delete on a
//     few hot keys, checked with porcupine as above.
//
// Both also check that the compute nodes' Stats().Crashed add up to the
// crashes injected, that at most 5% of the operations failed with
// ErrContention (a crashed holder's lock must not stall the others), and
// that some operation did crash (or the run proved nothing; a run that
// injected no crash is made again with the next seed, at most
// faultAttempts times in all). Rerun a failure with the -seed it logs.
func RunCrashRandom(t *testing.T, tg Target) {
	checkTarget(t, tg)
	cns, per, ops := 3, 16, 80
	// Porcupine's search grows fast with operations whose response is at
	// the end of time: the linearizable histories stay short.
	lcns, lper, lops := 2, 4, 25
	if testing.Short() {
		cns, per, ops = 2, 8, 30
		lcns, lper, lops = 2, 4, 15
	}
	for _, m := range crashModes {
		t.Run("mixed-"+m.name, func(t *testing.T) {
			out, seed := runCrashing(t, m, func(pool *remote.Pool, seed uint64) mixedRun {
				w := &workload{tg: tg, perCN: per, ops: ops, ownKeys: 8, hot: 6, hotPct: 5, stable: 60, seed: seed,
					clock: func() int64 { return int64(pool.Now()) }, crashFrac: 0.03}
				return runMixed(t.Context(), tg, pool, "idx", w, cns)
			})
			if reportCrashRun(t, out, fmt.Sprintf("%s, %d compute nodes × %d goroutines, seed %#x", m.name, cns, per, seed)) {
				checkLinearizable(t, out.history, "hot keys under crashes")
			}
		})
		t.Run("linearizable-"+m.name, func(t *testing.T) {
			out, seed := runCrashing(t, m, func(pool *remote.Pool, seed uint64) mixedRun {
				w := &workload{tg: tg, perCN: lper, ops: lops, ownKeys: 1, hot: 4, stable: 20, hotOnly: true, seed: seed,
					clock: func() int64 { return int64(pool.Now()) }, crashFrac: 0.06}
				return runMixed(t.Context(), tg, pool, "idx", w, lcns)
			})
			if reportCrashRun(t, out, fmt.Sprintf("%s, %d compute nodes × %d goroutines, seed %#x", m.name, lcns, lper, seed)) {
				checkLinearizable(t, out.history, fmt.Sprintf("hot keys under crashes, %s", m.name))
			}
		})
	}
}

// faultAttempts is how many runs runInjected makes, each with the next
// seed, while a run injects no fault.
const faultAttempts = 3

// runInjected runs run on a new pool of mode m with the test's seed, and
// again with the next seeds while done reports that the run proved
// nothing (no fault was injected), at most faultAttempts times; it returns
// the last run and its seed. Faults come at exponential intervals, so a
// short run now and then draws none (in -short mode about one run in a
// thousand: Sherman's TestCrashBattery/span6/random/mixed-inorder with
// -seed=3273940474100741 drew its first crash after the 334 µs of virtual
// time its workload took; its span6/stalls/strict-pause-600µs under -race
// drew no stall); the runs stay a function of the test's seed.
func runInjected(t *testing.T, m simMode, run func(pool *remote.Pool, seed uint64) mixedRun, done func(mixedRun) bool) (mixedRun, uint64) {
	t.Helper()
	seed := seedFor(t)
	for attempt := 1; ; attempt++ {
		out := run(newPool(t, m.config(seed)), seed)
		if done(out) || attempt == faultAttempts {
			return out, seed
		}
		t.Logf("seed %#x injected no fault in %d operations: again with the next seed", seed, out.ops)
		seed++
	}
}

// runCrashing is runInjected until a run injects a crash.
func runCrashing(t *testing.T, m simMode, run func(pool *remote.Pool, seed uint64) mixedRun) (mixedRun, uint64) {
	t.Helper()
	return runInjected(t, m, run, func(out mixedRun) bool { return out.crashes > 0 })
}

// reportCrashRun reports the problems and counters of a crash run and
// whether it found none. The linearizability check is skipped after a
// failure: a history full of operations that returned ErrCrashed, each of
// which may take effect at any later time, can keep porcupine busy until
// its timeout.
func reportCrashRun(t *testing.T, out mixedRun, what string) bool {
	t.Helper()
	for _, p := range out.problems {
		t.Errorf("%s: %s", what, p)
	}
	t.Logf("%s: %d operations, %d returned ErrCrashed, %d ErrContention; %d crashes injected; Recover at the end recovered %d locks; stats: %v",
		what, out.ops, out.crashed, out.contention, out.crashes, out.recovered, out.idxStats)
	// A write combined into a crashed client's batch (write combining,
	// Stats.Combined) shares its unknown outcome, so it may return
	// ErrCrashed too; anything beyond that is a crashed client reused.
	if uint64(out.crashed) > out.crashes+out.idxStats.Combined {
		t.Errorf("%s: %d operations returned ErrCrashed, but only %d crashes were injected and %d writes combined: the index kept using a crashed client",
			what, out.crashed, out.crashes, out.idxStats.Combined)
	}
	if out.crashes == 0 || out.crashed == 0 {
		t.Errorf("%s: %d crashes injected, %d operations returned ErrCrashed: the run proved nothing", what, out.crashes, out.crashed)
	}
	if t.Failed() {
		t.Logf("%s: the linearizability check of the hot keys is skipped after these failures", what)
		return false
	}
	return true
}

// rateFor returns the rate (per second of virtual time) of a fault meant to
// hit about frac of the workload's operations, given that the preload of
// the stable keys, one Put after another, took d. The clients share the
// memory nodes' NICs, so it counts at most 8 of them as running at full
// speed (with more, each operation takes longer).
func (w *workload) rateFor(frac float64, d time.Duration) float64 {
	perOp := max(d, time.Microsecond) / time.Duration(max(len(w.stables), 1))
	clients := float64(min(len(w.idxs)*w.perCN, 8))
	return frac * clients / perOp.Seconds()
}

// recoverAll runs Recover on every compute node's index, with no operation
// running, and checks the Stats().Crashed of the indexes against the
// crashes injected. It records what it found in out.
func (w *workload) recoverAll(ctx context.Context, out *mixedRun) []string {
	var problems []string
	for c, idx := range w.idxs {
		rec, ok := idx.(index.Recoverer)
		if !ok {
			return append(problems, fmt.Sprintf("%s does not implement index.Recoverer", w.tg.Name))
		}
		n, err := rec.Recover(ctx)
		if err != nil {
			problems = append(problems, fmt.Sprintf("Recover on compute node %d: %v", c, err))
		}
		out.recovered += n
	}
	out.idxStats = sumStats(w.idxs...)
	if out.idxStats.Crashed != out.crashes {
		problems = append(problems, fmt.Sprintf("Stats().Crashed summed over the compute nodes = %d, but %d clients crashed", out.idxStats.Crashed, out.crashes))
	}
	return problems
}
