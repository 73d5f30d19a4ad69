package indextest

import (
	"bytes"
	"context"
	"iter"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/index"
)

// RunScan checks Scan and ReverseScan against the oracle: random [lo, hi)
// bounds (nil and empty bounds, existing keys, prefixes of keys, non-keys
// next to keys, bounds longer than MaxKeyLen, lo == hi, lo > hi), early
// breaks after 0 to 64 pairs, ascending (descending) order without
// duplicates, before and after a round of deletes, overwrites and inserts;
// index.ScanLimit and index.ReverseScanLimit with the same bounds and limits
// (the first limit pairs, the scan ending by itself). It also checks that a
// scan stopped after 10 pairs of a large index reads much less remote
// memory than a full scan (remote.Stats of the compute node: at most an
// eighth of the bytes) and, for an index.LimitScanner, that scans told
// their length read less than scans their caller stops. A caller may reuse
// its bound buffers inside the loop: the four scans read the bounds when
// the iteration starts.
func RunScan(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	t.Run("random-bounds", func(t *testing.T) { scanRandom(t, tg) })
	t.Run("edge-bounds", func(t *testing.T) { scanEdges(t, tg) })
	t.Run("mutated-bounds", func(t *testing.T) { scanMutatedBounds(t, tg) })
	t.Run("early-break-io", func(t *testing.T) { scanEarlyBreakIO(t, tg) })
}

// randomBound draws a scan bound around the keys of the oracle.
func (tg Target) randomBound(r *rand.Rand, keys [][]byte) []byte {
	k := keys[r.IntN(len(keys))]
	switch r.IntN(10) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2, 3:
		return k // a key (or a former key)
	case 4:
		return k[:r.IntN(len(k))] // a prefix of a key
	case 5:
		return append(bytes.Clone(k), 0x00) // just after a key
	case 6:
		b := bytes.Clone(k) // next to a key
		b[len(b)-1] += byte(1 + r.IntN(2)*254)
		return b
	case 7:
		return append(bytes.Clone(k), bytes.Repeat([]byte{0xff}, tg.MaxKeyLen)...) // longer than any key
	default:
		b := make([]byte, 1+r.IntN(10)) // random
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	}
}

func scanRandom(t *testing.T, tg Target) {
	ctx := t.Context()
	r := newRand(seedFor(t))
	n, scans := 3000, 1500
	if testing.Short() {
		n, scans = 600, 250
	}
	_, idxs := tg.localIndex(t, 2)
	o := newOracle()
	gens := tg.keyGens(r.Uint64(), n)
	var keys [][]byte
	for i := range n {
		k := gens[i%len(gens)].gen(r)
		v := makeValue(uint64(i), tg.randValueLen(r, 0))
		if err := idxs[0].Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
		keys = append(keys, k)
	}
	round := func(name string) {
		t.Helper()
		for i := range scans {
			lo, hi := tg.randomBound(r, keys), tg.randomBound(r, keys)
			if hi != nil && len(hi) == 0 && r.IntN(2) == 0 {
				hi = nil
			}
			limit := r.IntN(65)
			if r.IntN(4) == 0 && hi != nil {
				limit = -1
			}
			idx := idxs[i%2]
			if p := scanN(ctx, idx, lo, hi, limit).problem(o.scan(lo, hi, limit)); p != "" {
				t.Fatalf("%s, scan %d on compute node %d: Scan(%s, %s) limit %d: %s", name, i, i%2, fmtKey(lo), fmtKey(hi), limit, p)
			}
			if p := rscanN(ctx, idx, lo, hi, limit).problem(o.rscan(lo, hi, limit)); p != "" {
				t.Fatalf("%s, scan %d on compute node %d: ReverseScan(%s, %s) limit %d: %s", name, i, i%2, fmtKey(lo), fmtKey(hi), limit, p)
			}
			checkScanLimit(t, ctx, idx, o, lo, hi, limit)
		}
	}
	round("fresh index")
	// Deletes, overwrites (other sizes) and inserts, then again.
	for i, k := range keys {
		switch i % 3 {
		case 0:
			if _, err := idxs[1].Delete(ctx, k); err != nil {
				t.Fatalf("Delete(%s): %v", fmtKey(k), err)
			}
			o.del(k)
		case 1:
			v := makeValue(uint64(1<<32|i), tg.randValueLen(r, 0))
			if err := idxs[1].Put(ctx, k, v); err != nil {
				t.Fatalf("Put(%s): %v", fmtKey(k), err)
			}
			o.put(k, v)
		}
	}
	for i := range n / 3 {
		k := gens[i%len(gens)].gen(r)
		v := makeValue(uint64(2<<32|i), tg.randValueLen(r, 0))
		if err := idxs[0].Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
		keys = append(keys, k)
	}
	round("after deletes, overwrites and inserts")
	tg.verify(t, ctx, idxs[0], "after the scans")
	checkAll(t, ctx, idxs[1], o, "after the scans")
}

