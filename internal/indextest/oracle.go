package indextest

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/google/btree"
)

// okv is one pair of the oracle. Strings compare bytewise, like keys.
type okv struct{ k, v string }

// oracle is the ordered in-memory model every index is compared with.
type oracle struct{ bt *btree.BTreeG[okv] }

func newOracle() *oracle {
	return &oracle{bt: btree.NewG(16, func(a, b okv) bool { return a.k < b.k })}
}

func (o *oracle) put(k, v []byte) { o.bt.ReplaceOrInsert(okv{string(k), string(v)}) }

func (o *oracle) get(k []byte) (string, bool) {
	kv, ok := o.bt.Get(okv{k: string(k)})
	return kv.v, ok
}

func (o *oracle) del(k []byte) bool {
	_, ok := o.bt.Delete(okv{k: string(k)})
	return ok
}

func (o *oracle) len() int { return o.bt.Len() }

// scan returns the pairs with lo <= key < hi (nil hi: no bound), at most
// limit of them (limit < 0: all).
func (o *oracle) scan(lo, hi []byte, limit int) []okv {
	var out []okv
	if limit == 0 || (hi != nil && string(lo) >= string(hi)) {
		return nil
	}
	visit := func(kv okv) bool {
		out = append(out, kv)
		return limit < 0 || len(out) < limit
	}
	if hi == nil {
		o.bt.AscendGreaterOrEqual(okv{k: string(lo)}, visit)
	} else {
		o.bt.AscendRange(okv{k: string(lo)}, okv{k: string(hi)}, visit)
	}
	return out
}

// rscan returns up to limit pairs of [lo, hi) in descending order (nil hi:
// unbounded; limit < 0: all).
func (o *oracle) rscan(lo, hi []byte, limit int) []okv {
	var out []okv
	if limit == 0 || (hi != nil && string(lo) >= string(hi)) {
		return nil
	}
	visit := func(kv okv) bool {
		if hi != nil && kv.k >= string(hi) {
			return true
		}
		if kv.k < string(lo) {
			return false
		}
		out = append(out, kv)
		return limit < 0 || len(out) < limit
	}
	if hi == nil {
		o.bt.Descend(visit)
	} else {
		o.bt.DescendLessOrEqual(okv{k: string(hi)}, visit)
	}
	return out
}

// all returns every pair in order.
func (o *oracle) all() []okv { return o.scan(nil, nil, -1) }

// scanOut is what one scan produced.
type scanOut struct {
	kvs []index.KV
	err error // the error the sequence yielded, if any
	// proto lists violations of the iterator protocol: a yield after the
	// consumer stopped, a yield after an error, an error with a non-zero
	// KV.
	proto []string
}

// scanN runs idx.Scan(ctx, lo, hi) and consumes at most limit pairs
// (limit < 0: all; 0: stops at the first yield), watching the iterator
// protocol. It does not copy the yielded slices.
func scanN(ctx context.Context, idx index.Index, lo, hi []byte, limit int) scanOut {
	return consume(idx.Scan(ctx, lo, hi), limit, "Scan")
}

// rscanN is scanN for idx.ReverseScan.
func rscanN(ctx context.Context, idx index.Index, lo, hi []byte, limit int) scanOut {
	return consume(idx.ReverseScan(ctx, lo, hi), limit, "ReverseScan")
}

// scanLimit runs index.ScanLimit(ctx, idx, lo, hi, limit) (limit <= 0: no
// bound) and consumes all it yields: the scan must stop by itself after
// limit pairs.
func scanLimit(ctx context.Context, idx index.Index, lo, hi []byte, limit int) scanOut {
	return consume(index.ScanLimit(ctx, idx, lo, hi, limit), -1, "ScanLimit")
}

// rscanLimit is scanLimit for index.ReverseScanLimit.
func rscanLimit(ctx context.Context, idx index.Index, lo, hi []byte, limit int) scanOut {
	return consume(index.ReverseScanLimit(ctx, idx, lo, hi, limit), -1, "ReverseScanLimit")
}

