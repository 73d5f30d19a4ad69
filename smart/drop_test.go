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
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 1 << 20}, Options{})
	long := bytes.Repeat([]byte{'a'}, 200)
	a, b := append(slices.Clip(long), 'x'), append(slices.Clip(long), 'y') // a chain of ~28 nodes
	if err := tr.Put(ctx, a, a); err != nil {
		t.Fatal(err)
	}
	// Exhaust the memory node, then give back a leaf of b's class and
	// three nodes: the chain gets its first node, its leaf and two more.
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
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
