package sherman

import (
	"errors"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/depot"
	"github.com/dmindex/dmindex/remote"
)

// TestVerifyDepotInUse: Verify fails (S7) when the tree's depot hands on
// memory where a page lies, and passes with what a compute node that
// closed the tree left there.
func TestVerifyDepotInUse(t *testing.T) {
	ctx := t.Context()
	p, gone := depotTree(t)
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
	s, err := tr.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.verify(ctx, false)
	tr.release(s)
	if err != nil {
		t.Fatal(err)
	}
	page := info.addrs[0]
	head := tr.meta.Add(offMetaDepot)
	// Smaller than a record, which Push would carve out of it.
	if err := depot.Push(ctx, tr.cn.NewClient(), head, []depot.Entry{{Kind: depot.Unused, Addr: page - 8, Size: 16}}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Verify(ctx); !errors.Is(err, index.ErrCorrupt) {
		t.Errorf("a page inside an unused extent: Verify = %v, want ErrCorrupt", err)
	} else {
		t.Log(err)
	}
}

// TestOpenMismatchKeepsDepot: an Open that fails (another geometry:
// ErrOptionsMismatch) leaves what closed compute nodes handed on in the
// tree's depot for the next Open; it took it before.
func TestOpenMismatchKeepsDepot(t *testing.T) {
	ctx := t.Context()
	p, gone := depotTree(t)
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	c := p.NewComputeNode().NewClient()
	head := gone.meta.Add(offMetaDepot)
	read := func() uint64 {
		var w [8]byte
		if err := c.Read(ctx, head, w[:]); err != nil {
			t.Fatal(err)
		}
		return le.Uint64(w[:])
	}
	if read() == 0 {
		t.Fatal("the closed compute node handed nothing on")
	}
	if _, err := Open(p.NewComputeNode(), Options{KeySize: 16, ValueSize: 32}); !errors.Is(err, ErrOptionsMismatch) {
		t.Fatalf("Open with another geometry: %v, want ErrOptionsMismatch", err)
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
var depotOptions = Options{KeySize: 16, ValueSize: 16}

// depotTree opens the tree of depotOptions on a local pool of one 4 MiB
// memory node, closed when the test ends, and puts a key into it.
func depotTree(t *testing.T) (*remote.Pool, *Tree) {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	tr, err := Open(p.NewComputeNode(), depotOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Put(t.Context(), []byte("key"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	return p, tr
}
