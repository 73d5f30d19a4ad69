package indextest

import (
	"context"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// RunSim runs the battery's concurrent workloads in the deterministic
// simulator (remote.Config.Sim), in both ordering modes (remote.InOrder and
// remote.Strict) and in Strict with Skew (remote.SimConfig.Skew: verbs of
// one batch to different memory nodes land in either order), with hundreds
// of simulated clients (4 compute nodes × 64 goroutines; 4 × 32 under
// -short):
//
//   - mixed: the mixed workload (own key ranges checked exactly, reads of
//     other goroutines' keys, a stable range, hot keys checked by
//     linearizability), then a full scan against the expected contents and
//     Verify;
//   - empty-start: every client inserts into a freshly created index at
//     once;
//   - plain-goroutines: the mixed workload on fewer clients, every call
//     from a plain goroutine instead of one started by Pool.Go, as a user
//     who never calls Pool.Go would run it (not deterministic);
//   - determinism: the same seed run twice gives the same virtual end time,
//     the same remote.Stats, and the same final contents and history. It is
//     skipped while the pool's transport does not report "sim".
//
// Every call of the index but plain-goroutines' runs in a goroutine started
// by Pool.Go.
func RunSim(t *testing.T, tg Target) {
	checkTarget(t, tg)
	cns, per, ops := 4, 64, 120
	if testing.Short() {
		cns, per, ops = 4, 32, 25
	}
	for _, m := range simModes {
		t.Run("mixed-"+m.name, func(t *testing.T) {
			seed := seedFor(t)
			pool := newPool(t, m.config(seed))
			// The hot keys from one client in 16, each making 40% of its
			// operations there: the hot keys stay busy among hundreds of
			// clients, but no more than 16 operations (8 under -short)
			// overlap on one, which keeps the linearizability check
			// tractable.
			w := &workload{tg: tg, perCN: per, ops: ops, ownKeys: 12, hot: 8, hotPct: 40, hotEvery: 16, stable: 150, seed: seed,
				clock: func() int64 { return int64(pool.Now()) }}
			out := runMixed(t.Context(), tg, pool, "idx", w, cns)
			for _, p := range out.problems {
				t.Error(p)
			}
			t.Logf("%d clients, %d operations (%d failed with ErrContention), virtual time %v, %d round trips",
				cns*per, out.ops, out.contention, pool.Now(), out.stats.RoundTrips)
			checkLinearizable(t, out.history, "hot keys")
		})
		t.Run("empty-start-"+m.name, func(t *testing.T) {
			seed := seedFor(t)
			pool := newPool(t, m.config(seed))
			rounds := 3
			if testing.Short() {
				rounds = 1
			}
			for round := range rounds {
				for _, p := range stressEmpty(t.Context(), tg, pool, fmt.Sprintf("empty-%d", round), cns, per, 4) {
					t.Error(p)
				}
			}
		})
	}
	for _, m := range simModes {
		t.Run("plain-goroutines-"+m.name, func(t *testing.T) {
			seed := seedFor(t)
			pool := newPool(t, m.config(seed))
			w := &workload{tg: tg, perCN: 8, ops: ops, ownKeys: 8, hot: 4, hotPct: 10, stable: 40, seed: seed, plain: true,
				clock: func() int64 { return int64(pool.Now()) }}
			out := runMixed(t.Context(), tg, pool, "idx", w, 2)
			for _, p := range out.problems {
				t.Error(p)
			}
			checkLinearizable(t, out.history, "hot keys")
		})
	}
	t.Run("determinism", func(t *testing.T) {
		seed := seedFor(t)
		run := func() (mixedRun, string) {
			pool := newPool(t, simModes[1].config(seed))
			w := &workload{tg: tg, perCN: 16, ops: 30, ownKeys: 8, hot: 4, hotPct: 10, stable: 40, seed: seed,
				clock: func() int64 { return int64(pool.Now()) }}
			out := runMixed(t.Context(), tg, pool, "idx", w, 2)
			return out, pool.Report().Transport
		}
		a, transport := run()
		if transport != "sim" {
			t.Skipf("the pool's transport reports %q, not \"sim\": the simulator is not implemented yet", transport)
		}
		b, _ := run()
		for _, p := range append(a.problems, b.problems...) {
			t.Error(p)
		}
		if a.now != b.now {
			t.Errorf("same seed, different virtual end times: %d and %d ns", a.now, b.now)
		}
		if a.stats != b.stats {
			t.Errorf("same seed, different statistics:\n%+v\n%+v", a.stats, b.stats)
		}
		if a.digest != b.digest {
			t.Errorf("same seed, different final contents or operation histories (digests %#x and %#x)", a.digest, b.digest)
		}
	})
}

// stressEmpty opens a new index called name on cns new compute nodes of pool
// and has per goroutines on each insert keysPer keys of their own (all
// sharing their first byte, some prefixes of others) plus one key shared by
// everybody, all at once into the empty index; then it checks every key and
// runs Verify. Everything runs in goroutines started by pool.Go.
func stressEmpty(ctx context.Context, tg Target, pool *remote.Pool, name string, cns, per, keysPer int) []string {
	var problems []string
	idxs := make([]index.Index, cns)
	errs := make([]error, cns)
	for c := range cns {
		cn := pool.NewComputeNode()
		pool.Go(func() { idxs[c], errs[c] = tg.Open(cn, name) })
	}
	if err := pool.Wait(); err != nil {
		return []string{fmt.Sprintf("open: pool.Wait: %v", err)}
	}
	for c, err := range errs {
		if err != nil {
			problems = append(problems, fmt.Sprintf("Open(%q) on compute node %d: %v", name, c, err))
		}
	}
	if len(problems) > 0 {
		return problems
	}
	n := cns * per
	keyOf := func(g, j int) []byte {
		k := []byte{byte(g >> 8), byte(g)}
		if j > 0 {
			k = append(k, byte(j))
		}
		return tg.fitKey(k)
	}
	shared := tg.fitKey([]byte("\x00shared"))
	sharedID := 1<<20 - 1
	res := make([][]string, n)
	for g := range n {
		idx := idxs[g/per]
		pool.Go(func() {
			for j := range keysPer {
				k := keyOf(g, j)
				if err := idx.Put(ctx, k, makeValue(packTag(g*keysPer+j, g, 1), tg.vlen(8+j))); err != nil {
					res[g] = append(res[g], fmt.Sprintf("goroutine %d: Put(%s): %v", g, fmtKey(k), err))
					return
				}
				if j == 0 {
					if err := idx.Put(ctx, shared, makeValue(packTag(sharedID, g, 2), tg.vlen(16))); err != nil && !isContention(err) {
						res[g] = append(res[g], fmt.Sprintf("goroutine %d: Put(%s): %v", g, fmtKey(shared), err))
						return
					}
				}
			}
			for j := range keysPer {
				k := keyOf(g, j)
				v, found, err := idx.Get(ctx, k)
				if err != nil || !found || string(v) != string(makeValue(packTag(g*keysPer+j, g, 1), tg.vlen(8+j))) {
					res[g] = append(res[g], fmt.Sprintf("goroutine %d: Get(%s) of its own key = %s, %v, %v", g, fmtKey(k), fmtVal(v), found, err))
					return
				}
			}
		})
	}
	if err := pool.Wait(); err != nil {
		return []string{fmt.Sprintf("inserts: pool.Wait: %v", err)}
	}
	for _, r := range res {
		problems = append(problems, r...)
	}
	pool.Go(func() {
		idx := idxs[len(idxs)-1]
		o := newOracle()
		for g := range n {
			for j := range keysPer {
				o.put(keyOf(g, j), makeValue(packTag(g*keysPer+j, g, 1), tg.vlen(8+j)))
			}
		}
		v, found, err := idx.Get(ctx, shared)
		if tag, ok := checkValue(v); err != nil || !found || !ok || tagKey(tag) != sharedID {
			problems = append(problems, fmt.Sprintf("Get(%s) of the shared key = %s, %v, %v; want a value written to it", fmtKey(shared), fmtVal(v), found, err))
		} else {
			o.put(shared, v)
		}
		if p := scanN(ctx, idx, nil, nil, -1).problem(o.all()); p != "" {
			problems = append(problems, "full scan: "+p)
		}
		if err := tg.verifyErr(ctx, idxs[0]); err != nil {
			problems = append(problems, fmt.Sprintf("Verify: %v", err))
		}
		for _, idx := range idxs {
			idx.Close()
		}
	})
	if err := pool.Wait(); err != nil {
		problems = append(problems, fmt.Sprintf("check: pool.Wait: %v", err))
	}
	return problems
}
