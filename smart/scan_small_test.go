package smart

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestScanFromSmallNode checks scans that take a full NODE_2's children
// from the cache (fromSmall): the reader caches the node of "a" (holding
// "aa" and "ab") in the root's entry, another compute node then changes
// what is under it, and the reader's scans, ascending and descending, told
// their length or not, must yield exactly the keys present. Each change
// leaves the snapshot's slot values stale in another way: a leaf split
// under it (the leaf still valid, its reverse pointer moved: the check
// fromSmall needs beyond a point operation's), a leaf deleted, deleted and
// inserted again, moved to a larger class, updated in place, a tombstone in
// the snapshot filled again (the node was not full: the snapshot is not
// used), and the node grown to a larger type (its parent's slot names
// another node: the snapshot is not used). Without a change the scan reads the leaves and
// not the node; with Options.Reclaim it reads the node.
func TestScanFromSmallNode(t *testing.T) {
	ctx := t.Context()
	big := bytes.Repeat([]byte{'v'}, 200)
	cases := []struct {
		name string
		// before changes the tree before the reader caches the node, change
		// after.
		before, change func(w *Tree, keys map[string][]byte) error
	}{
		{"unchanged", nil, nil},
		{"leaf-split", nil, func(w *Tree, keys map[string][]byte) error {
			keys["abc"] = []byte("abc")
			return w.Put(ctx, []byte("abc"), []byte("abc"))
		}},
		{"deleted", nil, func(w *Tree, keys map[string][]byte) error {
			delete(keys, "aa")
			_, err := w.Delete(ctx, []byte("aa"))
			return err
		}},
		{"reinserted", nil, func(w *Tree, keys map[string][]byte) error {
			if _, err := w.Delete(ctx, []byte("ab")); err != nil {
				return err
			}
			keys["ab"] = []byte("again")
			return w.Put(ctx, []byte("ab"), []byte("again"))
		}},
		{"outgrown", nil, func(w *Tree, keys map[string][]byte) error {
			keys["aa"] = big
			return w.Put(ctx, []byte("aa"), big)
		}},
		{"in-place", nil, func(w *Tree, keys map[string][]byte) error {
			keys["ab"] = []byte("AB")
			return w.Put(ctx, []byte("ab"), []byte("AB"))
		}},
		{"tombstone-refilled", func(w *Tree, keys map[string][]byte) error {
			// The snapshot holds a tombstone: the node is not full.
			delete(keys, "aa")
			_, err := w.Delete(ctx, []byte("aa"))
			return err
		}, func(w *Tree, keys map[string][]byte) error {
			keys["aa"] = []byte("back")
			return w.Put(ctx, []byte("aa"), []byte("back"))
		}},
		{"grown", nil, func(w *Tree, keys map[string][]byte) error {
			keys["ac"] = []byte("ac")
			return w.Put(ctx, []byte("ac"), []byte("ac"))
		}},
	}
	scans := []struct {
		lo, hi []byte
		limit  int
		desc   bool
	}{
		{[]byte("a"), []byte("b"), 0, false},
		{[]byte("a"), []byte("b"), 0, true},
		{[]byte("aa\x00"), []byte("b"), 0, false},
		{[]byte("a"), []byte("ab\x00"), 0, true},
		{[]byte("a"), nil, 2, false},
		{nil, []byte("b"), 2, true},
	}
	for _, reclaim := range []bool{false, true} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("reclaim=%v/%s", reclaim, c.name), func(t *testing.T) {
				opts := Options{Reclaim: reclaim, ReclaimInterval: time.Hour, Lease: 2 * time.Hour}
				trees := simTrees(t, 2, opts)
				reader, writer := trees[0], trees[1]
				keys := map[string][]byte{}
				for _, k := range []string{"aa", "ab", "b", "c"} {
					keys[k] = []byte(k)
					if err := writer.Put(ctx, []byte(k), []byte(k)); err != nil {
						t.Fatal(err)
					}
				}
				if c.before != nil {
					if err := c.before(writer, keys); err != nil {
						t.Fatal(err)
					}
				}
				// The reader reads the root and the node of "a", which its
				// root's entry then holds (TestSmallNodeInParentEntry).
				for _, k := range []string{"ab", "b"} {
					if _, _, err := reader.Get(ctx, []byte(k)); err != nil {
						t.Fatal(err)
					}
				}
				if c.change == nil {
					// The root's slot, the root (its snapshot has a leaf in
					// the range, "b": fromCache reads it), the node of "a"
					// unless fromSmall stands in for it, and its two leaves.
					want := uint64(5)
					if !reclaim {
						want = 4
					}
					before := reader.cn.Stats().Reads
					for _, err := range reader.Scan(ctx, []byte("a"), []byte("b")) {
						if err != nil {
							t.Fatal(err)
						}
					}
					if got := reader.cn.Stats().Reads - before; got != want {
						t.Errorf("a scan of the node of \"a\" from a warm cache read %d times, want %d", got, want)
					}
				}
				if c.change != nil {
					if err := c.change(writer, keys); err != nil {
						t.Fatal(err)
					}
				}
				present := slices.Collect(maps.Keys(keys))
				for _, sc := range scans {
					want := scanOracle(byteKeys(present), sc.lo, sc.hi, sc.limit, sc.desc)
					seq := reader.ScanLimit(ctx, sc.lo, sc.hi, sc.limit)
					if sc.desc {
						seq = reader.ReverseScanLimit(ctx, sc.lo, sc.hi, sc.limit)
					}
					var got [][]byte
					for kv, err := range seq {
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(kv.Value, keys[string(kv.Key)]) {
							t.Errorf("scan [%q, %q) desc %v: %q = %q, want %q", sc.lo, sc.hi, sc.desc, kv.Key, kv.Value, keys[string(kv.Key)])
						}
						got = append(got, kv.Key)
					}
					if !slices.EqualFunc(got, want, bytes.Equal) {
						t.Errorf("scan [%q, %q) limit %d desc %v: got %q, want %q", sc.lo, sc.hi, sc.limit, sc.desc, got, want)
					}
				}
				if err := reader.Verify(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// byteKeys converts keys to byte slices.
func byteKeys(keys []string) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k)
	}
	return out
}
