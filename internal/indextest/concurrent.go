package indextest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// RunConcurrent runs goroutines on several compute nodes over one pool in
// local mode; run it under -race. It checks:
//
//   - disjoint-inserts: goroutines insert disjoint, interleaved keys; all
//     are present afterwards on every compute node;
//   - shared-prefix-splits: the same with keys sharing a long prefix and
//     diverging at every depth, so that header splits and node type switches
//     race;
//   - same-key-contention: all goroutines overwrite and read a few keys;
//     every value read, and the final one, is a value written to that key;
//   - delete-reinsert: goroutines delete and reinsert their keys,
//     interleaved with the others' in key order, checking each result;
//   - scan-with-writers: scans concurrent with writers yield every key
//     present for the whole scan exactly once, in order, with intact values
//     (bounded ones, index.ScanLimit, up to their last pair); an
//     index.Compacter is compacted meanwhile, a random range at a time;
//   - empty-start: every goroutine inserts into an empty index at once;
//   - mixed: the mixed workload of RunSim, with hot keys checked by
//     linearizability.
//
// Verify runs after each of them.
func RunConcurrent(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	cfg := concCfg{cns: 4, per: 6, scale: 4}
	if testing.Short() {
		cfg = concCfg{cns: 3, per: 4, scale: 1}
	}
	t.Run("disjoint-inserts", func(t *testing.T) {
		r := newRand(seedFor(t))
		var keys [][]byte
		for _, g := range tg.keyGens(r.Uint64(), 200*cfg.scale) {
			if g.name == "few-keys" {
				continue
			}
			for range 150 * cfg.scale {
				keys = append(keys, g.gen(r))
			}
		}
		concurrentInsert(t, tg, cfg, tg.dedupe(keys), r)
	})
	t.Run("shared-prefix-splits", func(t *testing.T) {
		r := newRand(seedFor(t))
		prefix := make([]byte, min(tg.MaxKeyLen-2, 24))
		for i := range prefix {
			prefix[i] = byte(r.Uint32())
		}
		var keys [][]byte
		for range 400 * cfg.scale {
			d := r.IntN(len(prefix) + 1)
			k := append(bytes.Clone(prefix[:d]), byte(r.Uint32()))
			if r.IntN(2) == 0 {
				k = append(k, alphabet[r.IntN(len(alphabet))])
			}
			keys = append(keys, k)
		}
		concurrentInsert(t, tg, cfg, tg.dedupe(keys), r)
	})
	t.Run("same-key-contention", func(t *testing.T) { sameKey(t, tg, cfg) })
	t.Run("delete-reinsert", func(t *testing.T) { deleteReinsert(t, tg, cfg) })
	t.Run("scan-with-writers", func(t *testing.T) { scanWithWriters(t, tg, cfg) })
	t.Run("empty-start", func(t *testing.T) {
		pool := tg.pool
		for round := range 2 + 3*cfg.scale {
			for _, p := range stressEmpty(t.Context(), tg, pool, fmt.Sprintf("%s-%d", idxName(t), round), cfg.cns, 2*cfg.per, 4) {
				t.Error(p)
			}
		}
	})
	t.Run("mixed", func(t *testing.T) {
		seed := seedFor(t)
		var clock atomic.Int64
		w := &workload{tg: tg, perCN: cfg.per, ops: 150 * cfg.scale, ownKeys: 16, hot: 6, hotPct: 15, stable: 100, seed: seed,
			clock: func() int64 { return clock.Add(1) }}
		out := runMixed(t.Context(), tg, tg.pool, idxName(t), w, cfg.cns)
		for _, p := range out.problems {
			t.Error(p)
		}
		t.Logf("%d operations, %d failed with ErrContention", out.ops, out.contention)
		checkLinearizable(t, out.history, "hot keys")
	})
}

// concCfg sizes the concurrent tests.
type concCfg struct {
	cns, per int // compute nodes, goroutines per compute node
	scale    int // work multiplier
}