// consume consumes at most limit pairs of seq, the sequence that method
// returned, watching the iterator protocol.
func consume(seq iter.Seq2[index.KV, error], limit int, method string) scanOut {
	var out scanOut
	stopped, failed := false, false
	if seq == nil {
		out.proto = append(out.proto, method+" returned a nil sequence")
		return out
	}
	seq(func(kv index.KV, err error) bool {
		switch {
		case stopped:
			out.proto = append(out.proto, "yield called again after it returned false")
			return false
		case failed:
			out.proto = append(out.proto, fmt.Sprintf("yield called after the error %v (key %s, err %v)", out.err, fmtKey(kv.Key), err))
			return false
		case err != nil:
			failed = true
			out.err = err
			if kv.Key != nil || kv.Value != nil {
				out.proto = append(out.proto, fmt.Sprintf("error %v yielded with a non-zero KV (key %s)", err, fmtKey(kv.Key)))
			}
			return true // the sequence must stop by itself
		case limit >= 0 && len(out.kvs) >= limit:
			stopped = true
			return false
		}
		out.kvs = append(out.kvs, kv)
		if limit >= 0 && len(out.kvs) >= limit {
			stopped = true
			return false
		}
		return true
	})
	return out
}

// problem describes what is wrong with a scan's result compared with want
// ("" if nothing).
func (s scanOut) problem(want []okv) string {
	if len(s.proto) > 0 {
		return "iterator protocol: " + strings.Join(s.proto, "; ")
	}
	if s.err != nil {
		return fmt.Sprintf("error %v after %d pairs", s.err, len(s.kvs))
	}
	return diffKVs(s.kvs, want)
}

// diffKVs describes the first difference between got and want ("" if
// none).
func diffKVs(got []index.KV, want []okv) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if string(g.Key) != w.k {
			msg := fmt.Sprintf("pair %d: key %s, want %s", i, fmtKey(g.Key), fmtKey([]byte(w.k)))
			if i > 0 && string(g.Key) <= string(got[i-1].Key) {
				msg += fmt.Sprintf(" (not after previous key %s: order or duplicate)", fmtKey(got[i-1].Key))
			} else if string(g.Key) > w.k {
				msg += " (a key is missing)"
			} else {
				msg += " (an extra key)"
			}
			return msg
		}
		if string(g.Value) != w.v {
			return fmt.Sprintf("pair %d, key %s: value %s, want %s", i, fmtKey(g.Key), fmtVal(g.Value), fmtVal([]byte(w.v)))
		}
	}
	switch {
	case len(got) > len(want):
		return fmt.Sprintf("%d pairs, want %d; first extra key %s", len(got), len(want), fmtKey(got[len(want)].Key))
	case len(got) < len(want):
		return fmt.Sprintf("%d pairs, want %d; first missing key %s", len(got), len(want), fmtKey([]byte(want[len(got)].k)))
	}
	return ""
}

// checkAll compares a full scan of idx with the oracle.
func checkAll(t testing.TB, ctx context.Context, idx index.Index, o *oracle, when string) bool {
	t.Helper()
	if p := scanN(ctx, idx, nil, nil, -1).problem(o.all()); p != "" {
		t.Errorf("full scan %s: %s", when, p)
		return false
	}
	return true
}

// checkGet compares idx.Get(key) with the oracle.
func checkGet(ctx context.Context, idx index.Index, o *oracle, key []byte) string {
	v, found, err := idx.Get(ctx, key)
	want, wantFound := o.get(key)
	switch {
	case err != nil:
		return fmt.Sprintf("Get(%s): %v", fmtKey(key), err)
	case found != wantFound:
		return fmt.Sprintf("Get(%s): found=%v, want %v (value %s)", fmtKey(key), found, wantFound, fmtVal(v))
	case found && string(v) != want:
		return fmt.Sprintf("Get(%s): value %s, want %s", fmtKey(key), fmtVal(v), fmtVal([]byte(want)))
	case !found && len(v) != 0:
		return fmt.Sprintf("Get(%s): not found but returned value %s", fmtKey(key), fmtVal(v))
	}
	return ""
}

