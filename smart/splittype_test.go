package smart

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestSplitType checks the type of the nodes a leaf split creates
// (Tree.splitType): by size class a NODE_2 under a node of at most 64
// children and a NODE_8 under a denser one, whether the splitting compute
// node read the parent or took it from its cache, the path nodes of a long
// common prefix NODE_2s below the first; with PaperNodes always the paper's
// NODE_4. The nodes created as NODE_2 grow through NODE_4 and NODE_16,
// those created as NODE_8 to NODE_32 (nodeType.grown), and every key stays
// readable from both compute nodes.
func TestSplitType(t *testing.T) {
	long := strings.Repeat("q", 20)
	tests := []struct {
		name  string
		dense bool     // fill the root with more than 64 children first
		keys  []string // then insert these from a compute node that
		cache bool     // knows the root from its cache (else from reading it: no cache)
		want  map[nodeType]int
		paper map[nodeType]int
	}{
		{"sparse parent", false, []string{"abc1", "abc2"}, false,
			map[nodeType]int{node2: 1}, map[nodeType]int{node4: 1}},
		{"dense parent", true, []string{"abc1", "abc2"}, false,
			map[nodeType]int{node8: 1}, map[nodeType]int{node4: 1}},
		{"dense parent from the cache", true, []string{"abc1", "abc2"}, true,
			map[nodeType]int{node8: 1}, map[nodeType]int{node4: 1}},
		{"NODE_8 holds eight", true, nodeKeys(8), true,
			map[nodeType]int{node8: 1}, map[nodeType]int{node8: 1}},
		{"and grows to NODE_32", true, nodeKeys(9), false,
			map[nodeType]int{node32: 1}, map[nodeType]int{node16: 1}},
		{"sparse parent from the cache, path nodes", false, []string{long + "1", long + "2"}, true,
			map[nodeType]int{node2: 3}, map[nodeType]int{node4: 3}},
		{"dense parent from the cache, path nodes", true, []string{long + "1", long + "2"}, true,
			map[nodeType]int{node8: 1, node2: 2}, map[nodeType]int{node4: 3}},
		{"NODE_2 grows to NODE_4", false, []string{"abc1", "abc2", "abc3"}, true,
			map[nodeType]int{node4: 1}, map[nodeType]int{node4: 1}},
		{"and to NODE_16", false, []string{"abc1", "abc2", "abc3", "abc4", "abc5"}, false,
			map[nodeType]int{node16: 1}, map[nodeType]int{node8: 1}},
	}
	for _, tc := range tests {
		for _, paper := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paper=%v", tc.name, paper), func(t *testing.T) {
				ctx := context.Background()
				opts := Options{PaperNodes: paper}
				tr, p := newTree(t, remote.Config{MemoryNodes: 2}, opts)
				uncached, err := Open(p.NewComputeNode(), Options{PaperNodes: paper, CacheBytes: -1})
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				put := func(x *Tree, k string) {
					t.Helper()
					if err := x.Put(ctx, []byte(k), []byte("v"+k)); err != nil {
						t.Fatalf("Put(%q): %v", k, err)
					}
					keys = append(keys, k)
				}
				if tc.dense {
					// 80 children of the root, none sharing a first byte
					// with the keys below.
					for b := range 80 {
						put(tr, string([]byte{0x80 + byte(b)}))
					}
				}
				x := uncached
				if tc.cache {
					x = tr // its inserts cached the root
					if _, _, err := x.Get(ctx, []byte("a")); err != nil {
						t.Fatal(err)
					}
					if x.Stats().CacheEntries == 0 {
						t.Fatal("the root is not cached")
					}
				}
				for _, k := range tc.keys {
					put(x, k)
				}
				if err := tr.Verify(ctx); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					for _, y := range []*Tree{tr, uncached} {
						if v, ok, err := y.Get(ctx, []byte(k)); err != nil || !ok || string(v) != "v"+k {
							t.Fatalf("Get(%q) = %q, %v, %v", k, v, ok, err)
						}
					}
				}
				want := tc.want
				if paper {
					want = tc.paper
				}
				sh := treeShape(t, tr)
				got := maps.Clone(sh.types)
				root := node256 // by size class
				switch {
				case paper && tc.dense:
					root = typeFor(80) // switched in place: 81 children
				case paper:
					root = node4
				}
				if got[root]--; got[root] == 0 {
					delete(got, root)
				}
				if !maps.Equal(got, want) {
					t.Fatalf("nodes below the root by type: %v, want %v", got, want)
				}
			})
		}
	}
}

// TestDense checks the rule of dense: more than 64 children, or internal
// nodes for at least a quarter of them; tombstones and empty slots are no
// children.
func TestDense(t *testing.T) {
	leaf := leafSlot('x', 0, remote.MakeAddr(0, 4096))
	node := nodeSlot('y', node4, remote.MakeAddr(0, 8192))
	slots := func(leaves, nodes, tombs int) []slot {
		var s []slot
		for range leaves {
			s = append(s, leaf)
		}
		for range nodes {
			s = append(s, node)
		}
		for range tombs {
			s = append(s, tombstone('z'))
		}
		return append(s, 0, 0)
	}
	for _, tc := range []struct {
		leaves, nodes, tombs int
		want                 bool
	}{
		{0, 0, 0, false},
		{1, 0, 0, false},
		{64, 0, 0, false},
		{65, 0, 0, true},
		{64, 0, 10, false},
		{3, 1, 0, true},
		{4, 1, 0, false},
		{4, 1, 20, false},
		{0, 1, 0, true},
		{40, 20, 0, true},
	} {
		if got := dense(slots(tc.leaves, tc.nodes, tc.tombs)); got != tc.want {
			t.Errorf("dense(%d leaves, %d nodes, %d tombstones) = %v, want %v", tc.leaves, tc.nodes, tc.tombs, got, tc.want)
		}
	}
	words := []uint64{uint64(node), uint64(leaf)}
	if !dense(words) {
		t.Error("dense of cache words: a node among two children is dense")
	}
	frozen := []slot{node | slotFrozen, leaf | slotFrozen, leaf | slotFrozen}
	if !dense(frozen) {
		t.Error("frozen slots are children too")
	}
}