// goAll runs fn(g, idx) for every goroutine g of cfg, with the index of its
// compute node, and waits; it returns the problems the goroutines reported.
func goAll(t *testing.T, pool *remote.Pool, idxs []index.Index, cfg concCfg, fn func(g int, idx index.Index) []string) []string {
	t.Helper()
	n := cfg.cns * cfg.per
	res := make([][]string, n)
	for g := range n {
		idx := idxs[g%len(idxs)]
		pool.Go(func() { res[g] = fn(g, idx) })
	}
	if err := pool.Wait(); err != nil {
		t.Fatalf("pool.Wait: %v", err)
	}
	var out []string
	for _, r := range res {
		out = append(out, r...)
	}
	return out
}

// report fails the test with the first problems.
func report(t *testing.T, problems []string) {
	t.Helper()
	for i, p := range problems {
		if i == 20 {
			t.Errorf("… and %d more", len(problems)-20)
			break
		}
		t.Error(p)
	}
	if len(problems) > 0 {
		t.FailNow()
	}
}

// concurrentInsert has the goroutines insert keys (dealt out round-robin
// after a shuffle) concurrently, each checking its own keys afterwards, and
// then checks every key from every compute node.
func concurrentInsert(t *testing.T, tg Target, cfg concCfg, keys [][]byte, r *rand.Rand) {
	ctx := t.Context()
	pool, idxs := tg.localIndex(t, cfg.cns)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	n := cfg.cns * cfg.per
	vals := make([][]byte, len(keys))
	for i := range keys {
		vals[i] = makeValue(packTag(i, i%n, 1), tg.randValueLen(r, 8))
	}
	report(t, goAll(t, pool, idxs, cfg, func(g int, idx index.Index) []string {
		for i := g; i < len(keys); i += n {
			if err := idx.Put(ctx, keys[i], vals[i]); err != nil {
				return []string{fmt.Sprintf("goroutine %d: Put(%s): %v", g, fmtKey(keys[i]), err)}
			}
		}
		for i := g; i < len(keys); i += n {
			v, found, err := idx.Get(ctx, keys[i])
			if err != nil || !found || !bytes.Equal(v, vals[i]) {
				return []string{fmt.Sprintf("goroutine %d: Get(%s) of its own key = %s, %v, %v; want %s", g, fmtKey(keys[i]), fmtVal(v), found, err, fmtVal(vals[i]))}
			}
		}
		return nil
	}))
	o := newOracle()
	for i, k := range keys {
		o.put(k, vals[i])
	}
	tg.verify(t, ctx, idxs[0], "after the concurrent inserts")
	for c, idx := range idxs {
		checkAll(t, ctx, idx, o, fmt.Sprintf("on compute node %d", c))
	}
	for i, k := range keys {
		if p := checkGet(ctx, idxs[i%len(idxs)], o, k); p != "" {
			t.Fatalf("after the concurrent inserts: %s", p)
		}
	}
}

func sameKey(t *testing.T, tg Target, cfg concCfg) {
	ctx := t.Context()
	seed := seedFor(t)
	pool, idxs := tg.localIndex(t, cfg.cns)
	keys := tg.dedupe([][]byte{[]byte("c"), []byte("c\x00"), []byte("con"), []byte("cont"), []byte("cont\xff"), []byte("d")})
	ids := make(map[string]int)
	for i, k := range keys {
		ids[string(k)] = i + 1
		if err := idxs[0].Put(ctx, k, makeValue(packTag(i+1, 0, 0), tg.vlen(8))); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
	}
	n := cfg.cns * cfg.per
	written := make([][]string, n) // per goroutine: values written, as "key\x00value"
	ops := 300 * cfg.scale
	report(t, goAll(t, pool, idxs, cfg, func(g int, idx index.Index) []string {
		r := newRand(seed ^ mix64(uint64(g)+1))
		for seq := range ops {
			k := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				v := makeValue(packTag(ids[string(k)], g+1, seq+1), tg.randValueLen(r, 8))
				err := idx.Put(ctx, k, v)
				if err != nil && !isContention(err) {
					return []string{fmt.Sprintf("goroutine %d: Put(%s): %v", g, fmtKey(k), err)}
				}
				written[g] = append(written[g], string(k)+"\x00"+string(v))
				continue
			}
			v, found, err := idx.Get(ctx, k)
			if isContention(err) {
				continue
			}
			if tag, ok := checkValue(v); err != nil || !found || !ok || tagKey(tag) != ids[string(k)] {
				return []string{fmt.Sprintf("goroutine %d: Get(%s) = %s, %v, %v; want a value written to the key", g, fmtKey(k), fmtVal(v), found, err)}
			}
		}
		return nil
	}))
	all := make(map[string]bool)
	for _, w := range written {
		for _, kv := range w {
			all[kv] = true
		}
	}
	for i, k := range keys {
		v, found, err := idxs[i%len(idxs)].Get(ctx, k)
		if err != nil || !found {
			t.Errorf("final Get(%s) = %v, %v", fmtKey(k), found, err)
			continue
		}
		if !all[string(k)+"\x00"+string(v)] && string(v) != string(makeValue(packTag(i+1, 0, 0), tg.vlen(8))) {
			t.Errorf("final Get(%s) = %s, which was never written to it", fmtKey(k), fmtVal(v))
		}
	}
	tg.verify(t, ctx, idxs[0], "after the same-key contention")
}

