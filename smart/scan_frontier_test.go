package smart

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestKeepRange checks keepRange against a bit-by-bit definition for every
// range.
func TestKeepRange(t *testing.T) {
	all := [4]uint64{^uint64(0), 0x5555_5555_5555_5555, 1 << 63, ^uint64(0) >> 1}
	for first := range 256 {
		for last := first; last < 256; last++ {
			got := all
			keepRange(&got, first, last)
			var want [4]uint64
			for b := first; b <= last; b++ {
				want[b/64] |= all[b/64] & (1 << (b % 64))
			}
			if got != want {
				t.Fatalf("keepRange(%x, %d, %d) = %x, want %x", all, first, last, got, want)
			}
		}
	}
}

// TestScanChildrenLazily: the children of a node enter the frontier a
// round's window at a time (scanner.children, then scanner.expand), and
// together they are every child in the range, in scan order, each once.
// The slots of a node whose children are all out are dropped from the
// spill buffer. Random nodes, ranges and windows against a sorted list.
func TestScanChildrenLazily(t *testing.T) {
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	node := remote.MakeAddr(0, 4096)
	for range 2000 {
		typ := nodeType(r.IntN(int(node256-node4)+1)) + node4
		slots := make([]byte, 8*typ.capacity())
		var partials []int
		at := r.Perm(typ.capacity()) // slots in random places, some empty
		for i, b := range r.Perm(256)[:r.IntN(typ.capacity()+1)] {
			a := remote.MakeAddr(1, uint64(16*(i+1)))
			var sl slot
			switch r.IntN(5) {
			case 0:
				sl = tombstone(byte(b)) // not a child
			case 1, 2:
				sl = nodeSlot(byte(b), node4, a)
			default:
				sl = leafSlot(byte(b), 0, a)
			}
			binary.LittleEndian.PutUint64(slots[8*at[i]:], uint64(sl))
			if sl.isChild() {
				partials = append(partials, b)
			}
		}
		first, last := r.IntN(256), r.IntN(256)
		if r.IntN(8) != 0 && first > last {
			first, last = last, first
		}
		desc := r.IntN(2) == 0
		window := 1 + r.IntN(scanWindow)
		var want []byte
		for _, b := range partials {
			if first <= b && b <= last {
				want = append(want, byte(b))
			}
		}
		slices.Sort(want)
		if desc {
			slices.Reverse(want)
		}

		var order [256]uint8
		if len(partials) > 0 && r.IntN(10) == 0 {
			frozenAt := at[r.IntN(len(partials))]
			w := binary.LittleEndian.Uint64(slots[8*frozenAt:])
			binary.LittleEndian.PutUint64(slots[8*frozenAt:], w|slotFrozen)
			if _, frozen := childOrder(slots, first, last, desc, &order); !frozen {
				t.Fatalf("%v with a frozen slot: childOrder does not report it", typ)
			}
			continue
		}
		n, frozen := childOrder(slots, first, last, desc, &order)
		if frozen {
			t.Fatalf("%v: childOrder reports a frozen slot, there is none", typ)
		}
		sc := &scanner{desc: desc, window: window}
		rest := entry{cur: cursor{sl: nodeSlot(7, typ, node)}}
		sc.setPath(&rest, []byte{7})
		sc.front = sc.children(nil, rest, slots, order[:n])
		var got []byte
		for len(sc.front) > 0 {
			top := len(sc.front) - 1
			if sc.front[top].spill > 0 {
				if n := sc.expand(top); n > window+1 {
					t.Fatalf("expand put %d entries in the frontier, want at most a window (%d) and the rest", n, window)
				}
				continue
			}
			e := sc.front[top]
			sc.front = sc.front[:top]
			if p := sc.path(&e); e.cur.node != node || e.cur.depth != 2 || string(p) != "\x07" {
				t.Fatalf("child entry %+v, path %v: want node %v, depth 2 and the node's path", e.cur, p, node)
			}
			i := int(e.cur.addr.Offset()-node.Offset()-nodeSlotsOff) / 8
			if e.cur.addr != nodeSlotAddr(node, i) || uint64(e.cur.sl) != binary.LittleEndian.Uint64(slots[8*i:]) {
				t.Fatalf("child entry %+v does not hold the slot it names", e.cur)
			}
			got = append(got, e.cur.sl.partial())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%v children %d..%d (desc %v, window %d): got %v, want %v", typ, first, last, desc, window, got, want)
		}
		if len(sc.spill) != 0 {
			t.Fatalf("%d spilled bytes left once every child was out", len(sc.spill))
		}
	}
}

