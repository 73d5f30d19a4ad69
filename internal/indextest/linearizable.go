package indextest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dmindex/dmindex/remote"
)

// PartitionByKey returns a porcupine partition function that splits a
// history by the key that key reads from an operation's input, in the
// order the keys first appear: a key-value model is checked one key at a
// time.
func PartitionByKey(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := make(map[string][]porcupine.Operation)
		var order []string
		for _, op := range history {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, byKey[k])
		}
		return out
	}
}

// linModel is the sequential specification of one key (histories are
// partitioned by key): its state is a ver.
var linModel = porcupine.Model{
	Partition: PartitionByKey(func(in any) string { return in.(linInput).key }),
	Init:      func() any { return ver{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(ver), input.(linInput), output.(linOutput)
		switch in.kind {
		case linGet:
			return out.found == st.present && (!out.found || out.val == st.val), st
		case linPut:
			return true, ver{true, in.val}
		default: // linDelete
			return out.unknown || out.found == st.present, ver{}
		}
	},
	Equal: func(a, b any) bool { return a.(ver) == b.(ver) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		k := fmtKey([]byte(in.key))
		switch {
		case in.kind == linGet && !out.found:
			return fmt.Sprintf("get(%s) -> absent", k)
		case in.kind == linGet:
			return fmt.Sprintf("get(%s) -> %s", k, describeValue(out.val))
		case in.kind == linPut && out.unknown:
			return fmt.Sprintf("put(%s, %s) -> failed (maybe applied)", k, describeValue(in.val))
		case in.kind == linPut:
			return fmt.Sprintf("put(%s, %s)", k, describeValue(in.val))
		case out.unknown:
			return fmt.Sprintf("delete(%s) -> failed (maybe applied)", k)
		default:
			return fmt.Sprintf("delete(%s) -> %v", k, out.found)
		}
	},
	DescribeState: func(state any) string {
		st := state.(ver)
		if !st.present {
			return "absent"
		}
		return describeValue(st.val)
	},
}

// describeValue names a value made by makeValue by writer and sequence
// number.
func describeValue(v string) string {
	tag, ok := checkValue([]byte(v))
	if !ok {
		return fmt.Sprintf("garbage %s", fmtVal([]byte(v)))
	}
	w, seq := tagWriter(tag)
	return fmt.Sprintf("w%d#%d", w, seq)
}

// checkLinearizable checks a history of hot-key operations with porcupine.
// On a violation it writes the visualization to a temporary file and names
// it in the failure. A check that times out is logged, not failed.
func checkLinearizable(t testing.TB, history []porcupine.Operation, what string) {
	t.Helper()
	if len(history) == 0 {
		t.Errorf("%s: empty history", what)
		return
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 30*time.Second)
	t.Logf("%s: %d operations checked in %v: %v", what, len(history), time.Since(start).Round(time.Millisecond), res)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("%s: the linearizability check timed out; result unknown", what)
	default:
		f, err := os.CreateTemp("", "indextest-linearizability-*.html")
		if err == nil {
			err = porcupine.Visualize(linModel, info, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		path := f.Name()
		if err != nil {
			path = fmt.Sprintf("(visualization not written: %v)", err)
		}
		t.Errorf("%s: the history of %d operations is not linearizable; visualization: %s", what, len(history), path)
	}
}

// RunLinearizable records concurrent Get, Put and Delete calls on a few hot
// keys (some of them prefixes of others) from goroutines on several compute
// nodes and checks with porcupine that the history is linearizable (per
// key), in local mode (timestamps from a shared counter) and in the
// simulator in both ordering modes and in Skew mode (timestamps from the
// pool's virtual clock). Each run ends with a Get of every hot key and a full scan that must
// agree with it, and Verify.
func RunLinearizable(t *testing.T, tg Target) {
	checkTarget(t, tg)
	type mode struct {
		name      string
		sim       *simMode
		cns, per  int
		ops       int
		shortOps  int
		shortCNs  int
		shortPers int
	}
	modes := []mode{
		// Local mode runs real goroutines, which the scheduler can stall
		// mid-operation: at most 12 of them, so that no more than 12
		// operations overlap on a key (18 timed porcupine out now and then).
		{name: "local", cns: 3, per: 4, ops: 750, shortCNs: 2, shortPers: 4, shortOps: 150},
	}
	for i := range simModes {
		modes = append(modes, mode{name: "sim-" + simModes[i].name, sim: &simModes[i], cns: 2, per: 8, ops: 300,
			shortCNs: 2, shortPers: 6, shortOps: 50})
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			seed := seedFor(t)
			cns, per, ops := m.cns, m.per, m.ops
			if testing.Short() {
				cns, per, ops = m.shortCNs, m.shortPers, m.shortOps
			}
			var pool *remote.Pool
			var clock func() int64
			if m.sim != nil {
				pool = newPool(t, m.sim.config(seed))
				clock = func() int64 { return int64(pool.Now()) }
			} else {
				pool = newPool(t, tg.realConfig())
				var c atomic.Int64
				clock = func() int64 { return c.Add(1) }
			}
			w := &workload{tg: tg, perCN: per, ops: ops, ownKeys: 1, hot: 6, seed: seed, clock: clock, hotOnly: true}
			out := runMixed(t.Context(), tg, pool, idxName(t), w, cns)
			for _, p := range out.problems {
				t.Error(p)
			}
			t.Logf("%d operations, %d failed with ErrContention", out.ops, out.contention)
			checkLinearizable(t, out.history, fmt.Sprintf("%s, %d compute nodes × %d goroutines", m.name, cns, per))
		})
	}
}
