package smart

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// shape counts what a quiescent tree holds.
type shape struct {
	nodes, leaves, tombs int
	types                map[nodeType]int
	maxLevel             int
}

func treeShape(t *testing.T, tr *Tree) shape {
	t.Helper()
	ctx := context.Background()
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	root, err := s.root(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sh := shape{types: map[nodeType]int{}}
	var walk func(sl slot, level int)
	walk = func(sl slot, level int) {
		buf := make([]byte, tr.nodeReadBytes(sl))
		if err := s.c.Read(ctx, sl.addr(), buf); err != nil {
			t.Fatal(err)
		}
		h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
		sh.nodes++
		sh.types[h.nodeType()]++
		sh.maxLevel = max(sh.maxLevel, level)
		for i := range slotsRead(buf) {
			c := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
			switch {
			case c.isEmpty():
			case c.isTombstone():
				sh.tombs++
			case c.isLeaf():
				sh.leaves++
			default:
				walk(c, level+1)
			}
		}
	}
	walk(root.sl, 0)
	return sh
}

// openSimTrees opens the tree on n new compute nodes of the simulated
// pool p, one at a time (Open's verbs run on the simulator's clients).
func openSimTrees(t testing.TB, p *remote.Pool, n int, opts Options) []*Tree {
	t.Helper()
	trees := make([]*Tree, n)
	for i := range trees {
		cn := p.NewComputeNode()
		var err error
		p.Go(func() { trees[i], err = Open(cn, opts) })
		if werr := p.Wait(); werr != nil || err != nil {
			t.Fatal(werr, err)
		}
	}
	return trees
}

func newTree(t testing.TB, cfg remote.Config, opts Options) (*Tree, *remote.Pool) {
	t.Helper()
	if cfg.NodeBytes == 0 {
		cfg.NodeBytes = 32 << 20
	}
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr, p
}

// TestStructuralChanges drives each kind of structural change of Figure 4.6
// and checks the resulting shape, every key, and Verify.
func TestStructuralChanges(t *testing.T) {
	long := strings.Repeat("p", 20)
	tests := []struct {
		name  string
		keys  []string
		nodes int // internal nodes expected, root included
		level int // deepest node level
		types map[nodeType]int
	}{
		{"normal insert", []string{"a", "b", "c"}, 1, 0, nil},
		{"leaf split", []string{"abc1", "abc2"}, 2, 1, nil},
		{"leaf split with prefix chain", []string{long + "1", long + "2"}, 1 + 2 + 1, 3, nil},
		{"header split", []string{"abcdef1", "abcdef2", "abX"}, 3, 2, nil},
		{"header split at first prefix byte", []string{"abcdef1", "abcdef2", "aX"}, 3, 2, nil},
		{"two header splits of one node", []string{"abcdef1", "abcdef2", "abcX", "aY"}, 4, 3, nil},
		{"type switch to NODE_8 (NODE_16 by size class)", []string{"xa", "xb", "xc", "xd", "xe"}, 2, 1, map[nodeType]int{node8: 1}},
		{"type switches to NODE_32", nodeKeys(20), 2, 1, map[nodeType]int{node32: 1}},
		{"type switches to NODE_256", nodeKeys(200), 2, 1, map[nodeType]int{node256: 1}},
		{"prefix keys", []string{"a", "a\x00", "a\x00\x00", "a\x01", "ab"}, 0, 0, nil},
		{"zero and 0xff bytes", []string{"\x00", "\x00\x00", "\xff", "\xff\xff", "\x01", "\x01\x01"}, 0, 0, nil},
	}
	for _, tc := range tests {
		for _, paper := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paper=%v", tc.name, paper), func(t *testing.T) {
				structuralChange(t, tc.keys, tc.nodes, tc.level, tc.types, paper)
			})
		}
	}
}

// nodeKeys returns n keys that differ in their second byte only: one node
// under the root holds them all.
func nodeKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = string([]byte{'x', byte(i + 2)}) // bytes 0 and 1 encode as two
	}
	return keys
}