// TestScanSpillBounded: a full scan of a tree of many keys keeps the slots
// of the nodes it read in its last rounds spilled, not those of every node
// with more children than a window (256 NODE_256s of 2 KB here).
func TestScanSpillBounded(t *testing.T) {
	ctx := t.Context()
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20}, Options{})
	r := rand.New(rand.NewPCG(1, 2))
	const keys = 50_000
	for range keys {
		k := binary.BigEndian.AppendUint64(nil, r.Uint64())
		if err := tr.Put(ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, desc := range []bool{false, true} {
		n := 0
		for _, err := range tr.scan(ctx, nil, nil, desc, 0) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != keys {
			t.Fatalf("scan (desc %v) yielded %d pairs, want %d", desc, n, keys)
		}
		s, err := tr.session()
		if err != nil {
			t.Fatal(err)
		}
		spilled := cap(s.scan.spill)
		tr.release(s)
		// A round reads at most scanMaxRound bytes of nodes; append may
		// double the buffer once more.
		if limit := 2 * scanMaxRound; spilled > limit {
			t.Errorf("scan (desc %v) spilled up to %d bytes, want at most %d", desc, spilled, limit)
		}
	}
}

// TestScanFromCache: a scan takes the root's children from the compute
// node's cache instead of reading the root when every partial key of its
// range has a child node there (one round trip fewer), and yields every key
// present also after other compute nodes moved a child (its type grew) or
// split one above (a header split) behind the cache's back; a stale
// snapshot is dropped. Range bounds that include partial key 0x00 (a key
// ending there) keep reading the node.
func TestScanFromCache(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		ctx := t.Context()
		// Round trips are counted on wall time: a heartbeat falling due
		// inside a scan on a slow machine would add its own (and one
		// half a lease late renews the scan's pin and starts it again).
		opts := Options{Reclaim: reclaim, ReclaimInterval: time.Hour}
		tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 32 << 20}, opts)
		var keys [][]byte
		put := putter(t, &keys)
		for b := 2; b < 256; b++ { // a child node under every partial key but 0x00, 0x01 and 0x05
			if b == 0x05 {
				continue
			}
			if b == 0xb0 { // a node with the compressed path "mno"
				put(tr, []byte{byte(b), 'm', 'n', 'o', 'a'})
				put(tr, []byte{byte(b), 'm', 'n', 'o', 'b'})
				continue
			}
			put(tr, []byte{byte(b), 'a'})
			put(tr, []byte{byte(b), 'b'})
		}
		warm := func(x *Tree) {
			t.Helper()
			for _, k := range keys {
				if _, _, err := x.Get(ctx, k); err != nil {
					t.Fatal(err)
				}
			}
		}
		scan := func(x *Tree, lo []byte, n int) uint64 {
			t.Helper()
			w := scanOracle(keys, lo, nil, n, false)
			before := x.cn.Stats().RoundTrips
			var got [][]byte
			for kv, err := range x.Scan(ctx, lo, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if got = append(got, kv.Key); len(got) == n {
					break
				}
			}
			if !slices.EqualFunc(got, w, bytes.Equal) {
				t.Fatalf("reclaim %v: scan from %q got %q, want %q", reclaim, lo, got, w)
			}
			return x.cn.Stats().RoundTrips - before
		}
		warm(tr)
		// Every scan measured follows one its caller stopped at 20 pairs,
		// and so expects as many (scanner.expect).
		scan(tr, []byte{0x80}, 20)
		cached, fromFirst := scan(tr, []byte{0x80}, 20), scan(tr, nil, 20)
		root, ok := tr.cache.Get(nil)
		if !ok {
			t.Fatal("the root is not cached")
		}
		tr.cache.Invalidate(nil, root)
		if read := scan(tr, []byte{0x80}, 20); cached != read-1 {
			t.Errorf("reclaim %v: a scan took %d round trips with the root cached, %d without; want one fewer", reclaim, cached, read)
		}
		if read := scan(tr, nil, 20); fromFirst != read {
			t.Errorf("reclaim %v: a scan from the first key took %d round trips with the root cached, %d without; want the root read both times", reclaim, fromFirst, read)
		}

		// Another compute node grows 0x90's node out of its NODE_4 (it
		// moves), inserts inside 0xb0's compressed path (a header split),
		// adds a key under 0xc0 and the first keys under 0x05 (a child the
		// snapshot lacks), behind the caches of four others, warmed before.
		los := [][]byte{{0x8f}, {0xb0}, {0xc0}, {0x03}}
		var readers []*Tree
		for range los {
			x, err := Open(p.NewComputeNode(), opts)
			if err != nil {
				t.Fatal(err)
			}
			warm(x)
			readers = append(readers, x)
		}
		other, err := Open(p.NewComputeNode(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			put(other, []byte{0x90, byte('c' + i)})
		}
		put(other, []byte{0xb0, 'm', 'x'})
		put(other, []byte{0xc0, 'z'})
		put(other, []byte{0x05, 'a'})
		put(other, []byte{0x05, 'b'})
		for i, x := range readers {
			stale, ok := x.cache.Get(nil)
			if !ok {
				t.Fatal("the root is not cached")
			}
			scan(x, los[i], 10)
			// The first two met a child moved or split: the snapshot
			// goes (the last one reads the root and caches it afresh).
			if e, ok := x.cache.Get(nil); i < 2 && ok && e == stale {
				t.Errorf("reclaim %v: the stale snapshot of the root is still cached after a scan from %q met its child moved or split", reclaim, los[i])
			}
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScanPartlyFromCache: when the root's cached snapshot has child nodes
// under the first partial keys of a scan's range but not under all of
// them (here nothing under 0x80 and above, or 0x00 and 0x01), and those
// children are expected to hold what the scan takes, the scan takes them
// from the cache and reads the root only if it gets past them
// (entry.cut): a short scan saves the root's READ, and a scan that goes
// on past the snapshot's part, forward or reverse, still yields the keys
// other compute nodes added there behind the cache's back.
func TestScanPartlyFromCache(t *testing.T) {
	ctx := t.Context()
	opts := Options{ReclaimInterval: time.Hour}
	tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 32 << 20}, opts)
	var keys [][]byte
	put := putter(t, &keys)
	for b := 2; b < 0x80; b++ {
		put(tr, []byte{byte(b), 'a'})
		put(tr, []byte{byte(b), 'b'})
	}
	for _, k := range keys {
		if _, _, err := tr.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// scan checks the first n keys of [lo, hi) (all if n is 0; descending
	// if desc) and returns the READs of the scan.
	scan := func(x *Tree, lo, hi []byte, n int, desc bool) uint64 {
		t.Helper()
		return scanStats(t, x, keys, lo, hi, n, desc).Reads
	}
	// A first scan elsewhere teaches the session what its nodes hold
	// (pairEstimate), so that the scans compared below read alike.
	scan(tr, []byte{0x10}, nil, 10, false)
	short := scan(tr, []byte{0x40}, nil, 10, false)
	shortDesc := scan(tr, nil, []byte{0x40}, 10, true)
	uncache := func() {
		t.Helper()
		root, ok := tr.cache.Get(nil)
		if !ok {
			t.Fatal("the root is not cached")
		}
		tr.cache.Invalidate(nil, root)
	}
	uncache()
	if read := scan(tr, []byte{0x40}, nil, 10, false); short != read-1 {
		t.Errorf("a scan of 10 pairs from 0x40 read %d times with the root cached, %d without; want one fewer", short, read)
	}
	uncache()
	if read := scan(tr, nil, []byte{0x40}, 10, true); shortDesc != read-1 {
		t.Errorf("a reverse scan of 10 pairs below 0x40 read %d times with the root cached, %d without; want one fewer", shortDesc, read)
	}

	// Readers with the snapshot, then keys above 0x80 and below 0x02 from
	// another compute node: scans past the snapshot's part find them.
	var readers []*Tree
	for range 2 {
		x, err := Open(p.NewComputeNode(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if _, _, err := x.Get(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		scan(x, []byte{0x40}, nil, 4, false) // caches the root
		readers = append(readers, x)
	}
	other, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	put(other, []byte{0x90, 'a'})
	put(other, []byte{0xff})
	put(other, []byte{0x01, 'q'})
	put(other, []byte{0x00})
	scan(readers[0], []byte{0x40}, nil, 0, false)
	scan(readers[1], nil, []byte{0x41}, 0, true)
	scan(readers[0], []byte{0x70}, []byte{0x91}, 0, true) // 0x90 first: the root is read
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// scanStats scans the first n pairs of x in [lo, hi) (all if n is 0;
// descending if desc), told n, checks them against keys (scanOracle) and
// returns the compute node's I/O for the scan.
func scanStats(t *testing.T, x *Tree, keys [][]byte, lo, hi []byte, n int, desc bool) remote.Stats {
	t.Helper()
	want := scanOracle(keys, lo, hi, n, desc)
	seq := x.ScanLimit(t.Context(), lo, hi, n)
	if desc {
		seq = x.ReverseScanLimit(t.Context(), lo, hi, n)
	}
	before := x.cn.Stats()
	var got [][]byte
	for kv, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, kv.Key)
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("scan [%x, %x) desc %v of %d: got %x, want %x", lo, hi, desc, n, got, want)
	}
	return x.cn.Stats().Sub(before)
}

// scanOracle returns the keys of [lo, hi) in keys (nil hi: no upper bound)
// in scan order, descending if desc, the first n of them (all if n is 0).
func scanOracle(keys [][]byte, lo, hi []byte, n int, desc bool) [][]byte {
	var want [][]byte
	for _, k := range keys {
		if bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0) {
			want = append(want, k)
		}
	}
	slices.SortFunc(want, bytes.Compare)
	if desc {
		slices.Reverse(want)
	}
	if n > 0 {
		want = want[:min(n, len(want))]
	}
	return want
}

// putter returns a function that puts k with the value k through a tree
// and records k in keys.
func putter(t *testing.T, keys *[][]byte) func(x *Tree, k []byte) {
	return func(x *Tree, k []byte) {
		t.Helper()
		if err := x.Put(t.Context(), k, k); err != nil {
			t.Fatal(err)
		}
		*keys = append(*keys, k)
	}
}
