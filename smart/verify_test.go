package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestVerifyReportsUnfinishedSplit: a split that took the revMoving flag of
// a node's or a leaf's reverse pointer and never finished (its client was
// killed between the flag and the completing CAS) is reported as a held
// split lock, naming I5, and the tree verifies again once the flag is gone.
func TestVerifyReportsUnfinishedSplit(t *testing.T) {
	ctx := context.Background()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1}, Options{})
	defer p.Close()
	for i := range 2000 {
		if err := tr.Put(ctx, fmt.Appendf(nil, "key-%05d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	root, err := s.root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The reverse pointer of the first inner node below the root and of
	// the first leaf below that node.
	var node, leaf remote.Addr
	for at := root.sl; leaf == 0; {
		buf := make([]byte, tr.nodeReadBytes(at))
		if err := s.c.Read(ctx, at.addr(), buf); err != nil {
			t.Fatal(err)
		}
		var next slot
		for i := range slotsRead(buf) {
			c := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
			switch {
			case !c.isChild():
			case c.isLeaf() && at != root.sl && leaf == 0:
				leaf = c.addr().Add(leafRevOff)
			case !c.isLeaf() && next == 0:
				next = c
			}
		}
		if next == 0 && leaf == 0 {
			t.Fatal("no inner node below the root holds a leaf")
		}
		if node == 0 {
			node = next.addr().Add(nodeRevOff)
		}
		at = next
	}
	for _, rev := range []remote.Addr{node, leaf} {
		w, err := s.readWord(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.CAS(ctx, rev, w, w|uint64(revMoving)); err != nil {
			t.Fatal(err)
		}
		err = tr.Verify(ctx)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "I5: ") || !strings.Contains(err.Error(), "split lock held") {
			t.Errorf("Verify with the moving flag on %v: %v, want a held split lock (I5)", rev, err)
		}
		if _, err := s.c.CAS(ctx, rev, w|uint64(revMoving), w); err != nil {
			t.Fatal(err)
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatalf("Verify after clearing the flag: %v", err)
		}
	}
}