// checkScanLimit checks index.ScanLimit and index.ReverseScanLimit of idx
// with limit (<= 0: no bound) against the oracle: the first limit pairs of
// the range, the scan ending by itself.
func checkScanLimit(t *testing.T, ctx context.Context, idx index.Index, o *oracle, lo, hi []byte, limit int) {
	t.Helper()
	want := limit
	if limit <= 0 {
		want = -1
	}
	if p := scanLimit(ctx, idx, lo, hi, limit).problem(o.scan(lo, hi, want)); p != "" {
		t.Fatalf("ScanLimit(%s, %s, %d): %s", fmtKey(lo), fmtKey(hi), limit, p)
	}
	if p := rscanLimit(ctx, idx, lo, hi, limit).problem(o.rscan(lo, hi, want)); p != "" {
		t.Fatalf("ReverseScanLimit(%s, %s, %d): %s", fmtKey(lo), fmtKey(hi), limit, p)
	}
}

func scanEdges(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := tg.populate(t, idx, 300)
	all := o.all()
	first, last := []byte(all[0].k), []byte(all[len(all)-1].k)
	mid := []byte(all[len(all)/2].k)
	long := bytes.Repeat([]byte{0xff}, tg.MaxKeyLen+3)
	cases := []struct {
		name   string
		lo, hi []byte
	}{
		{"nil-nil", nil, nil},
		{"empty-nil", []byte{}, nil},
		{"nil-empty (only a nil hi means no upper bound)", nil, []byte{}},
		{"lo==hi key", mid, mid},
		{"lo==hi non-key", append(bytes.Clone(mid), 0), append(bytes.Clone(mid), 0)},
		{"lo>hi", last, first},
		{"lo>hi adjacent", append(bytes.Clone(mid), 0), mid},
		{"first-only", first, append(bytes.Clone(first), 0)},
		{"last-only", last, nil},
		{"last-excluded", nil, last},
		{"after-last", append(bytes.Clone(last), 0), nil},
		{"below-first", nil, first},
		{"long-lo", append(bytes.Clone(mid), long...), nil},
		{"long-hi", nil, append(bytes.Clone(mid), long...)},
		{"all-ff-long", long, nil},
		{"zero-lo", []byte{0}, []byte{0, 0}},
	}
	for _, c := range cases {
		for _, limit := range []int{-1, 0, 1, 2, 10} {
			if p := scanN(ctx, idx, c.lo, c.hi, limit).problem(o.scan(c.lo, c.hi, limit)); p != "" {
				t.Errorf("%s: Scan(%s, %s) limit %d: %s", c.name, fmtKey(c.lo), fmtKey(c.hi), limit, p)
			}
			checkScanLimit(t, ctx, idx, o, c.lo, c.hi, limit)
		}
	}
	// A scan from every key, limit 3; a scan up to every key, limit 3.
	for i, kv := range all {
		k := []byte(kv.k)
		if p := scanN(ctx, idx, k, nil, 3).problem(o.scan(k, nil, 3)); p != "" {
			t.Fatalf("Scan(%s, nil) limit 3: %s", fmtKey(k), p)
		}
		if i >= 3 {
			lo := []byte(all[i-3].k)
			if p := scanN(ctx, idx, lo, k, -1).problem(o.scan(lo, k, -1)); p != "" {
				t.Fatalf("Scan(%s, %s): %s", fmtKey(lo), fmtKey(k), p)
			}
		}
	}
}

