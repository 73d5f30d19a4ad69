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

// TestScanExpect checks that a scan whose caller stops it without telling
// its length reads as one told the length its session's last such scan
// had (scanner.expect): the same round trips and bytes as ScanLimit, the
// same pairs; that the first such scan, with nothing to expect, starts
// small (more round trips); and that only scans stopped by their caller
// set what the next expects: not one told its length, nor one that ran out
// of keys. The reads are counted on the compute node's statistics (one
// client, local transport, no heartbeat inside the scans).
func TestScanExpect(t *testing.T) {
	ctx := t.Context()
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, Options{Reclaim: true, ReclaimInterval: time.Hour})
	var keys [][]byte
	put := putter(t, &keys)
	for range 3000 {
		put(tr, binary.BigEndian.AppendUint64(nil, r.Uint64()))
	}
	slices.SortFunc(keys, bytes.Compare)
	for _, k := range keys {
		if _, _, err := tr.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// The root's cached snapshot, fresh: one from the load may name nodes
	// that moved since, and a scan that meets one drops the snapshot and
	// reads the root whole, which would make two scans' reads differ.
	if root, ok := tr.cache.Get(nil); ok {
		tr.cache.Invalidate(nil, root)
	}
	for _, err := range tr.Scan(ctx, nil, nil) { // reads the root whole, which caches it
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every scan updates what the session expects below a node
	// (pairEstimate), and two scans read alike only from the same
	// estimate: each scan starts from the one the scan of the whole tree
	// above left (one goroutine: every scan runs in the same session).
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	tr.release(s)
	learned := s.scanPairs
	type cost struct{ rtt, read uint64 }
	// scan takes n pairs from the i-th key up, stopping the scan (told
	// false) or telling it n, and checks them against keys.
	scan := func(i, n int, told bool) cost {
		t.Helper()
		s.scanPairs = learned
		before := tr.cn.Stats()
		seq := tr.Scan(ctx, keys[i], nil)
		if told {
			seq = tr.ScanLimit(ctx, keys[i], nil, n)
		}
		var got [][]byte
		for kv, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, kv.Key); len(got) == n {
				break
			}
		}
		if want := keys[i:min(i+n, len(keys))]; !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("scan of %d from key %d (told %v): got %d pairs, want %d, or other keys", n, i, told, len(got), len(want))
		}
		d := tr.cn.Stats().Sub(before)
		return cost{d.RoundTrips, d.ReadBytes}
	}
	from := func() int { return r.IntN(len(keys) - 200) }

	i := from()
	first := scan(i, 100, false) // nothing to expect yet
	told := scan(i, 100, true)   // the same reads from here on: the tree and cache are as warm
	if again := scan(i, 100, false); again != told {
		t.Errorf("a scan stopped at 100 pairs after one stopped at 100 read %+v, one told 100 %+v; want the same", again, told)
	}
	if first.rtt <= told.rtt {
		t.Errorf("the first scan stopped at 100 pairs took %d round trips, one told its length %d: want more (its rounds start small)", first.rtt, told.rtt)
	}

	// A scan told its length leaves the expectation alone.
	j := from()
	told5 := scan(j, 5, true)
	if got := scan(j, 5, false); got.read <= told5.read {
		t.Errorf("a scan stopped at 5 pairs after ones stopped at 100 (and one told 5) read %d bytes, one told 5 %d: want more (it expected 100)", got.read, told5.read)
	}
	if got := scan(j, 5, false); got != told5 {
		t.Errorf("a scan stopped at 5 pairs after one stopped at 5 read %+v, one told 5 %+v; want the same", got, told5)
	}

	// A scan that runs out of keys leaves it alone too.
	scan(len(keys)-3, 10, false)
	if got := scan(j, 5, false); got != told5 {
		t.Errorf("a scan stopped at 5 pairs after one that ran out of keys read %+v, one told 5 %+v; want the same", got, told5)
	}
}

// TestExpectedPairs checks how many children a scan counts on for each
// node type before it learned better (expectedPairs): one more than the
// type below holds, the least number with the paper's nodes, switched in
// place one type at a time; by size class the same, but four for a
// NODE_8, which a leaf split creates with two children under a dense node.
func TestExpectedPairs(t *testing.T) {
	tests := []struct {
		typ          nodeType
		class, paper int
	}{
		{node2, 2, 2}, {node4, 2, 2}, {node8, 4, 5}, {node16, 9, 9},
		{node32, 17, 17}, {node64, 33, 33}, {node256, 129, 129},
	}
	for _, tc := range tests {
		if got := expectedPairs(tc.typ, false); got != tc.class {
			t.Errorf("%v by size class: expectedPairs = %d, want %d", tc.typ, got, tc.class)
		}
		if got := expectedPairs(tc.typ, true); got != tc.paper {
			t.Errorf("%v, paper nodes: expectedPairs = %d, want %d", tc.typ, got, tc.paper)
		}
	}
}

