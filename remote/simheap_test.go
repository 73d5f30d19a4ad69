package remote

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestEventHeapOrder checks the agenda against an oracle: interleaved pushes
// and pops, with many equal times, pop every event exactly once and in
// (at, seq) order among those present, with its fields intact.
func TestEventHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	for _, tc := range []struct {
		name        string
		times, size int
	}{
		{"ties", 4, 50},
		{"spread", 1 << 30, 50},
		{"large", 1000, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h eventHeap
			var want []event // the oracle: the events in the heap
			var seq uint64
			for range 20 * tc.size {
				if len(want) == 0 || len(want) < tc.size && r.IntN(2) == 0 {
					seq++
					e := event{at: int64(r.IntN(tc.times)), seq: seq, ref: r.Int32(), line: r.Int32() - 1<<30,
						kind: evKind(1 + r.IntN(int(evStart)))}
					h.push(e)
					want = append(want, e)
					continue
				}
				i := 0
				for j := range want {
					if cmp.Or(cmp.Compare(want[j].at, want[i].at), cmp.Compare(want[j].seq, want[i].seq)) < 0 {
						i = j
					}
				}
				if got := h.pop(); got != want[i] {
					t.Fatalf("pop = %+v, want %+v", got, want[i])
				}
				want = slices.Delete(want, i, i+1)
			}
			if len(h) != len(want) {
				t.Fatalf("heap holds %d events, want %d", len(h), len(want))
			}
		})
	}
}

// BenchmarkEventHeap measures one pop and one push of the agenda in steady
// state: each popped event is replaced by one a pseudo-random time later, as
// a simulation's verbs and wake-ups replace each other.
func BenchmarkEventHeap(b *testing.B) {
	for _, size := range []int{64, 512, 4096} {
		b.Run(fmt.Sprintf("events=%d", size), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var h eventHeap
			var seq uint64
			for range size {
				seq++
				h.push(event{at: int64(r.IntN(1e6)), seq: seq, kind: evDone})
			}
			b.ResetTimer()
			for range b.N {
				e := h.pop()
				seq++
				e.at, e.seq = e.at+int64(r.IntN(1e6)), seq
				h.push(e)
			}
		})
	}
}
