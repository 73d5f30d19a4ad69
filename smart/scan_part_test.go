package smart

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestScanIndexedPart checks scans that read only part of an indexed
// NODE_256 (scanner.part): the root here, whose children are leaves under
// most partial keys (so the cache cannot stand in for it), beside a
// NODE_256 with a compressed path (keys "pq" + b), which is read whole.
// Random scans (both directions, told their length or stopped, random
// bounds) match an oracle, also after another compute node added keys
// under partial keys the cached snapshot lacks and in the parts a scan has
// not read yet; a told scan of 10 pairs reads much less than the root's
// 2 KB of slots, and a part read updates the cached snapshot
// (rememberPart); Verify passes.
func TestScanIndexedPart(t *testing.T) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	opts := Options{ReclaimInterval: time.Hour}
	tr, p := newTree(t, remote.Config{MemoryNodes: 2}, opts)
	var keys [][]byte
	put := putter(t, &keys)
	for b := 1; b < 256; b++ {
		if b == 'p' || b >= 0xe0 && b < 0xe8 {
			continue
		}
		if b%7 == 0 { // a node under some partial keys
			put(tr, []byte{byte(b), 'a'})
			put(tr, []byte{byte(b), 'b'})
			continue
		}
		put(tr, []byte{byte(b), byte(r.IntN(256))}) // a leaf under most
	}
	for b := range 256 {
		put(tr, []byte{'p', 'q', byte(b), 'z'})
	}
	warm := func(x *Tree) {
		t.Helper()
		for _, k := range keys {
			if _, _, err := x.Get(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	warm(tr)
	// scan checks a scan of [lo, hi) against keys and returns the bytes
	// it read.
	scan := func(x *Tree, lo, hi []byte, n int, desc, told bool) uint64 {
		t.Helper()
		want := scanOracle(keys, lo, hi, n, desc)
		seq := x.Scan(ctx, lo, hi)
		switch {
		case desc && told:
			seq = x.ReverseScanLimit(ctx, lo, hi, n)
		case told:
			seq = x.ScanLimit(ctx, lo, hi, n)
		case desc:
			seq = x.ReverseScan(ctx, lo, hi)
		}
		before := x.cn.Stats().ReadBytes
		var got [][]byte
		for kv, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, kv.Key); n > 0 && len(got) == n {
				break
			}
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("scan [%x, %x) desc %v told %v of %d: got %d keys %x, want %d %x", lo, hi, desc, told, n, len(got), got, len(want), want)
		}
		return x.cn.Stats().ReadBytes - before
	}
	randKey := func() []byte {
		k := []byte{byte(r.IntN(256))}
		if r.IntN(2) == 0 {
			k = append(k, byte(r.IntN(256)))
		}
		if r.IntN(4) == 0 {
			k = []byte{'p', 'q', byte(r.IntN(256))}
		}
		return k
	}
	scans := func(x *Tree) {
		t.Helper()
		for range 300 {
			lo, hi := randKey(), randKey()
			if bytes.Compare(lo, hi) > 0 {
				lo, hi = hi, lo
			}
			if r.IntN(3) == 0 {
				hi = nil
			}
			scan(x, lo, hi, r.IntN(40), r.IntN(2) == 0, r.IntN(2) == 0)
		}
	}
	scans(tr)
	scan(tr, []byte{0x40}, nil, 10, false, true) // the root's snapshot is cached by now
	if got := scan(tr, []byte{0x40}, nil, 10, false, true); got >= 256*8 {
		t.Errorf("a told scan of 10 pairs read %d bytes: not a part of the root", got)
	}

	// Another compute node adds keys under partial keys the snapshot lacks
	// (0x00, 'p' + another byte) and under others.
	other, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	put(other, []byte{0x00, 'x'})
	put(other, []byte{0xe3, 'x'})
	put(other, []byte{0x70, 0x01})
	put(other, []byte{'p', 'q', 'q'})
	put(other, []byte{0xf0, 0xf0, 0xf0})
	for range 20 {
		if k := []byte{byte(r.IntN(256)), byte(r.IntN(256)), 'n'}; !slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) }) {
			put(other, k)
		}
	}
	b := appendEncoded(nil, []byte{0xe3, 'x'})[0] // a partial key of the root new to the snapshot
	if root, ok := tr.cache.Get(nil); !ok || len(root.Slots()) > int(b) && root.Slots()[b] != 0 {
		t.Fatalf("the root's snapshot is not cached, or already has slot %#02x", b)
	}
	scan(tr, []byte{0xe0}, nil, 3, false, true)
	if root, ok := tr.cache.Get(nil); !ok || len(root.Slots()) <= int(b) || root.Slots()[b] == 0 {
		t.Errorf("a scan that read the root's slot %#02x in part left the cached snapshot without it", b)
	}
	scans(tr)
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
