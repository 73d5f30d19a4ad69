package rdwc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"

	"github.com/anishathalye/porcupine"
)

// regInput is an operation on one key of the store: a write of a non-zero
// value, or a read.
type regInput struct {
	key   int
	write bool
	value uint64
}

// registerModel specifies the store: one register per key, 0 meaning absent.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return uint64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		return output.(uint64) == state.(uint64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("put(k%d, %#x)", in.key, in.value)
		}
		return fmt.Sprintf("get(k%d) -> %#x", in.key, output.(uint64))
	},
}

// TestLinearizable runs reads and writes of a few keys from several compute
// nodes (one of them without RDWC) and checks the history with porcupine.
func TestLinearizable(t *testing.T) {
	for _, c := range []struct {
		name  string
		sim   bool
		slots int
	}{
		{"local", false, 0},
		{"local/slots=2", false, 2},
		{"sim", true, 0},
	} {
		t.Run(c.name, func(t *testing.T) { checkLinearizable(t, c.sim, c.slots) })
	}
}

func checkLinearizable(t *testing.T, sim bool, slots int) {
	const (
		nodes   = 3
		clients = 4
		keys    = 3
	)
	ops := 150
	if testing.Short() {
		ops = 40
	}
	seed := testseed.Seed(t)
	pool := newPool(t, sim)
	st := newStore(t, pool, keys)
	var clock atomic.Int64
	histories := make([][]porcupine.Operation, nodes*clients)
	errs := make([]error, nodes*clients)
	tables := make([]*Table, nodes)
	for n := range nodes {
		// The last compute node runs without RDWC: its operations interleave
		// with the shared ones of the others.
		tables[n] = New(Options{Slots: slots, DisableReads: n == nodes-1, DisableWrites: n == nodes-1})
		cn := pool.NewComputeNode()
		for j := range clients {
			id := n*clients + j
			f := newFakeClient(st, cn.NewClient())
			f.hook = f.pause
			tab := tables[n]
			pool.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(id)))
				for s := range ops {
					in := regInput{key: rng.IntN(keys), write: rng.IntN(2) == 0}
					if in.write {
						in.value = uint64(id+1)<<32 | uint64(s+1)
					}
					op := porcupine.Operation{ClientId: id, Input: in, Call: clock.Add(1)}
					var out uint64
					var err error
					if in.write {
						err = f.Put(tab, in.key, binary.BigEndian.AppendUint64(nil, in.value))
					} else {
						var v []byte
						var found bool
						v, found, err = f.Get(tab, in.key)
						if found {
							out = binary.BigEndian.Uint64(v)
						}
					}
					op.Return, op.Output = clock.Add(1), out
					if err != nil {
						errs[id] = err
						return
					}
					histories[id] = append(histories[id], op)
				}
			})
		}
	}
	if err := pool.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var history []porcupine.Operation
	for _, h := range histories {
		history = append(history, h...)
	}
	var shared Stats
	for _, tab := range tables {
		shared = shared.add(tab.Stats())
	}
	t.Logf("%d operations (%s): %+v", len(history), pool.Report().Transport, shared)
	if shared.Delegated == 0 || shared.Combined == 0 {
		t.Errorf("nothing was delegated or combined: the history does not test RDWC")
	}
	if slots != 0 && shared.Collisions == 0 {
		t.Errorf("no collision with %d slots", slots)
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, time.Minute)
	if res != porcupine.Ok {
		path := "(none)"
		if f, err := os.CreateTemp("", "rdwc-history-*.html"); err == nil {
			_ = porcupine.Visualize(registerModel, info, f)
			f.Close()
			path = f.Name()
		}
		t.Fatalf("history is %s (seed %d); visualization: %s", res, seed, path)
	}
}

// TestHotKeyFewerVerbs: many clients of one compute node on one key issue
// fewer verbs per operation with RDWC than without.
func TestHotKeyFewerVerbs(t *testing.T) {
	for _, sim := range []bool{false, true} {
		for _, write := range []bool{false, true} {
			on := hotKeyVerbs(t, sim, write, Options{})
			off := hotKeyVerbs(t, sim, write, Options{DisableReads: true, DisableWrites: true})
			t.Logf("sim=%v write=%v: %.2f verbs/op with RDWC, %.2f without", sim, write, on, off)
			if off != 2 || on > 0.75*off {
				t.Errorf("sim=%v write=%v: %.2f verbs/op with RDWC, %.2f without", sim, write, on, off)
			}
		}
	}
}

// hotKeyVerbs runs 8 clients × 50 operations on one key and returns the
// verbs per operation. The root READ takes a while (the round trip in the
// simulator, a sleep otherwise), so that windows overlap.
func hotKeyVerbs(tb testing.TB, sim, write bool, opts Options) float64 {
	tb.Helper()
	const clients, ops = 8, 50
	pool := newPool(tb, sim)
	st := newStore(tb, pool, 1)
	tab := New(opts)
	cn := pool.NewComputeNode()
	errs := make(chan error, clients)
	for j := range clients {
		f := newFakeClient(st, cn.NewClient())
		if pool.Report().Transport != "sim" {
			f.hook = func(s stage) {
				if s == traversed {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}
		pool.Go(func() {
			v := val(uint64(j + 1))
			for range ops {
				var err error
				if write {
					err = f.Put(tab, 0, v)
				} else {
					_, _, err = f.Get(tab, 0)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	if err := pool.Wait(); err != nil {
		tb.Fatal(err)
	}
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return float64(cn.Stats().Verbs()) / (clients * ops)
}
