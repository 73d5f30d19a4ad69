package smart

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestInsideBounds checks the promise a scan takes a leaf's pair on
// without comparing its key with the range (entry.inside), and that
// childBounds keeps every child that holds a key of the range (the upper
// bound's last byte included, whose child a scan no longer reads): for random
// ranges and keys, and every prefix path of a key's encoding that a scan
// would descend (overlaps), a next byte b that insideBounds(path) puts
// strictly inside means the key lies in the range. Keys are drawn near the
// bounds (sharing a random prefix of one, then diverging), where an
// off-by-one in the bounds would show; it also checks that some keys
// strictly inside are found, so that the check cannot pass vacuously.
func TestInsideBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	randKey := func(near []byte) []byte {
		var k []byte
		if near != nil && r.IntN(4) > 0 {
			k = append(k, near[:r.IntN(len(near)+1)]...)
			if r.IntN(2) == 0 && len(k) < len(near) {
				k = append(k, near[len(k)]+byte(r.IntN(3))-1) // a byte next to the bound's
			}
		}
		for n := r.IntN(4); n > 0; n-- {
			k = append(k, byte(r.IntN(4))) // small bytes: 0 needs escaping
		}
		return k
	}
	inside, checked, cut := 0, 0, 0
	for range 20000 {
		lo := randKey(nil)
		var hi []byte
		if r.IntN(4) > 0 {
			hi = randKey(lo)
		}
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			lo, hi = hi, lo
		}
		if hi != nil && bytes.Equal(lo, hi) {
			continue
		}
		sc := &scanner{lo: lo, hi: hi, elo: appendEncoded(nil, lo)}
		if hi != nil {
			sc.ehi = appendEncoded(nil, hi)
		}
		near := lo
		if hi != nil && r.IntN(2) == 0 {
			near = hi
		}
		key := randKey(near)
		ek := appendEncoded(nil, key)
		for n := range len(ek) {
			path := ek[:n]
			if !sc.overlaps(path) {
				break // a scan descends no further
			}
			checked++
			// childBounds keeps the byte of every key in the range.
			first, last := sc.childBounds(path)
			if b := int(ek[n]); sc.inRange(key) && (b < first || b > last) {
				t.Fatalf("key %x (encoded %x) in [%x, %x) under path %x + %#02x, outside childBounds %d..%d",
					key, ek, lo, hi, path, b, first, last)
			}
			if n := len(path); len(sc.ehi) == n+2 && sc.ehi[n+1] == 0 && int(ek[n]) == int(sc.ehi[n]) {
				cut++ // a child the terminator rule leaves out
			}
			above, below := sc.insideBounds(path)
			if b := int(ek[n]); above < b && b < below {
				inside++
				if !sc.inRange(key) {
					t.Fatalf("key %x (encoded %x) under path %x + %#02x, taken for inside [%x, %x) (above %d, below %d), is out of range",
						key, ek, path, b, lo, hi, above, below)
				}
			}
		}
	}
	if inside < checked/10 {
		t.Fatalf("only %d of %d prefixes strictly inside: the test does not exercise insideBounds", inside, checked)
	}
	if cut < 100 {
		t.Fatalf("only %d keys under a child that ends the upper bound: the test does not exercise childBounds", cut)
	}
}
