package indextest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// keySet is a named set of adversarial keys.
type keySet struct {
	name string
	keys [][]byte
}

// adversarialKeySets returns the key sets of RunKeys, fitted to the target
// and deduplicated.
func (tg Target) adversarialKeySets(r *rand.Rand) []keySet {
	L := tg.MaxKeyLen
	var sets []keySet
	add := func(name string, keys [][]byte) {
		sets = append(sets, keySet{name, tg.dedupe(keys)})
	}

	// Prefix chains: every key is a prefix of the next.
	var chain, zeros, ones [][]byte
	for n := 1; n <= L; n++ {
		k := make([]byte, n)
		for i := range k {
			k[i] = 'a' + byte(i%26)
		}
		chain = append(chain, k)
		zeros = append(zeros, bytes.Repeat([]byte{0x00}, n))
		ones = append(ones, bytes.Repeat([]byte{0xff}, n))
	}
	add("prefix-chain", chain)
	add("zero-chain", zeros)
	add("ff-chain", ones)
	add("zero-and-ff-chains", slices.Concat(zeros, ones))

	// Extreme bytes in every position, keys that are prefixes of each other.
	ext := [][]byte{
		{0x00}, {0x00, 0x00}, {0xff}, {0xff, 0xff}, {0x00, 0xff}, {0xff, 0x00}, {0x01}, {0xfe},
		[]byte("a"), []byte("a\x00"), []byte("a\x00\x00"), []byte("a\xff"), []byte("a\xff\xff"),
		[]byte("a\x00a"), []byte("a\xffa"), []byte("\x00a"), []byte("\xffa"), []byte("ab"), []byte("b"),
		[]byte("\x00\x00\x00\x00\x00\x00\x00\x00"), []byte("\xff\xff\xff\xff\xff\xff\xff\xff"),
		[]byte("\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("\x7f\xff\xff\xff\xff\xff\xff\xff"),
		[]byte("\x80\x00\x00\x00\x00\x00\x00\x00"),
	}
	for p := 0; p < 3; p++ {
		for _, b := range []byte{0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff} {
			k := bytes.Repeat([]byte{'k'}, p)
			ext = append(ext, append(k, b), append(append(k, b), b))
		}
	}
	add("extreme-bytes", ext)

	// Keys of the maximum length, differing at the first, last or a middle
	// byte, plus their prefixes.
	var maxLen [][]byte
	base := make([]byte, L)
	for i := range base {
		base[i] = byte(r.Uint32())
	}
	maxLen = append(maxLen, bytes.Repeat([]byte{0x00}, L), bytes.Repeat([]byte{0xff}, L), base)
	for _, pos := range []int{0, 1, L / 2, L - 2, L - 1} {
		for _, b := range []byte{0x00, 0x01, 0xfe, 0xff} {
			k := bytes.Clone(base)
			k[pos] = b
			maxLen = append(maxLen, k)
		}
	}
	maxLen = append(maxLen, base[:L-1], base[:L/2], base[:1])
	add("max-length", maxLen)

	// Dense spreads: all 256 values of one byte position under a common
	// prefix of several lengths (node type switches), with and without a
	// suffix, plus the bare prefix.
	for _, p := range []int{0, 1, 3, 7, 13} {
		if p+2 > L {
			continue
		}
		prefix := bytes.Repeat([]byte{0x5a}, p)
		var ks [][]byte
		if p > 0 {
			ks = append(ks, prefix)
		}
		for b := range 256 {
			k := append(bytes.Clone(prefix), byte(b))
			ks = append(ks, k)
			if b%3 == 0 {
				ks = append(ks, append(bytes.Clone(k), byte(255-b), 0x00))
			}
		}
		add(fmt.Sprintf("dense-spread-prefix%d", p), ks)
	}

	// Growing spreads: 4, 16, 48, 256 children at one node in turn.
	var grow [][]byte
	for _, n := range []int{4, 5, 16, 17, 48, 49, 256} {
		for b := range n {
			grow = append(grow, []byte{'g', byte(n), byte(b * 251 % 256)})
		}
	}
	add("growing-spreads", grow)

	// Sparse spreads: a few byte values far apart at several depths.
	var sparse [][]byte
	for depth := range min(L-1, 10) {
		for _, b := range []byte{0x00, 0x11, 0x80, 0xee, 0xff} {
			k := bytes.Repeat([]byte{0x33}, depth)
			sparse = append(sparse, append(k, b, byte(depth)))
		}
	}
	add("sparse-spread", sparse)

	// Long shared prefixes (> 6 and > 12 bytes: header chains and header
	// splits) diverging at every position.
	for _, p := range []int{7, 13, 20, 40, L} {
		if p > L || (p == L && L <= 40) {
			continue
		}
		prefix := make([]byte, p)
		for i := range prefix {
			prefix[i] = byte(r.Uint32())
		}
		ks := [][]byte{prefix}
		for i := range p {
			for _, d := range []byte{0x01, 0x80} {
				k := bytes.Clone(prefix[:i+1])
				k[i] ^= d
				if i+2 <= L {
					k = append(k, byte(i))
				}
				ks = append(ks, k)
			}
			ks = append(ks, bytes.Clone(prefix[:i+1]))
			if p < L {
				ks = append(ks, append(bytes.Clone(prefix), byte(i)))
			}
		}
		add(fmt.Sprintf("shared-prefix%d", p), ks)
	}

	// Random keys of every length.
	var random [][]byte
	for range 400 {
		k := make([]byte, 1+r.IntN(L))
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		random = append(random, k)
	}
	add("random", random)
	return sets
}

// dedupe fits the keys to the target and removes duplicates, keeping the
// first occurrence.
func (tg Target) dedupe(keys [][]byte) [][]byte {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		k = tg.fitKey(k)
		if !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, k)
		}
	}
	return out
}