// TestScanLearnsPairs checks that a session's scans learn how many pairs
// its nodes hold (pairEstimate) and read by it, ascending and descending:
// NODE_8s of two leaves, which the type's prior overestimates (four), cost
// a scan told 32 pairs a round trip for the pairs it lacked, and NODE_8s
// of six leaves, which it underestimates, READs of nodes it did not need;
// a second scan of the same pairs, having learned, saves them.
func TestScanLearnsPairs(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		holds      int  // leaves under each NODE_8
		desc       bool // ReverseScanLimit below 0x40, else ScanLimit from 0x40
		fewerTrips bool // the learned scan takes fewer round trips (else: reads fewer bytes)
	}{
		{2, false, true},
		{6, false, false},
		{2, true, true},
		{6, true, false},
	}
	for _, tc := range tests {
		tr, _ := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 32 << 20}, Options{ReclaimInterval: time.Hour})
		var keys [][]byte
		put := putter(t, &keys)
		for b := 2; b < 0x80; b++ {
			for j := range tc.holds {
				put(tr, []byte{byte(b), byte('a' + j)})
			}
		}
		for _, k := range keys {
			if _, _, err := tr.Get(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		scan := func() remote.Stats {
			t.Helper()
			if tc.desc {
				return scanStats(t, tr, keys, nil, []byte{0x40}, 32, true)
			}
			return scanStats(t, tr, keys, []byte{0x40}, nil, 32, false)
		}
		first, second := scan(), scan()
		s, err := tr.session()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.scanPairs[node8], int32(16*tc.holds); got != want {
			t.Errorf("holds %d, desc %v: the session expects %d/16 pairs below a NODE_8, want %d", tc.holds, tc.desc, got, want)
		}
		tr.release(s)
		if tc.fewerTrips && second.RoundTrips >= first.RoundTrips {
			t.Errorf("holds %d, desc %v: the scan took %d round trips before it learned, %d after: want fewer", tc.holds, tc.desc, first.RoundTrips, second.RoundTrips)
		}
		if !tc.fewerTrips && (second.ReadBytes >= first.ReadBytes || second.RoundTrips > first.RoundTrips) {
			t.Errorf("holds %d, desc %v: the scan read %d bytes in %d round trips before it learned, %d in %d after: want fewer bytes, no more round trips",
				tc.holds, tc.desc, first.ReadBytes, first.RoundTrips, second.ReadBytes, second.RoundTrips)
		}
	}
}

// TestLearnBounded checks that what a session learns of a node type does
// not feed on itself: NODE_256s read whole whose 256 children are
// NODE_256s, again and again, leave the estimate at 256 times what the
// type implies (expectedPairs), in sixteenths, not growing (counted with
// the learned estimates of the children, it grew 256-fold per node and
// overflowed at the third).
func TestLearnBounded(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, Options{})
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	slots := make([]byte, 8*256)
	var order [256]uint8
	for i := range 256 {
		binary.LittleEndian.PutUint64(slots[8*i:], uint64(nodeSlot(byte(i), node256, remote.MakeAddr(0, uint64(4096*(i+1))))))
		order[i] = uint8(i)
	}
	sc := &s.scan
	sc.s = s
	want := int32(16 * 256 * expectedPairs(node256, false))
	for n := range 10 {
		sc.learn(node256, slots, order[:])
		if got := s.scanPairs[node256]; got != want {
			t.Fatalf("after %d NODE_256s of NODE_256s the session expects %d/16 pairs below a NODE_256, want %d", n+1, got, want)
		}
	}
}

// TestScanUpperBoundChild checks that a scan below a bound reads nothing
// under the child that the bound's last byte names (childBounds): every
// key there is the bound or sorts after it. Scanning [0x30, 0x40) reads
// what scanning [0x30, 0x3fff) does, which holds the same keys; before,
// it also read the child 0x40, ascending and descending.
func TestScanUpperBoundChild(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 32 << 20}, Options{ReclaimInterval: time.Hour})
	var keys [][]byte
	put := putter(t, &keys)
	for b := 2; b < 0x80; b++ {
		put(tr, []byte{byte(b), 'a'})
		put(tr, []byte{byte(b), 'b'})
	}
	lo := []byte{0x30}
	for _, desc := range []bool{false, true} {
		verbs := func(hi []byte) uint64 {
			t.Helper()
			return scanStats(t, tr, keys, lo, hi, 0, desc).Verbs()
		}
		verbs([]byte{0x40}) // both scans then find the same snapshots cached
		if bounded, same := verbs([]byte{0x40}), verbs([]byte{0x3f, 0xff}); bounded != same {
			t.Errorf("desc %v: scanning [30, 40) took %d verbs, scanning [30, 3fff), the same keys, %d: want the same", desc, bounded, same)
		}
	}
}
