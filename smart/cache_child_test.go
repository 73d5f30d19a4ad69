package smart

import (
	"context"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestSmallNodeInParentEntry checks that a node of few slots is cached
// inside its parent's entry rather than as an entry of its own, and that a
// search through it still starts at its slot: one round trip, the leaf's
// READ. With Options.PaperNodes the node keeps an entry of its own.
func TestSmallNodeInParentEntry(t *testing.T) {
	for _, paper := range []bool{false, true} {
		tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 16 << 20}, Options{PaperNodes: paper, NoReadDelegation: true})
		cn := tr.cn
		ctx := context.Background()
		for _, k := range []string{"aa", "ab", "b"} {
			if err := tr.Put(ctx, []byte(k), []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := tr.Get(ctx, []byte("aa")); err != nil { // reads the root and the node of "a"
			t.Fatal(err)
		}
		before := cn.Stats()
		if v, ok, err := tr.Get(ctx, []byte("ab")); err != nil || !ok || string(v) != "ab" {
			t.Fatalf("paper nodes %v: Get(ab) = %q, %v, %v", paper, v, ok, err)
		}
		if rt := cn.Stats().Sub(before).RoundTrips; rt != 1 {
			t.Errorf("paper nodes %v: Get(ab) from a warm cache took %d round trips, want 1", paper, rt)
		}
		enc := appendEncoded(nil, []byte("aa"))
		root, rootOK := tr.cache.Get(enc[:0])
		_, ownOK := tr.cache.Get(enc[:1])
		var kids []uint64
		if rootOK {
			if i := slices.IndexFunc(root.Slots(), func(w uint64) bool { return w != 0 && byte(w) == enc[0] }); i >= 0 {
				kids = root.ChildSlots(i)
			}
		}
		switch {
		case !rootOK:
			t.Errorf("paper nodes %v: the root is not cached", paper)
		case !paper && (ownOK || len(kids) != 2):
			t.Errorf("the node of \"a\": an entry of its own %v, %d slots in the root's entry; want none and 2", ownOK, len(kids))
		case paper && (!ownOK || len(kids) != 0):
			t.Errorf("paper nodes: the node of \"a\": an entry of its own %v, %d slots in the root's entry; want one and 0", ownOK, len(kids))
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
}