// scanMutatedBounds overwrites the caller's lo and hi after every pair of
// the four scans, widening the range (lo all 0x00, hi all 0xff) or emptying
// it (the other way round): the scans must yield the range the bounds held
// when the iteration started (index.Index), as a caller that reuses its
// buffers expects.
func scanMutatedBounds(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := tg.populate(t, idx, 600)
	all := o.all()
	lo0, hi0 := []byte(all[50].k), []byte(all[len(all)-50].k)
	for _, widen := range []bool{true, false} {
		for _, m := range []struct {
			method string
			limit  int // -1: no bound
			seq    func(lo, hi []byte) iter.Seq2[index.KV, error]
			want   func(lo, hi []byte, limit int) []okv
		}{
			{"Scan", -1, func(lo, hi []byte) iter.Seq2[index.KV, error] { return idx.Scan(ctx, lo, hi) }, o.scan},
			{"ReverseScan", -1, func(lo, hi []byte) iter.Seq2[index.KV, error] { return idx.ReverseScan(ctx, lo, hi) }, o.rscan},
			{"ScanLimit", 300, func(lo, hi []byte) iter.Seq2[index.KV, error] { return index.ScanLimit(ctx, idx, lo, hi, 300) }, o.scan},
			{"ReverseScanLimit", 300, func(lo, hi []byte) iter.Seq2[index.KV, error] {
				return index.ReverseScanLimit(ctx, idx, lo, hi, 300)
			}, o.rscan},
		} {
			lo, hi := bytes.Clone(lo0), bytes.Clone(hi0)
			loByte, hiByte := byte(0x00), byte(0xff)
			if !widen {
				loByte, hiByte = hiByte, loByte
			}
			mutate := func() {
				for i := range lo {
					lo[i] = loByte
				}
				for i := range hi {
					hi[i] = hiByte
				}
			}
			seq := m.seq(lo, hi)
			out := consume(func(yield func(index.KV, error) bool) {
				for kv, err := range seq {
					if !yield(kv, err) {
						return
					}
					mutate()
				}
			}, -1, m.method)
			if p := out.problem(m.want(lo0, hi0, m.limit)); p != "" {
				t.Errorf("%s(%s, %s) limit %d with its bounds overwritten (widening %v) inside the loop: %s",
					m.method, fmtKey(lo0), fmtKey(hi0), m.limit, widen, p)
			}
		}
	}
}

