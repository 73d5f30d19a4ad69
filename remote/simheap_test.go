package remote

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// eventQueue is what eventHeap and agenda have in common.
type eventQueue interface {
	push(event)
	pop() event
	len() int
}

func (h *eventHeap) len() int { return len(*h) }

// TestEventHeapOrder checks the event heap and the agenda against an oracle:
// interleaved pushes and pops, with many equal times, pop every event
// exactly once and in (at, seq) order among those present, with its fields
// intact. Pushes are at any time ("any") or, as in the simulator, never
// before the latest event popped ("forward"); the agenda's times span its
// wheel, its heap or both.
func TestEventHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	for _, tc := range []struct {
		name        string
		times, size int
		forward     bool
	}{
		{"ties", 4, 50, false},
		{"spread", 1 << 30, 50, false},
		{"large", 1000, 2000, false},
		{"forward/ties", 4, 50, true},
		{"forward/wheel", wheelSpan / 2, 300, true},
		{"forward/both", 3 * wheelSpan, 300, true},
		{"forward/far", 1 << 40, 300, true},
	} {
		for _, q := range []struct {
			name string
			q    eventQueue
		}{{"heap", new(eventHeap)}, {"agenda", new(agenda)}} {
			t.Run(tc.name+"/"+q.name, func(t *testing.T) { checkOrder(t, r, q.q, tc.times, tc.size, tc.forward) })
		}
	}
}

func checkOrder(t *testing.T, r *rand.Rand, q eventQueue, times, size int, forward bool) {
	var want []event // the oracle: the events queued
	var seq uint64
	var clock int64
	for range 20 * size {
		if len(want) == 0 || len(want) < size && r.IntN(2) == 0 {
			seq++
			at := int64(r.IntN(times))
			if forward {
				at += clock
			}
			e := event{at: at, seq: seq, ref: r.Int32(), line: r.Int32() - 1<<30,
				kind: evKind(1 + r.IntN(int(evStart)))}
			q.push(e)
			want = append(want, e)
			continue
		}
		i := 0
		for j := range want {
			if cmp.Or(cmp.Compare(want[j].at, want[i].at), cmp.Compare(want[j].seq, want[i].seq)) < 0 {
				i = j
			}
		}
		got := q.pop()
		if got != want[i] {
			t.Fatalf("pop = %+v, want %+v", got, want[i])
		}
		clock = got.at
		want = slices.Delete(want, i, i+1)
	}
	if q.len() != len(want) {
		t.Fatalf("queue holds %d events, want %d", q.len(), len(want))
	}
}

// BenchmarkEventHeap measures one pop and one push of the event heap and of
// the agenda in steady state: each popped event is replaced by one a
// pseudo-random time up to 4 µs later, as a simulation's verbs and wake-ups
// replace each other.
func BenchmarkEventHeap(b *testing.B) {
	for _, q := range []struct {
		name string
		new  func() eventQueue
	}{{"heap", func() eventQueue { return new(eventHeap) }}, {"agenda", func() eventQueue { return new(agenda) }}} {
		for _, size := range []int{64, 512, 4096} {
			b.Run(fmt.Sprintf("%s/events=%d", q.name, size), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				h := q.new()
				var seq uint64
				for range size {
					seq++
					h.push(event{at: int64(r.IntN(4e6)), seq: seq, kind: evDone})
				}
				b.ResetTimer()
				for range b.N {
					e := h.pop()
					seq++
					e.at, e.seq = e.at+int64(r.IntN(4e6)), seq
					h.push(e)
				}
			})
		}
	}
}
