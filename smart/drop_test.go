package smart

import (
	"bytes"
	"context"
	"errors"
	"slices"
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
		class := classFor(tr.lf.payload(8, 8))
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

// TestSplitChainOutOfMemoryFreesAll: a leaf split whose chain of nodes runs
// out of memory part way fails with remote.ErrOutOfMemory and gives back
// every node and the leaf it had allocated (they leaked), and the tree is
// as before.
func TestSplitChainOutOfMemoryFreesAll(t *testing.T) {
	ctx := context.Background()
	tr, s, a, b := splitPair(t, 1<<20, 200) // a chain of ~28 nodes
	// Exhaust the memory node, then give back a leaf of b's class and
	// three nodes: the chain gets its first node, its leaf and two more.
	leafBytes := classBytes(tr.lf.classOf(b, b))
	leaf, err := s.c.AllocOn(ctx, 0, leafBytes, leafAlign)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []remote.Addr
	for {
		n, err := s.c.AllocOn(ctx, 0, tr.nodeAlloc(node4), addrAlign)
		if errors.Is(err, remote.ErrOutOfMemory) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	for _, n := range append(nodes[len(nodes)-3:], 0) {
		if n == 0 {
			err = s.c.Free(leaf, leafBytes)
		} else {
			err = s.c.Free(n, tr.nodeAlloc(node4))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	used := func() uint64 { st := tr.cn.Stats(); return st.AllocBytes - st.FreedBytes }
	before := used()
	if err := tr.Put(ctx, b, b); !errors.Is(err, remote.ErrOutOfMemory) {
		t.Fatalf("Put of a key that needs a chain of nodes on a full memory node: %v, want ErrOutOfMemory", err)
	}
	if after := used(); after != before {
		t.Errorf("the failed split left %d bytes allocated (%d before, %d after)", int64(after)-int64(before), before, after)
	}
	if got, ok, err := tr.Get(ctx, a); err != nil || !ok || !bytes.Equal(got, a) {
		t.Errorf("Get of the key split on: %q, %v, %v", got, ok, err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Error(err)
	}
}

// TestDropChain: a chain built and never linked (a split whose slot froze
// under it) gives back its nodes and its leaf.
func TestDropChain(t *testing.T) {
	ctx := context.Background()
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 1 << 20}, Options{})
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	a, b := bytes.Repeat([]byte{'a'}, 40), bytes.Repeat([]byte{'a'}, 41)
	s.enc, s.enc2 = appendEncoded(s.enc[:0], b), appendEncoded(s.enc2[:0], a)
	lcp := 0
	for s.enc[lcp] == s.enc2[lcp] {
		lcp++
	}
	cur := cursor{addr: nodeSlotAddr(remote.MakeAddr(0, 4096), 0), sl: leafSlot('a', 0, remote.MakeAddr(0, 8192))}
	used := func() uint64 { st := tr.cn.Stats(); return st.AllocBytes - st.FreedBytes }
	before := used()
	c, err := s.buildChain(ctx, cur, lcp, b, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.n < 2 || used() == before {
		t.Fatalf("the chain has %d nodes before its last and took %d bytes, want a longer one", c.n, used()-before)
	}
	s.dropChain(c)
	if after := used(); after != before {
		t.Errorf("dropChain left %d bytes allocated", int64(after)-int64(before))
	}
}

// TestDropChainAfterRestaging: a leaf split whose CAS met a frozen slot
// waits for the move (followMove) and may repair it, which stages the
// move's successor in the session; the split then drops its chain. It must
// free the chain's own nodes and leaf, not what the session staged last:
// it freed the repair's successor, which the move had published (or which
// the repair had freed already), so that one address was handed out twice
// (the double free that indextest.RunStalls found).
func TestDropChainAfterRestaging(t *testing.T) {
	ctx := context.Background()
	tr, s, a, b := splitPair(t, 16<<20, 40) // a chain of 5 nodes
	s.enc, s.enc2 = appendEncoded(s.enc[:0], b), appendEncoded(s.enc2[:0], a)
	cur, err := s.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.descend(ctx, s.enc, cur)
	if err != nil {
		t.Fatal(err)
	}
	lcp := 0
	for s.enc[lcp] == s.enc2[lcp] {
		lcp++
	}
	c, err := s.buildChain(ctx, d.cur, lcp, b, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.nodes) != c.n+1 || c.nodes[0] != c.first || c.nodes[c.n] != c.final || c.n < 2 {
		t.Fatalf("chain of %d nodes (first %v, final %v): nodes %v", c.n+1, c.first, c.final, c.nodes)
	}
	// What a repair in between stages: its successor, published.
	other, err := s.allocOn(ctx, 0, tr.nodeAlloc(node16), addrAlign)
	if err != nil {
		t.Fatal(err)
	}
	s.staged, s.pieces = s.staged[:0], s.pieces[:0]
	s.stage(other, make([]byte, 16))
	s.dropChain(c)
	freed := make(map[remote.Addr]int)
	for x := range s.c.ComputeNode().Freed() {
		freed[x]++
	}
	if freed[other] != 0 {
		t.Errorf("the node staged after the chain (%v) was freed", other)
	}
	for _, x := range append(slices.Clone(c.nodes), c.leaf) {
		if freed[x] != 1 {
			t.Errorf("the chain's %v freed %d times, want once (chain %v, leaf %v)", x, freed[x], c.nodes, c.leaf)
		}
	}
}

// splitPair returns a tree on one memory node of nodeBytes holding key a
// (prefix bytes 'k', then 'a'), a session on it released when the test
// ends, and b (the same prefix, then 'b'), whose insert splits a's leaf
// into a chain of about prefix/7 nodes.
func splitPair(t *testing.T, nodeBytes int64, prefix int) (*Tree, *session, []byte, []byte) {
	t.Helper()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: nodeBytes}, Options{})
	t.Cleanup(func() { p.Close() })
	long := bytes.Repeat([]byte{'k'}, prefix)
	a, b := append(slices.Clip(long), 'a'), append(slices.Clip(long), 'b')
	if err := tr.Put(context.Background(), a, a); err != nil {
		t.Fatal(err)
	}
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.release(s) })
	return tr, s, a, b
}
