package remote

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// members lists the set's stripes in increasing order.
func (s *stripeSet) members() []int {
	var m []int
	if s.many == nil {
		for _, i := range s.few[:s.n] {
			m = append(m, int(i))
		}
		return m
	}
	for w, word := range s.many {
		for ; word != 0; word &= word - 1 {
			m = append(m, w*64+bits.TrailingZeros64(word))
		}
	}
	return m
}

// TestStripeSet checks a batch's stripe set against the stripes of every
// line its changing verbs touch, computed one by one, for random batches
// of one to six verbs over two memory nodes and both regions, from a
// single word to a range larger than all the stripes: the set holds each
// stripe once, in increasing order (the order batches lock them in).
func TestStripeSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	sizes := []uint64{1, 8, 64, 255, 256, 257, 2048, stripeCount << stripeShift}
	for range 2000 {
		var s stripeSet
		want := map[int]bool{}
		for range 1 + rng.IntN(6) {
			off := reservedBytes + rng.Uint64N(1<<20)
			a := MakeAddr(rng.IntN(2), off)
			if rng.IntN(4) == 0 {
				a = OnChip(a.MN(), off)
			}
			n := sizes[rng.IntN(len(sizes))]
			s.add(a, n)
			for line := a.Offset() >> stripeShift; line <= (a.Offset()+n-1)>>stripeShift; line++ {
				want[int(stripeOf(uint64(a)>>47, line))] = true
			}
		}
		got := s.members()
		if len(want) == stripeCount && s.many == nil {
			t.Fatal("a range over every stripe left the set in its short form")
		}
		wantList := make([]int, 0, len(want))
		for i := range want {
			wantList = append(wantList, i)
		}
		slices.Sort(wantList)
		if !slices.Equal(got, wantList) {
			t.Fatalf("stripes %v, want %v", got, wantList)
		}
	}
}