func scanEarlyBreakIO(t *testing.T, tg Target) {
	ctx := t.Context()
	r := newRand(seedFor(t))
	// Large enough that the whole range dwarfs any sensible read-ahead
	// (a root path plus a frontier of a few nodes per level).
	n := 12000
	if testing.Short() {
		n = 6000
	}
	pool, idxs := tg.localIndex(t, 1)
	vlen := tg.vlen(64)
	o := newOracle()
	for i := range n {
		k := tg.fitKey(be64(r.Uint64()))
		if i%2 == 1 {
			k = tg.fitKey(append([]byte("scan/"), alphaKey(r, 1+r.IntN(8))...))
		}
		v := makeValue(uint64(i), vlen)
		if err := idxs[0].Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
	}
	all := o.all()
	// A fresh compute node: nothing cached. Its first operation (a Get of
	// a key after every key of the range) registers its client and
	// reserves its redo slots, reading in full any record the slots'
	// previous incarnations left (73 KB in one run, more than 1/8 of the
	// full scan): that is the client's start, not the scan's cost.
	cn := pool.NewComputeNode()
	idx := tg.open(t, cn, idxName(t))
	if _, _, err := idx.Get(ctx, tg.fitKey(bytes.Repeat([]byte{0xff}, 8))); err != nil {
		t.Fatal(err)
	}
	measure := func(lo, hi []byte, limit int) (uint64, int) {
		t.Helper()
		before := cn.Stats()
		s := scanN(ctx, idx, lo, hi, limit)
		if p := s.problem(o.scan(lo, hi, limit)); p != "" {
			t.Fatalf("Scan(%s, %s) limit %d: %s", fmtKey(lo), fmtKey(hi), limit, p)
		}
		return cn.Stats().Sub(before).ReadBytes, len(s.kvs)
	}
	starts := [][]byte{nil, []byte(all[len(all)/3].k), []byte("scan/"), []byte(all[len(all)-40].k)}
	cold, _ := measure(starts[1], nil, 10)
	full, got := measure(nil, nil, -1)
	if got != len(all) {
		t.Fatalf("full scan yielded %d pairs, want %d", got, len(all))
	}
	if full == 0 {
		t.Fatalf("a full scan of %d pairs read no remote memory: cannot measure", got)
	}
	t.Logf("full scan of %d pairs: %d bytes read; scan of 10 pairs on a cold compute node: %d bytes", got, full, cold)
	if cold*8 > full {
		t.Errorf("a scan stopped after 10 pairs on a cold compute node read %d bytes, more than 1/8 of a full scan's %d: it does not fetch incrementally", cold, full)
	}
	var worst uint64
	for _, lo := range starts {
		for _, hi := range [][]byte{nil, []byte(all[len(all)-1].k)} {
			for _, limit := range []int{1, 10} {
				b, _ := measure(lo, hi, limit)
				worst = max(worst, b)
				if b*8 > full {
					t.Errorf("Scan(%s, %s) stopped after %d pairs read %d bytes, more than 1/8 of a full scan's %d", fmtKey(lo), fmtKey(hi), limit, b, full)
				}
			}
		}
	}
	t.Logf("warm scans stopped after 1 or 10 pairs read at most %d bytes", worst)
	// Breaking out of a range loop stops the scan too.
	before := cn.Stats()
	count := 0
	for _, err := range idx.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if count++; count == 10 {
			break
		}
	}
	if b := cn.Stats().Sub(before).ReadBytes; b*8 > full {
		t.Errorf("a range loop broken after 10 pairs read %d bytes, more than 1/8 of a full scan's %d", b, full)
	}
	// A scan told its length (index.LimitScanner) reads less than one its
	// caller stops, over scans of 10 to 100 pairs from many keys.
	if _, ok := idx.(index.LimitScanner); !ok {
		return
	}
	var told, stopped uint64
	for i := range 40 {
		lo := []byte(all[r.IntN(len(all)-100)].k)
		limit := []int{10, 50, 100}[i%3]
		b, _ := measure(lo, nil, limit)
		stopped += b
		before := cn.Stats()
		if p := scanLimit(ctx, idx, lo, nil, limit).problem(o.scan(lo, nil, limit)); p != "" {
			t.Fatalf("ScanLimit(%s, nil, %d): %s", fmtKey(lo), limit, p)
		}
		told += cn.Stats().Sub(before).ReadBytes
	}
	t.Logf("40 scans of 10 to 100 pairs read %d bytes told their length, %d stopped by the caller", told, stopped)
	if told >= stopped {
		t.Errorf("40 scans of 10 to 100 pairs read %d bytes told their length (ScanLimit), not less than the %d they read stopped by the caller: the limit does not bound the read-ahead", told, stopped)
	}
}
