//go:build fabric

package fabric

import (
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestFences forces the ordering a provider advertises (sockets orders
// everything, so the test lowers it) and checks which operations of a round
// carry FI_FENCE, then that batches stay correct with those fences.
func TestFences(t *testing.T) {
	s, mem := startServer(t, 4096)
	r := s.Regions()[0]
	const all = orderRAW | orderWAR | orderWAW
	const verbs = orderRAW | orderWAW // no write after read
	tests := []struct {
		name    string
		order   uint64
		rawSize uint64 // max_order_raw_size (0: keep the provider's)
		kinds   []OpKind
		lens    []int // READ/WRITE sizes (default 8)
		fenced  []bool
	}{
		{"everything-ordered", all, 0, []OpKind{OpWrite, OpRead, OpCAS, OpWrite, OpFAA}, nil,
			[]bool{false, false, false, false, false}},
		{"nothing-ordered", 0, 0, []OpKind{OpRead, OpRead, OpWrite, OpCAS, OpRead}, nil,
			[]bool{false, false, true, true, true}},
		{"verbs-order", verbs, 0, []OpKind{OpRead, OpWrite, OpRead, OpCAS, OpFAA, OpWrite, OpWrite, OpRead}, nil,
			[]bool{false, true, false, true, true, true, false, false}},
		{"reads-commute", 0, 0, []OpKind{OpRead, OpRead, OpRead}, nil,
			[]bool{false, false, false}},
		{"raw-size-exceeded", all, 64, []OpKind{OpWrite, OpRead, OpRead, OpWrite}, []int{32, 32, 128, 8},
			[]bool{false, false, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.Addr())
			c.setOrdering(tc.order, tc.rawSize)
			ops := make([]Op, len(tc.kinds))
			for i, k := range tc.kinds {
				n := 8
				if tc.lens != nil {
					n = tc.lens[i]
				}
				ops[i] = Op{Kind: k, Region: r, Off: 8 * uint64(i), Buf: make([]byte, n), Swap: 1}
				if k == OpCAS || k == OpFAA {
					ops[i].Buf = nil
				}
			}
			if err := c.Do(ops); err != nil {
				t.Fatal(err)
			}
			got := make([]bool, len(ops))
			for i := range got {
				got[i] = c.ops[i].fenced != 0
			}
			if !slices.Equal(got, tc.fenced) {
				t.Errorf("fenced %v, want %v", got, tc.fenced)
			}
			checkAgainstModel(t, c, r, mem[0], testseed.Seed(t), []int{7, 64})
		})
	}
}
