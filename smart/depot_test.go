package smart

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/internal/depot"
	"github.com/dmindex/dmindex/remote"
)

// TestVerifyDepotInUse: Verify fails when the tree's depot hands on memory
// the tree uses (a leaf, or an extent holding its nodes), and passes with
// what a compute node that closed the tree left there.
func TestVerifyDepotInUse(t *testing.T) {
	ctx := t.Context()
	p := depotPool(t)
	gone := depotTree(t, p, 3)
	if _, err := gone.Delete(ctx, []byte("key-1")); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p.NewComputeNode(), depotOptions)
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

// TestOpenMismatchKeepsDepot: an Open that fails (another protocol
// variant: ErrOptionsMismatch) leaves what closed compute nodes handed on
// in the tree's depot for the next Open; it took it before (a new-user
// pass: about 427 KiB lost per failed Open).
func TestOpenMismatchKeepsDepot(t *testing.T) {
	ctx := t.Context()
	p := depotPool(t)
	gone := depotTree(t, p, 100)
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	c := p.NewComputeNode().NewClient()
	head := gone.rootSlot.Add(depotOff)
	read := func() uint64 {
		var w [8]byte
		if err := c.Read(ctx, head, w[:]); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(w[:])
	}
	if read() == 0 {
		t.Fatal("the closed compute node handed nothing on")
	}
	if _, err := Open(p.NewComputeNode(), Options{Name: "depot", LockedInternal: true}); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("Open with another variant: %v, want ErrOptionsMismatch", err)
	}
	if read() == 0 {
		t.Fatal("an Open that failed emptied the depot")
	}
	tr, err := Open(p.NewComputeNode(), depotOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if read() != 0 || tr.cn.SpareBytes() == 0 {
		t.Fatalf("the next Open took nothing: head %#x, %d spare bytes", read(), tr.cn.SpareBytes())
	}
}

// depotOptions are the options of the trees of the depot tests.
var depotOptions = Options{Name: "depot", Reclaim: true}

// depotPool returns a local pool of one 4 MiB memory node, closed when the
// test ends.
func depotPool(t *testing.T) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// depotTree opens the tree of depotOptions on a new compute node of p and
// puts keys "key-0", "key-1", … into it.
func depotTree(t *testing.T, p *remote.Pool, keys int) *Tree {
	t.Helper()
	tr, err := Open(p.NewComputeNode(), depotOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if err := tr.Put(t.Context(), fmt.Appendf(nil, "key-%d", i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}
