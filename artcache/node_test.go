package artcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestIndex16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := r.IntN(17)
		var keys [16]byte
		set := make([]byte, 0, n)
		for len(set) < n {
			if b := byte(r.IntN(256)); !slices.Contains(set, b) {
				set = append(set, b)
			}
		}
		slices.Sort(set)
		copy(keys[:], set)
		for b := range 256 {
			if got, want := index16(&keys, n, byte(b)), slices.Index(set, byte(b)); got != want {
				t.Fatalf("index16(%x, %d, %#x) = %d, want %d", keys, n, b, got, want)
			}
		}
	}
}