// structuralChange inserts keys one by one, then checks Verify, every key
// and the shape: nodes internal nodes (root included, 0: unchecked) at
// level levels, and the node types (the root's type left out: a NODE_4
// with PaperNodes, a NODE_256 by size class).
func structuralChange(t *testing.T, keys []string, nodes, level int, types map[nodeType]int, paper bool) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, Options{PaperNodes: paper})
	ctx := context.Background()
	for i, k := range keys {
		if err := tr.Put(ctx, []byte(k), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatalf("after %q: %v", k, err)
		}
	}
	for i, k := range keys {
		v, ok, err := tr.Get(ctx, []byte(k))
		if err != nil || !ok || string(v) != fmt.Sprint(i) {
			t.Fatalf("Get(%q) = %q, %v, %v", k, v, ok, err)
		}
	}
	sh := treeShape(t, tr)
	if sh.leaves != len(keys) {
		t.Fatalf("%d leaves, want %d", sh.leaves, len(keys))
	}
	if nodes > 0 && (sh.nodes != nodes || sh.maxLevel != level) {
		t.Fatalf("%d nodes at %d levels, want %d at %d", sh.nodes, sh.maxLevel, nodes, level)
	}
	root := node4
	if !paper {
		root = node256
	}
	sh.types[root]--
	for typ, n := range types {
		if !paper {
			// By size class a node takes the first type of its growth
			// chain that holds its children: NODE_8 becomes NODE_16.
			c := node4
			for c < typ {
				c = c.grown()
			}
			typ = c
		}
		if sh.types[typ] != n {
			t.Fatalf("%d nodes of %v, want %d (%v)", sh.types[typ], typ, n, sh.types)
		}
	}
}

func TestTypeSwitchToNode256(t *testing.T) {
	tr, _ := newTree(t, remote.Config{}, Options{})
	ctx := context.Background()
	for b := range 256 {
		if err := tr.Put(ctx, []byte{byte(b), 'x'}, []byte{byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	// Bytes 0x00 and 0x01 encode as 01 01 and 01 02, so the root has 255
	// distinct partial keys: NODE_256.
	if sh := treeShape(t, tr); sh.types[node256] != 1 || sh.leaves != 256 {
		t.Fatalf("shape %+v", sh)
	}
	n := 0
	for kv, err := range tr.Scan(ctx, nil, nil) {
		if err != nil || kv.Key[0] != byte(n) {
			t.Fatalf("scan #%d: %q %v", n, kv.Key, err)
		}
		n++
	}
	if n != 256 {
		t.Fatalf("scan yielded %d", n)
	}
}

func TestUpdates(t *testing.T) {
	tr, p := newTree(t, remote.Config{}, Options{})
	ctx := context.Background()
	k := []byte("key")
	sizes := []int{8, 0, 30, 31, 32, 33, 1000, 5, 70000 - 70000 + MaxValueLen, 1}
	for _, n := range sizes {
		v := bytes.Repeat([]byte{byte(n)}, n)
		if err := tr.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
		got, ok, err := tr.Get(ctx, k)
		if err != nil || !ok || !bytes.Equal(got, v) {
			t.Fatalf("value of %d bytes: got %d bytes, %v, %v", n, len(got), ok, err)
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if sh := treeShape(t, tr); sh.leaves != 1 {
		t.Fatalf("%d leaves after updates", sh.leaves)
	}
	// An update that fits the class is in place: no allocation.
	before, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := tr.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := p.MemoryUsed(); fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("in-place updates allocated: %v → %v", before, after)
	}
}

func TestDeleteAndReinsert(t *testing.T) {
	tr, _ := newTree(t, remote.Config{}, Options{})
	ctx := context.Background()
	keys := []string{"a", "ab", "abc", "b", "\x00"}
	for _, k := range keys {
		if err := tr.Put(ctx, []byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for _, k := range keys {
			found, err := tr.Delete(ctx, []byte(k))
			if err != nil || !found {
				t.Fatalf("round %d: Delete(%q) = %v, %v", round, k, found, err)
			}
			if found, err := tr.Delete(ctx, []byte(k)); err != nil || found {
				t.Fatalf("second Delete(%q) = %v, %v", k, found, err)
			}
			if _, ok, _ := tr.Get(ctx, []byte(k)); ok {
				t.Fatalf("%q still found", k)
			}
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		for kv := range tr.Scan(ctx, nil, nil) {
			t.Fatalf("scan of empty tree yielded %q", kv.Key)
		}
		for _, k := range keys {
			if err := tr.Put(ctx, []byte(k), []byte(k+"2")); err != nil {
				t.Fatal(err)
			}
		}
	}
	sh := treeShape(t, tr)
	if sh.leaves != len(keys) {
		t.Fatalf("shape %+v", sh)
	}
}

func TestOutOfMemory(t *testing.T) {
	tr, _ := newTree(t, remote.Config{NodeBytes: 64 << 10, ChunkBytes: 4096}, Options{})
	ctx := context.Background()
	var err error
	n := 0
	for ; n < 100000 && err == nil; n++ {
		err = tr.Put(ctx, fmt.Appendf(nil, "key%06d", n), []byte("value"))
	}
	if !errors.Is(err, remote.ErrOutOfMemory) {
		t.Fatalf("after %d puts: %v", n, err)
	}
	// Everything inserted before the failure is intact.
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n - 1 {
		if _, ok, err := tr.Get(ctx, fmt.Appendf(nil, "key%06d", i)); !ok || err != nil {
			t.Fatalf("key %d lost after out of memory: %v", i, err)
		}
	}
}