// insertion orders of RunKeys.
var keyOrders = []string{"ascending", "descending", "random", "outside-in"}

func order(keys [][]byte, how string, r *rand.Rand) [][]byte {
	ks := slices.Clone(keys)
	switch how {
	case "ascending":
		slices.SortFunc(ks, bytes.Compare)
	case "descending":
		slices.SortFunc(ks, func(a, b []byte) int { return bytes.Compare(b, a) })
	case "random":
		r.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
	case "outside-in":
		slices.SortFunc(ks, bytes.Compare)
		out := make([][]byte, 0, len(ks))
		for i, j := 0, len(ks)-1; i <= j; i, j = i+1, j-1 {
			out = append(out, ks[i])
			if i != j {
				out = append(out, ks[j])
			}
		}
		ks = out
	}
	return ks
}

// neighbours returns byte strings next to k that the target accepts: k with
// a byte appended, k without its last byte, k with its last byte changed.
func (tg Target) neighbours(k []byte) [][]byte {
	n := len(k)
	cand := [][]byte{
		append(bytes.Clone(k), 0x00), append(bytes.Clone(k), 0xff), k[:n-1],
		append(bytes.Clone(k[:n-1]), k[n-1]+1), append(bytes.Clone(k[:n-1]), k[n-1]-1),
	}
	var out [][]byte
	for _, c := range cand {
		if tg.keyOK(c) {
			out = append(out, c)
		}
	}
	return out
}

// RunKeys inserts adversarial key sets (prefix chains up to MaxKeyLen, chains
// of 0x00 and 0xFF bytes, extreme bytes in every position, maximum-length
// keys, dense spreads of all 256 values of one byte position under prefixes
// of several lengths, growing and sparse spreads, long shared prefixes
// diverging at every position, random keys of every length), each in
// several orders on a fresh index, then checks every key, neighbouring
// non-keys, full and per-key scans, deletes every other key, checks again,
// deletes the rest and reinserts everything. Verify runs after each phase.
func RunKeys(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	for _, set := range tg.adversarialKeySets(newRand(0)) {
		t.Run(set.name, func(t *testing.T) {
			seed := seedFor(t)
			r := newRand(seed)
			for _, s := range tg.adversarialKeySets(newRand(seed)) {
				if s.name == set.name {
					set = s
				}
			}
			orders := keyOrders
			if testing.Short() {
				orders = []string{keyOrders[r.IntN(len(keyOrders))]}
			}
			for _, how := range orders {
				// Each order has its own generator, so that it reproduces
				// when run alone.
				r := newRand(seed ^ hashString(how))
				t.Run(how, func(t *testing.T) { keySetRun(t, tg, order(set.keys, how, r), r) })
			}
		})
	}
}

