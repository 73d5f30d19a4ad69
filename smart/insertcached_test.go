package smart

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestInsertFromCache drives each outcome of an insert decided on the
// cache's snapshot of the key's node (insertCached): won (one round trip,
// and the next Get of the key one round trip), lost to another key (the
// node is read: three), lost to the same byte (the insert goes on at that
// slot and splits its leaf), a full node (no try: it moves), a node found
// by its own entry under a compressed path, and a node moved by another
// compute node (frozen slots). Then it makes the snapshots go stale on
// every insert and checks that the tree stops trying, but for probes; and
// that Options.NoCachedInserts never tries.
func TestInsertFromCache(t *testing.T) {
	for _, hash := range []bool{false, true} {
		t.Run(fmt.Sprintf("hash=%v", hash), func(t *testing.T) {
			ctx := t.Context()
			opts := Options{HashCache: hash}
			tr, p := newTree(t, remote.Config{MemoryNodes: 1}, opts)
			other, err := Open(p.NewComputeNode(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			put := func(x *Tree, k string) (rtt uint64, won, lost int) {
				t.Helper()
				rt, st := x.cn.Stats().RoundTrips, x.Stats()
				if err := x.Put(ctx, []byte(k), []byte("v"+k)); err != nil {
					t.Fatalf("Put(%q): %v", k, err)
				}
				keys = append(keys, k)
				after := x.Stats()
				return x.cn.Stats().RoundTrips - rt, int(after.CachedInserts - st.CachedInserts), int(after.CachedInsertsLost - st.CachedInsertsLost)
			}
			get := func(x *Tree, k string) uint64 {
				t.Helper()
				rt := x.cn.Stats().RoundTrips
				v, ok, err := x.Get(ctx, []byte(k))
				if err != nil || !ok || string(v) != "v"+k {
					t.Fatalf("Get(%q) = %q, %v, %v", k, v, ok, err)
				}
				return x.cn.Stats().RoundTrips - rt
			}
			check := func(step string, x *Tree, k string, rtt uint64, won, lost int) {
				t.Helper()
				gotRTT, gotWon, gotLost := put(x, k)
				if (rtt != 0 && gotRTT != rtt) || gotWon != won || gotLost != lost {
					t.Errorf("%s: Put(%q) took %d round trips, %d won, %d lost; want %d, %d, %d (0 round trips: any)",
						step, k, gotRTT, gotWon, gotLost, rtt, won, lost)
				}
			}
			// A NODE_16 under 'k': the root, sparse, gets a NODE_2, which
			// grows through NODE_4. From then on the root is dense (all its
			// children are nodes), and a leaf split under it makes a NODE_8.
			for _, k := range []string{"ka", "kb", "kc", "kd", "ke"} {
				put(tr, k)
			}

			check("won", tr, "kf", 1, 1, 0)
			if rtt := get(tr, "kf"); rtt != 1 {
				t.Errorf("Get of the key just inserted from the snapshot took %d round trips, want 1", rtt)
			}
			check("won again", tr, "kg", 1, 1, 0)

			put(other, "kh") // takes the slot tr's snapshot ends before
			check("lost to another key", tr, "ki", 3, 0, 1)
			if rtt := get(tr, "kh"); rtt != 1 {
				t.Errorf("Get after the node was read again took %d round trips, want 1", rtt)
			}

			put(other, "kj")
			check("lost to the same byte", tr, "kjx", 0, 0, 1)

			for _, k := range []string{"ma", "mb", "mc", "md", "me", "mf", "mg", "mh"} { // a full NODE_8 under 'm'
				put(tr, k)
			}
			check("full node", tr, "mi", 0, 0, 0)

			put(tr, "pqra") // a NODE_8 with the compressed path "qr", an entry of its own
			put(tr, "pqrb")
			check("own entry", tr, "pqrc", 1, 1, 0)

			for _, k := range []string{"sa", "sb", "sc", "sd", "se", "sf"} {
				put(tr, k)
			}
			put(other, "sg")
			put(other, "sh")
			put(other, "si") // the NODE_8 moves: tr's snapshot names frozen slots
			// The nodes under 'm' and 's' are NODE_32s now.
			if st := treeShape(t, tr); st.types[node32] != 2 {
				t.Fatalf("nodes by type %v: the node under 's' did not move to a NODE_32", st.types)
			}
			check("moved node", tr, "sj", 0, 0, 1)

			// Another compute node inserts before every insert of tr: each
			// snapshot is one slot stale, and the tree stops trying.
			before := tr.Stats()
			const n = 64
			for i := range n { // one node under 'w' that both fill, in turns
				put(other, string([]byte{'w', byte(2 + 2*i)}))
				put(tr, string([]byte{'w', byte(3 + 2*i)}))
			}
			st := tr.Stats()
			tries := int(st.CachedInserts - before.CachedInserts + st.CachedInsertsLost - before.CachedInsertsLost)
			if lost := st.CachedInsertsLost - before.CachedInsertsLost; lost == 0 || tries > 2*oddsBound+n/oddsProbe+1 {
				t.Errorf("%d inserts on stale snapshots: %d tries, %d lost; want some lost and at most %d tries",
					n, tries, lost, 2*oddsBound+n/oddsProbe+1)
			}

			for _, k := range keys {
				get(tr, k)
				get(other, k)
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", tr.Stats())
		})
	}
	// With NoCachedInserts the insert reads its node: two round trips.
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1}, Options{NoCachedInserts: true})
	for _, k := range []string{"ka", "kb", "kc", "kd", "ke", "kf"} {
		rt := tr.cn.Stats().RoundTrips
		if err := tr.Put(t.Context(), []byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
		if k == "kf" && tr.cn.Stats().RoundTrips-rt != 2 {
			t.Errorf("NoCachedInserts: Put(%q) took %d round trips, want 2", k, tr.cn.Stats().RoundTrips-rt)
		}
	}
	if st := tr.Stats(); st.CachedInserts+st.CachedInsertsLost != 0 {
		t.Errorf("NoCachedInserts: %s", st)
	}
}

// TestFollowForward: a search that reaches, through a cached slot, a node
// that moved out (another compute node grew it) reads its successor from
// the forward instead of waiting and starting again: three round trips
// (the old node, the successor, the leaf), and the cache entry takes the
// successor, so the next search takes one. The same entry found stale
// again right after it was patched is dropped instead.
func TestFollowForward(t *testing.T) {
	ctx := t.Context()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1}, Options{})
	other, err := Open(p.NewComputeNode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(c, b byte) []byte { return []byte{c, b} }
	put := func(k []byte) {
		t.Helper()
		if err := other.Put(ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	get := func(k []byte) uint64 {
		t.Helper()
		rt := tr.cn.Stats().RoundTrips
		v, ok, err := tr.Get(ctx, k)
		if err != nil || !ok || !bytes.Equal(v, k) {
			t.Fatalf("Get(%q) = %q, %v, %v", k, v, ok, err)
		}
		return tr.cn.Stats().RoundTrips - rt
	}
	// A NODE_4 kept in the root's entry (the root is sparse: a NODE_2
	// grows to it), then, under the root grown dense, two NODE_8s that
	// grow to full NODE_32s with entries of their own (more than
	// artcache.MaxChildSlots slots).
	for b := byte('a'); b < 'e'; b++ {
		put(key('c', b))
	}
	for b := byte('a'); b < 'a'+32; b++ {
		put(key('k', b))
		put(key('m', b))
	}
	for _, c := range []byte{'c', 'k', 'm'} {
		for b := byte('a'); b < 'e'; b++ {
			get(key(c, b))
		}
	}
	put(key('c', 'e')) // moves to a NODE_16
	if rtt := get(key('c', 'e')); rtt != 3 {
		t.Errorf("Get through a moved node took %d round trips, want 3", rtt)
	}
	if rtt := get(key('c', 'e')); rtt != 1 {
		t.Errorf("the next Get took %d round trips, want 1", rtt)
	}
	const last = 'a' + 32
	put(key('k', last)) // both move to NODE_64s
	put(key('m', last))
	if rtt := get(key('k', last)); rtt != 3 {
		t.Errorf("Get through a moved node with an entry of its own took %d round trips, want 3", rtt)
	}
	if _, ok := tr.cache.Get(nil); !ok {
		t.Fatal("the root's entry is not cached")
	}
	if rtt := get(key('m', last)); rtt != 3 {
		t.Errorf("the second Get through a moved node took %d round trips, want 3", rtt)
	}
	if e, ok := tr.cache.Get(nil); ok {
		t.Errorf("the root's entry, patched and found stale again, is still cached (%d slots)", len(e.Slots()))
	}
	for _, c := range []byte{'c', 'k', 'm'} {
		for b := byte('a'); b < 'e'; b++ {
			get(key(c, b))
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