func deleteReinsert(t *testing.T, tg Target, cfg concCfg) {
	ctx := t.Context()
	seed := seedFor(t)
	pool, idxs := tg.localIndex(t, cfg.cns)
	n := cfg.cns * cfg.per
	// Key i of goroutine g is base_i + g: the goroutines' keys interleave.
	r := newRand(seed)
	var bases [][]byte
	for range 12 {
		b := append([]byte("r"), alphaKey(r, r.IntN(4))...)
		if !slices.ContainsFunc(bases, func(x []byte) bool { return bytes.Equal(x, b) }) {
			bases = append(bases, b)
		}
	}
	own := make([][]*ownedKey, n)
	seen := make(map[string]bool)
	for g := range n {
		for i, b := range bases {
			k := tg.fitKey(append(bytes.Clone(b), byte(g)))
			if seen[string(k)] { // padding to FixedKeyLen may merge keys
				continue
			}
			seen[string(k)] = true
			own[g] = append(own[g], &ownedKey{key: k, id: g*len(bases) + i + 1, poss: []ver{{}}})
		}
	}
	ops := 200 * cfg.scale
	report(t, goAll(t, pool, idxs, cfg, func(g int, idx index.Index) []string {
		r := newRand(seed ^ mix64(uint64(g)+1))
		for seq := range ops {
			k := own[g][r.IntN(len(own[g]))]
			present := k.poss[0].present
			if present {
				found, err := idx.Delete(ctx, k.key)
				if err != nil || !found {
					return []string{fmt.Sprintf("goroutine %d: Delete(%s) of a present key = %v, %v", g, fmtKey(k.key), found, err)}
				}
				k.set(ver{}, true)
			} else {
				v := makeValue(packTag(k.id, g+1, seq+1), tg.randValueLen(r, 8))
				if err := idx.Put(ctx, k.key, v); err != nil {
					return []string{fmt.Sprintf("goroutine %d: Put(%s): %v", g, fmtKey(k.key), err)}
				}
				k.set(ver{true, string(v)}, true)
			}
			v, found, err := idx.Get(ctx, k.key)
			if err != nil {
				return []string{fmt.Sprintf("goroutine %d: Get(%s): %v", g, fmtKey(k.key), err)}
			}
			if p := k.observe(found, v); p != "" {
				return []string{fmt.Sprintf("goroutine %d: right after its write: %s", g, p)}
			}
		}
		return nil
	}))
	o := newOracle()
	for _, ks := range own {
		for _, k := range ks {
			if k.poss[0].present {
				o.put(k.key, []byte(k.poss[0].val))
			}
		}
	}
	tg.verify(t, ctx, idxs[0], "after the deletes and reinserts")
	for c, idx := range idxs {
		checkAll(t, ctx, idx, o, fmt.Sprintf("after the deletes and reinserts, on compute node %d", c))
	}
}

