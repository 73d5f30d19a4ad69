package sherman

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dmindex/dmindex/remote"
)

// kvInput is one operation of a linearizability history.
type kvInput struct {
	op    byte // 'g'et, 'p'ut, 'd'elete
	key   string
	value string
}

// kvOutput is its result.
type kvOutput struct {
	value string
	found bool
}

// kvModel is a map whose partitions are single keys; the state of a
// partition is the key's value ("" plus absent is encoded as nil).
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return (*string)(nil) },
	Step: func(state, input, output any) (bool, any) {
		st := state.(*string)
		in, out := input.(kvInput), output.(kvOutput)
		switch in.op {
		case 'g':
			if st == nil {
				return !out.found, st
			}
			return out.found && out.value == *st, st
		case 'p':
			v := in.value
			return true, &v
		default:
			return out.found == (st != nil), (*string)(nil)
		}
	},
	Equal: func(a, b any) bool {
		x, y := a.(*string), b.(*string)
		return x == y || x != nil && y != nil && *x == *y
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		return fmt.Sprintf("%c(%x, %x) -> %x %v", in.op, in.key, in.value, out.value, out.found)
	},
}

// linearizability runs clients doing Get/Put/Delete on a few keys through
// several compute nodes and checks the history with porcupine. Operations
// are stamped before the call and after the return with a global counter in
// local mode (real-time order) and with the pool's virtual clock in the
// simulator, where one client runs at a time and virtual time never goes
// back.
func linearizability(t *testing.T, p *remote.Pool, seed uint64, cns, clients, ops int, opts Options) {
	ctx := context.Background()
	trees := make([]*Tree, cns)
	for i := range trees {
		trees[i] = openTree(t, p, opts)
	}
	var counter atomic.Int64
	clock := func() int64 {
		if p.Simulated() {
			return int64(p.Now())
		}
		return counter.Add(1)
	}
	var mu sync.Mutex
	var history []porcupine.Operation
	var failed atomic.Pointer[error]
	keys := [][]byte{[]byte("a"), []byte("a\x00"), []byte("b"), ikey(7), ikey(8), []byte("c"), {0}, {0, 0}}
	for id := range cns * clients {
		tr := trees[id%cns]
		r := rand.New(rand.NewPCG(seed, uint64(id)))
		p.Go(func() {
			for i := range ops {
				k := keys[r.IntN(len(keys))]
				in := kvInput{key: string(k)}
				var out kvOutput
				var err error
				call := clock()
				switch x := r.IntN(10); {
				case x < 4:
					in.op = 'g'
					var v []byte
					v, out.found, err = tr.Get(ctx, k)
					out.value = string(v)
				case x < 8:
					in.op = 'p'
					in.value = fmt.Sprintf("%d.%d", id, i)
					err = tr.Put(ctx, k, []byte(in.value))
				default:
					in.op = 'd'
					out.found, err = tr.Delete(ctx, k)
				}
				ret := clock()
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, 30*time.Second)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("sherman-linearizability-%d.html", seed))
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("history visualization: %s", path)
		}
		t.Fatalf("history of %d operations is %v", len(history), res)
	}
	verify(t, trees[0])
}

func TestLinearizable(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprint("rdwc=", shared), func(t *testing.T) {
			p := newPool(t, remote.Config{MemoryNodes: 2})
			linearizability(t, p, testSeed(t), 3, 4, 300, Options{Span: 4, ValueSize: 16, RDWC: shared})
		})
	}
}
