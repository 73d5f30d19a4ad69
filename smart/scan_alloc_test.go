package smart_test

import (
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// TestScanAllocs: a scan of 100 pairs that its caller ranges over directly
// on a *smart.Tree allocates one object, the arena holding the yielded
// pairs (which the caller owns): the session keeps the scanner and its
// buffers, and the iterator's closure stays on the caller's stack. Through
// the smart.Index interface the iterator's closure and the caller's loop
// body escape (4 in all; the Scan100 benchmark reports 5 with its key).
func TestScanAllocs(t *testing.T) {
	ctx := t.Context()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := smart.Open(p.NewComputeNode(), smart.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		k := binary.BigEndian.AppendUint64(nil, uint64(i)*7919)
		if err := tr.Put(ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	lo := binary.BigEndian.AppendUint64(nil, 0)
	pairs := 0
	direct := testing.AllocsPerRun(100, func() {
		pairs = 0
		for _, err := range tr.Scan(ctx, lo, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if pairs++; pairs == 100 {
				break
			}
		}
	})
	if pairs != 100 || direct != 1 {
		t.Errorf("a scan of %d pairs allocates %v objects, want 100 pairs and 1", pairs, direct)
	}
	indexes := []smart.Index{tr}
	viaIndex := testing.AllocsPerRun(100, func() {
		pairs = 0
		for _, err := range indexes[0].Scan(ctx, lo, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if pairs++; pairs == 100 {
				break
			}
		}
	})
	if pairs != 100 || viaIndex > 4 {
		t.Errorf("through smart.Index, a scan of %d pairs allocates %v objects, want 100 pairs and at most 4", pairs, viaIndex)
	}
}
