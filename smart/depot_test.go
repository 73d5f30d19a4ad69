package smart

import (
	"errors"
	"testing"

	"github.com/dmindex/dmindex/internal/depot"
	"github.com/dmindex/dmindex/remote"
)

// TestVerifyDepotInUse: Verify fails when the tree's depot hands on memory
// the tree uses (a leaf, or an extent holding its nodes), and passes with
// what a compute node that closed the tree left there.
func TestVerifyDepotInUse(t *testing.T) {
	ctx := t.Context()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	opts := Options{Name: "depot", Reclaim: true}
	gone, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if err := gone.Put(ctx, []byte(k), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gone.Delete(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatalf("Verify with what a closed compute node handed on: %v", err)
	}
	c := tr.cn.NewClient()
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := verifier{s: s, seen: make(map[remote.Addr]bool)}
	if err := v.node(ctx, root, nil); err != nil {
		t.Fatal(err)
	}
	tr.release(s)
	var leaf remote.Addr // the linked object at the highest address
	for a := range v.seen {
		leaf = max(leaf, a)
	}
	for _, tc := range []struct {
		name string
		e    depot.Entry
	}{
		{"free leaf", depot.Entry{Kind: depot.Free, Addr: leaf, Size: 8, Tau: 1}},
		// Smaller than a record, which Push would carve out of it.
		{"unused extent", depot.Entry{Kind: depot.Unused, Addr: leaf - 8, Size: 16}},
	} {
		if err := depot.Push(ctx, c, tr.rootSlot.Add(depotOff), []depot.Entry{tc.e}); err != nil {
			t.Fatal(err)
		}
		if err := tr.Verify(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Verify = %v, want ErrCorrupt", tc.name, err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		if _, err := depot.Take(ctx, c, tr.rootSlot.Add(depotOff)); err != nil {
			t.Fatal(err)
		}
	}
}