func scanWithWriters(t *testing.T, tg Target, cfg concCfg) {
	ctx := t.Context()
	seed := seedFor(t)
	pool, idxs := tg.localIndex(t, cfg.cns)
	// Even i: stable keys, present all along (writers overwrite them). Odd
	// i and extensions of stable keys: volatile keys, inserted and deleted.
	m := 300
	var keys []scanKey
	seen := make(map[string]bool)
	for i := range m {
		base := []byte{'w', byte(i >> 8), byte(i)}
		cands := []scanKey{{base, 0, i%2 == 0}, {append(bytes.Clone(base), 'x'), 0, false}}
		if i%7 == 0 {
			for x := range 40 {
				cands = append(cands, scanKey{append(bytes.Clone(base), 'd', byte(x*6)), 0, false})
			}
		}
		for _, c := range cands {
			c.key = tg.fitKey(c.key)
			if seen[string(c.key)] {
				continue
			}
			seen[string(c.key)] = true
			c.id = len(keys) + 1
			keys = append(keys, c)
		}
	}
	slices.SortFunc(keys, func(a, b scanKey) int { return bytes.Compare(a.key, b.key) })
	byKey := make(map[string]scanKey, len(keys))
	var stable, volatile []scanKey
	for _, k := range keys {
		byKey[string(k.key)] = k
		if k.stable {
			stable = append(stable, k)
		} else {
			volatile = append(volatile, k)
		}
	}
	r := newRand(seed)
	for _, k := range stable {
		if err := idxs[0].Put(ctx, k.key, makeValue(packTag(k.id, 0, 0), tg.randValueLen(r, 8))); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k.key), err)
		}
	}
	for i, k := range volatile {
		if i%2 == 0 {
			if err := idxs[1].Put(ctx, k.key, makeValue(packTag(k.id, 0, 0), tg.randValueLen(r, 8))); err != nil {
				t.Fatalf("Put(%s): %v", fmtKey(k.key), err)
			}
		}
	}
	// Even goroutines write, odd ones scan; writers go on until every
	// scanner is done, so that every scan overlaps with writes.
	n := cfg.cns * cfg.per
	scanners := n / 2
	var done atomic.Int32 // scanners done
	scans := 8 * cfg.scale
	report(t, goAll(t, pool, idxs, cfg, func(g int, idx index.Index) []string {
		r := newRand(seed ^ mix64(uint64(g)+1))
		if g%2 == 0 {
			compacter, _ := idx.(index.Compacter)
			for seq := 0; seq < 400*cfg.scale || (done.Load() < int32(scanners) && seq < 20000*cfg.scale); seq++ {
				var err error
				var k scanKey
				switch x := r.IntN(10); {
				case g == 0 && seq%25 == 0 && compacter != nil:
					// Lay out a random range again under the scans.
					k = keys[r.IntN(len(keys))]
					hi := keys[r.IntN(len(keys))].key
					if bytes.Compare(k.key, hi) > 0 {
						hi = nil
					}
					_, err = compacter.Compact(ctx, k.key, hi)
				case x < 2:
					k = stable[r.IntN(len(stable))]
					err = idx.Put(ctx, k.key, makeValue(packTag(k.id, g+1, seq+1), tg.vlen(8+r.IntN(57))))
				case x < 6:
					k = volatile[r.IntN(len(volatile))]
					err = idx.Put(ctx, k.key, makeValue(packTag(k.id, g+1, seq+1), tg.vlen(8+r.IntN(57))))
				default:
					k = volatile[r.IntN(len(volatile))]
					_, err = idx.Delete(ctx, k.key)
				}
				if err != nil && !isContention(err) {
					return []string{fmt.Sprintf("writer %d: %s: %v", g, fmtKey(k.key), err)}
				}
			}
			return nil
		}
		// Scanners: full and bounded scans.
		defer done.Add(1)
		for i := range scans {
			lo, hi := []byte(nil), []byte(nil)
			if i%2 == 1 {
				lo = keys[r.IntN(len(keys))].key
				hi = keys[r.IntN(len(keys))].key
				if bytes.Compare(lo, hi) > 0 {
					lo, hi = hi, lo
				}
			}
			reverse := i%4 >= 2
			limit := 0
			if i%8 >= 4 {
				limit = 1 + r.IntN(60)
			}
			if p := checkConcurrentScan(ctx, idx, lo, hi, limit, stable, byKey, reverse); p != "" {
				method := "Scan"
				if reverse {
					method = "ReverseScan"
				}
				if limit > 0 {
					method += fmt.Sprintf("Limit(limit %d)", limit)
				}
				return []string{fmt.Sprintf("scanner %d, scan %d: %s(%s, %s): %s", g, i, method, fmtKey(lo), fmtKey(hi), p)}
			}
		}
		return nil
	}))
	tg.verify(t, ctx, idxs[0], "after the scans with writers")
}

