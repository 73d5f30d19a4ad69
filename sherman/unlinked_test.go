package sherman

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestPutStoredDespiteSeparatorFailure makes a Put split a full leaf whose
// parent is full too, with memory for exactly one page: the leaf split
// stores the pair, then the parent's split runs out of memory. The pair is
// stored and readable, so Put must report success (an error means "not
// stored"); the new leaf is reached through its left sibling and counted in
// Stats.UnlinkedSplits. The next Put that needs a page fails and is not
// stored.
func TestPutStoredDespiteSeparatorFailure(t *testing.T) {
	ctx := context.Background()
	// NoRedo: a new client's redo slots would take the memory the test
	// leaves for the split.
	opts := Options{Span: 4, NoRedo: true}
	// A dry run in a large pool finds the first key whose insert splits a
	// leaf and its parent (the structure depends on the keys only).
	dry := openTree(t, newPool(t, remote.Config{}), opts)
	var n uint64
	for ; ; n++ {
		before := dry.Stats()
		if err := dry.Put(ctx, ikey(n), ikey(n)); err != nil {
			t.Fatal(err)
		}
		if st := dry.Stats(); n > 20 && st.LeafSplits > before.LeafSplits && st.InnerSplits > before.InnerSplits {
			break
		}
	}

	const nodeBytes = 1 << 20
	p := newPool(t, remote.Config{NodeBytes: nodeBytes, ChunkBytes: 64 << 10})
	tr := openTree(t, p, opts)
	for i := range n {
		if err := tr.Put(ctx, ikey(i), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Leave one page at the end of the memory node and make the next Put
	// run on a client without a chunk, so that its allocations come from
	// there: the leaf split gets the page, the parent's split nothing.
	page := tr.g.pageBytes
	filler := p.NewComputeNode().NewClient()
	if _, err := filler.AllocOn(ctx, 0, int(nodeBytes-memoryUsed(t, p)[0])-page-lineBytes, lineBytes); err != nil {
		t.Fatal(err)
	}
	if left := nodeBytes - int(memoryUsed(t, p)[0]); left < page || left >= 2*page {
		t.Fatalf("%d bytes left, want one page of %d", left, page)
	}
	held, err := tr.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := tr.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr.release(fresh)
	before := tr.Stats()
	if err := tr.Put(ctx, ikey(n), ikey(n)); err != nil {
		t.Fatalf("Put whose leaf split stored the pair: %v", err)
	}
	tr.release(held)
	if st := tr.Stats(); st.LeafSplits != before.LeafSplits+1 || st.UnlinkedSplits != before.UnlinkedSplits+1 {
		t.Fatalf("stats before %+v, after %+v: want one leaf split, unlinked", before, st)
	}
	for i := range n + 1 {
		if v, ok, err := tr.Get(ctx, ikey(i)); err != nil || !ok || !bytes.Equal(v, ikey(i)) {
			t.Fatalf("Get(%d) = %x, %v, %v", i, v, ok, err)
		}
	}
	s, err := tr.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.verify(ctx, false)
	tr.release(s)
	if err != nil || info.unlisted != 1 {
		t.Fatalf("verify: %+v, %v; want one page missing from its parent", info, err)
	}
	// Out of memory now: a Put that needs a page fails and is not stored.
	var k uint64
	for k = n + 1; ; k++ {
		err := tr.Put(ctx, ikey(k), ikey(k))
		if errors.Is(err, remote.ErrOutOfMemory) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := tr.Get(ctx, ikey(k)); ok || err != nil {
		t.Fatalf("the Put that failed with ErrOutOfMemory is stored (%v, %v)", ok, err)
	}
}

// memoryUsed returns p.MemoryUsed, failing the test on error.
func memoryUsed(t testing.TB, p *remote.Pool) []uint64 {
	t.Helper()
	used, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	return used
}