// keySetRun is one key set in one order.
func keySetRun(t *testing.T, tg Target, keys [][]byte, r *rand.Rand) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	o := newOracle()
	inKeys := make(map[string]bool, len(keys))
	for _, k := range keys {
		inKeys[string(k)] = true
	}
	// Insert, checking each key at once and (unless -short) every key so
	// far at intervals.
	thorough := !testing.Short()
	for i, k := range keys {
		v := makeValue(uint64(i), tg.randValueLen(r, 0))
		if err := idxs[i%2].Put(ctx, k, v); err != nil {
			t.Fatalf("Put #%d (%s): %v", i, fmtKey(k), err)
		}
		o.put(k, v)
		if p := checkGet(ctx, idxs[(i+1)%2], o, k); p != "" {
			t.Fatalf("right after Put #%d: %s", i, p)
		}
		if thorough && (i+1)%64 == 0 {
			for _, k2 := range keys[:i+1] {
				if p := checkGet(ctx, idxs[i%2], o, k2); p != "" {
					t.Fatalf("after Put #%d (%s): %s", i, fmtKey(k), p)
				}
			}
		}
	}
	check := func(phase string) {
		t.Helper()
		if !tg.verify(t, ctx, idxs[0], phase) {
			t.FailNow()
		}
		for cn, idx := range idxs {
			if !checkAll(t, ctx, idx, o, fmt.Sprintf("%s on compute node %d", phase, cn)) {
				t.FailNow()
			}
		}
		for i, k := range keys {
			idx := idxs[i%2]
			if p := checkGet(ctx, idx, o, k); p != "" {
				t.Fatalf("%s: %s", phase, p)
			}
			if !thorough && i%4 != 0 {
				continue
			}
			for _, nb := range tg.neighbours(k) {
				if inKeys[string(nb)] {
					continue
				}
				if p := checkGet(ctx, idx, o, nb); p != "" {
					t.Fatalf("%s: neighbour of %s: %s", phase, fmtKey(k), p)
				}
			}
			// A scan from the key yields it first; a scan bounded by the
			// key stops before it.
			if i%4 == 0 && (thorough || i%16 == 0) {
				if p := scanN(ctx, idx, k, nil, 2).problem(o.scan(k, nil, 2)); p != "" {
					t.Fatalf("%s: Scan(%s, nil) limit 2: %s", phase, fmtKey(k), p)
				}
				lo := k[:len(k)/2]
				if p := scanN(ctx, idx, lo, k, 3).problem(o.scan(lo, k, 3)); p != "" {
					t.Fatalf("%s: Scan(%s, %s) limit 3: %s", phase, fmtKey(lo), fmtKey(k), p)
				}
			}
		}
	}
	check("after inserting")

	// Delete every other key (in the insertion order), then the rest.
	for i, k := range keys {
		if i%2 == 1 {
			continue
		}
		found, err := idxs[1].Delete(ctx, k)
		if err != nil || !found || !o.del(k) {
			t.Fatalf("Delete(%s) = %v, %v; want true, nil", fmtKey(k), found, err)
		}
	}
	check("after deleting every other key")
	for i, k := range keys {
		found, err := idxs[0].Delete(ctx, k)
		want := i%2 == 1
		o.del(k)
		if err != nil || found != want {
			t.Fatalf("Delete(%s) = %v, %v; want %v, nil", fmtKey(k), found, err, want)
		}
	}
	check("after deleting every key")

	// Reinsert in reverse order with new values.
	for i, k := range slices.Backward(keys) {
		v := makeValue(uint64(1<<32|i), tg.randValueLen(r, 0))
		if err := idxs[1].Put(ctx, k, v); err != nil {
			t.Fatalf("reinsert Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
	}
	check("after reinserting")
}