// scanKey is a key of scan-with-writers: stable keys are present all
// along, volatile ones come and go.
type scanKey struct {
	key    []byte
	id     int
	stable bool
}

// checkConcurrentScan checks a scan (a reverse scan if reverse is set, its
// pairs then checked in reverse; through index.ScanLimit or
// index.ReverseScanLimit if limit > 0) that ran while writers changed the
// volatile keys and overwrote the stable ones.
func checkConcurrentScan(ctx context.Context, idx index.Index, lo, hi []byte, limit int, stable []scanKey, byKey map[string]scanKey, reverse bool) string {
	var s scanOut
	switch {
	case reverse && limit > 0:
		s = rscanLimit(ctx, idx, lo, hi, limit)
	case reverse:
		s = rscanN(ctx, idx, lo, hi, -1)
	case limit > 0:
		s = scanLimit(ctx, idx, lo, hi, limit)
	default:
		s = scanN(ctx, idx, lo, hi, -1)
	}
	if reverse {
		slices.Reverse(s.kvs)
	}
	if len(s.proto) > 0 {
		return fmt.Sprintf("iterator protocol: %v", s.proto)
	}
	if s.err != nil {
		if isContention(s.err) {
			return ""
		}
		return s.err.Error()
	}
	if limit > 0 && len(s.kvs) > limit {
		return fmt.Sprintf("%d pairs yielded, more than the limit", len(s.kvs))
	}
	// A scan cut short by its limit covers the range from its start (lo,
	// or hi for a reverse scan) to its last pair only.
	cut := limit > 0 && len(s.kvs) == limit
	from := lo
	if cut && reverse {
		from = s.kvs[0].Key
	}
	j := 0 // next stable key expected
	for j < len(stable) && bytes.Compare(stable[j].key, from) < 0 {
		j++
	}
	for i, kv := range s.kvs {
		if i > 0 && bytes.Compare(kv.Key, s.kvs[i-1].Key) <= 0 {
			return fmt.Sprintf("key %s after %s (order or duplicate)", fmtKey(kv.Key), fmtKey(s.kvs[i-1].Key))
		}
		if bytes.Compare(kv.Key, lo) < 0 || (hi != nil && bytes.Compare(kv.Key, hi) >= 0) {
			return fmt.Sprintf("key %s out of bounds", fmtKey(kv.Key))
		}
		k, ok := byKey[string(kv.Key)]
		if !ok {
			return fmt.Sprintf("key %s was never written", fmtKey(kv.Key))
		}
		if tag, ok := checkValue(kv.Value); !ok || tagKey(tag) != k.id {
			return fmt.Sprintf("key %s has value %s, which was never written to it", fmtKey(kv.Key), fmtVal(kv.Value))
		}
		if j < len(stable) && bytes.Compare(stable[j].key, kv.Key) < 0 {
			return fmt.Sprintf("stable key %s, present all along, is missing", fmtKey(stable[j].key))
		}
		if j < len(stable) && bytes.Equal(stable[j].key, kv.Key) {
			j++
		}
	}
	if (!cut || reverse) && j < len(stable) && (hi == nil || bytes.Compare(stable[j].key, hi) < 0) {
		return fmt.Sprintf("stable key %s, present all along, is missing (after %d pairs)", fmtKey(stable[j].key), len(s.kvs))
	}
	return ""
}
