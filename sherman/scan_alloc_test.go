package sherman

import (
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestScanAllocs: a session keeps its scanner, whose buffers (the bounds'
// copies among them) serve its next scan, so a scan of 100 pairs in steady
// state allocates what it yields (a key and a value per pair, in one
// arena or not) and little else, with bounds or without, forward or
// backward.
func TestScanAllocs(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, remote.Config{})
	tr := openTree(t, p, Options{KeySize: 8, ValueSize: 8})
	for i := range uint64(1000) {
		if err := tr.Put(ctx, ikey(i*7919), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi := ikey(0), ikey(1000*7919)
	for _, tc := range []struct {
		name   string
		lo, hi []byte
		desc   bool
	}{
		{"forward", lo, nil, false},
		{"forward bounded", lo, hi, false},
		{"reverse", nil, nil, true},
		{"reverse bounded", lo, hi, true},
	} {
		pairs := 0
		allocs := testing.AllocsPerRun(100, func() {
			pairs = 0
			for _, err := range tr.scan(ctx, tc.lo, tc.hi, tc.desc, 0) {
				if err != nil {
					t.Fatal(err)
				}
				if pairs++; pairs == 100 {
					break
				}
			}
		})
		// Two objects per pair (its key and its value, which the caller
		// owns) and a few more: 205 forward and 203 backward before the
		// scanner copied the bounds, as after.
		want := 2*100 + 5
		if tc.desc {
			want = 2*100 + 3
		}
		if pairs != 100 || allocs > float64(want) {
			t.Errorf("%s: a scan of %d pairs allocates %v objects, want 100 pairs and at most %d", tc.name, pairs, allocs, want)
		}
	}
}