// keyGen draws random keys of one distribution.
type keyGen struct {
	name string
	gen  func(r *rand.Rand) []byte
}

// alphabet is a small alphabet that makes keys share prefixes, be prefixes
// of one another and hold the extreme bytes.
var alphabet = []byte{0x00, 0x01, 'a', 'b', 0x7f, 0x80, 0xfe, 0xff}

func alphaKey(r *rand.Rand, n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = alphabet[r.IntN(len(alphabet))]
	}
	return k
}

// keyGens returns the key distributions of the randomized tests, fitted to
// the target. n is the number of keys the test is going to draw.
func (tg Target) keyGens(seed uint64, n int) []keyGen {
	r := newRand(seed)
	prefix := make([]byte, min(tg.MaxKeyLen, 40))
	for i := range prefix {
		prefix[i] = byte(r.Uint32())
	}
	few := make([][]byte, 24)
	for i := range few {
		few[i] = tg.fitKey(alphaKey(r, 1+r.IntN(min(6, tg.MaxKeyLen))))
	}
	gens := []keyGen{
		{"alphabet", func(r *rand.Rand) []byte {
			return tg.fitKey(alphaKey(r, 1+r.IntN(min(12, tg.MaxKeyLen))))
		}},
		{"binary", func(r *rand.Rand) []byte {
			k := make([]byte, 1+r.IntN(1+r.IntN(tg.MaxKeyLen)))
			for i := range k {
				k[i] = byte(r.Uint32())
			}
			return tg.fitKey(k)
		}},
		{"uint64", func(r *rand.Rand) []byte {
			return tg.fitKey(be64(uint64(r.IntN(2 * n))))
		}},
		{"shared-prefix", func(r *rand.Rand) []byte {
			p := len(prefix) - r.IntN(1+r.IntN(len(prefix)))
			k := append([]byte(nil), prefix[:p]...)
			k = append(k, alphaKey(r, r.IntN(4))...)
			if len(k) == 0 {
				k = []byte{prefix[0]}
			}
			return tg.fitKey(k)
		}},
		{"few-keys", func(r *rand.Rand) []byte { return few[r.IntN(len(few))] }},
	}
	return gens
}

// be64 returns x as 8 big-endian bytes.
func be64(x uint64) []byte {
	return []byte{byte(x >> 56), byte(x >> 48), byte(x >> 40), byte(x >> 32), byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}
}

// RunOracle runs long random sequences of Put, Get, Delete and Scan through
// the indexes opened under one name on three compute nodes (each operation
// on a randomly chosen one, so stale compute-node caches are caught) and
// compares every result with an in-memory ordered oracle. Each key
// distribution (a small alphabet, random binary keys, 8-byte integers, keys
// sharing a 40-byte prefix cut at random lengths, a few hot keys) runs as its
// own subtest on a fresh index. Verify runs eight times during each sequence
// and at its end, and the final full scan must equal the oracle. A
// "fill-drain" subtest fills the index, deletes every key, and refills it.
func RunOracle(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	ops := 12000
	if testing.Short() {
		ops = 1500
	}
	for _, g := range tg.keyGens(0, ops) {
		t.Run(g.name, func(t *testing.T) {
			seed := seedFor(t)
			gens := tg.keyGens(seed, ops)
			for _, gg := range gens {
				if gg.name == g.name {
					g = gg
				}
			}
			oracleRun(t, tg, g, newRand(seed), ops)
		})
	}
	t.Run("fill-drain", func(t *testing.T) {
		fillDrain(t, tg, newRand(seedFor(t)), ops/3)
	})
}

