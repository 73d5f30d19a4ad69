package smart

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestDropUnlinkedReused checks that a leaf written but never linked is
// given back at once, with and without Options.Reclaim: the next leaf of
// its class on its memory node takes its memory (it used to leak without
// reclamation).
func TestDropUnlinkedReused(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 16 << 20}, Options{Reclaim: reclaim})
		s, err := tr.session()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		class := classFor(leafPayload(8, 8))
		a, err := s.allocLeaf(ctx, 0, class)
		if err != nil {
			t.Fatal(err)
		}
		s.dropUnlinked(a, class)
		if b, err := s.allocLeaf(ctx, 0, class); err != nil || b != a {
			t.Errorf("reclaim %v: the leaf after dropping %v is %v, %v; want the dropped one", reclaim, a, b, err)
		}
		tr.release(s)
		p.Close()
	}
}