// oracleRun is one random sequence of RunOracle.
func oracleRun(t *testing.T, tg Target, g keyGen, r *rand.Rand, ops int) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 3)
	o := newOracle()
	var keys [][]byte
	pick := func() []byte {
		if len(keys) > 0 && r.IntN(100) < 60 {
			return keys[r.IntN(len(keys))]
		}
		k := g.gen(r)
		keys = append(keys, k)
		return k
	}
	fail := func(i, cn int, format string, args ...any) {
		t.Helper()
		t.Fatalf("op %d on compute node %d (%d keys in the oracle): %s", i, cn, o.len(), fmt.Sprintf(format, args...))
	}
	for i := range ops {
		cn := r.IntN(len(idxs))
		idx := idxs[cn]
		key := pick()
		switch x := r.IntN(100); {
		case x < 40:
			v := makeValue(uint64(i), tg.randValueLen(r, 0))
			if err := idx.Put(ctx, key, v); err != nil {
				fail(i, cn, "Put(%s, %d bytes): %v", fmtKey(key), len(v), err)
			}
			o.put(key, v)
		case x < 65:
			if p := checkGet(ctx, idx, o, key); p != "" {
				fail(i, cn, "%s", p)
			}
		case x < 85:
			found, err := idx.Delete(ctx, key)
			want := o.del(key)
			if err != nil || found != want {
				fail(i, cn, "Delete(%s) = %v, %v; want %v, nil", fmtKey(key), found, err, want)
			}
		default:
			lo := key[:r.IntN(len(key)+1)]
			var hi []byte
			if r.IntN(2) == 0 {
				hi = pick()
			}
			limit := 1 + r.IntN(48)
			if p := scanN(ctx, idx, lo, hi, limit).problem(o.scan(lo, hi, limit)); p != "" {
				fail(i, cn, "Scan(%s, %s) limit %d: %s", fmtKey(lo), fmtKey(hi), limit, p)
			}
		}
		if (i+1)%(ops/8) == 0 {
			if !tg.verify(t, ctx, idxs[0], fmt.Sprintf("after op %d", i)) ||
				!checkAll(t, ctx, idxs[r.IntN(len(idxs))], o, fmt.Sprintf("after op %d", i)) {
				t.FailNow()
			}
		}
	}
	tg.verify(t, ctx, idxs[1], "at the end")
	for cn, idx := range idxs {
		checkAll(t, ctx, idx, o, fmt.Sprintf("at the end on compute node %d", cn))
	}
	for _, k := range keys {
		if p := checkGet(ctx, idxs[2], o, k); p != "" {
			t.Fatalf("at the end: %s", p)
		}
	}
}

// fillDrain fills an index, deletes every key in random order, checks that it
// is empty, and fills it again.
func fillDrain(t *testing.T, tg Target, r *rand.Rand, n int) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	o := newOracle()
	gens := tg.keyGens(r.Uint64(), n)
	fill := func(round int) [][]byte {
		var keys [][]byte
		for i := range n {
			k := gens[i%len(gens)].gen(r)
			v := makeValue(uint64(round<<32|i), tg.randValueLen(r, 0))
			if err := idxs[i%2].Put(ctx, k, v); err != nil {
				t.Fatalf("fill %d: Put(%s): %v", round, fmtKey(k), err)
			}
			o.put(k, v)
			keys = append(keys, k)
		}
		return keys
	}
	keys := fill(1)
	tg.verify(t, ctx, idxs[0], "after the first fill")
	checkAll(t, ctx, idxs[1], o, "after the first fill")
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for i, k := range keys {
		found, err := idxs[i%2].Delete(ctx, k)
		if want := o.del(k); err != nil || found != want {
			t.Fatalf("drain: Delete(%s) = %v, %v; want %v, nil", fmtKey(k), found, err, want)
		}
	}
	tg.verify(t, ctx, idxs[0], "after draining")
	for i, idx := range idxs {
		if p := scanN(ctx, idx, nil, nil, -1).problem(nil); p != "" {
			t.Errorf("full scan of the drained index on compute node %d: %s", i, p)
		}
	}
	for _, k := range keys[:min(len(keys), 200)] {
		if p := checkGet(ctx, idxs[0], o, k); p != "" {
			t.Fatalf("drained index: %s", p)
		}
	}
	fill(2)
	tg.verify(t, ctx, idxs[1], "after the second fill")
	checkAll(t, ctx, idxs[0], o, "after the second fill")
}
