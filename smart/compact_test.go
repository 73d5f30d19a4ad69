package smart

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// compactPair is a pair of the compaction tests' oracle.
type compactPair struct{ k, v []byte }

func compactLess(a, b compactPair) bool { return bytes.Compare(a.k, b.k) < 0 }

// loadRandom puts n random keys into tr and the oracle: 8-byte keys and
// values if maxValue is 0, else keys of 1 to 12 bytes with values of 1 to
// maxValue bytes.
func loadRandom(t *testing.T, tr *Tree, o *btree.BTreeG[compactPair], r *rand.Rand, n, maxValue int) {
	t.Helper()
	for range n {
		k := binary.BigEndian.AppendUint64(nil, r.Uint64())
		v := bytes.Clone(k)
		if maxValue > 0 {
			k = k[:1+r.IntN(8)]
			k = append(k, bytes.Repeat([]byte{byte(r.Uint32())}, r.IntN(5))...)
			v = bytes.Repeat([]byte{byte(r.Uint32())}, 1+r.IntN(maxValue))
		}
		if err := tr.Put(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
		o.ReplaceOrInsert(compactPair{k, v})
	}
}

// checkOracle checks a full scan, a full reverse scan and Verify against o.
func checkOracle(t *testing.T, tr *Tree, o *btree.BTreeG[compactPair], when string) {
	t.Helper()
	ctx := t.Context()
	var want []compactPair
	o.Ascend(func(p compactPair) bool { want = append(want, p); return true })
	var got []compactPair
	for kv, err := range tr.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatalf("%s: Scan: %v", when, err)
		}
		got = append(got, compactPair{kv.Key, kv.Value})
	}
	eq := func(a, b compactPair) bool { return bytes.Equal(a.k, b.k) && bytes.Equal(a.v, b.v) }
	if !slices.EqualFunc(got, want, eq) {
		t.Fatalf("%s: Scan yields %d pairs, the oracle holds %d (or they differ)", when, len(got), len(want))
	}
	got = got[:0]
	for kv, err := range tr.ReverseScan(ctx, nil, nil) {
		if err != nil {
			t.Fatalf("%s: ReverseScan: %v", when, err)
		}
		got = append(got, compactPair{kv.Key, kv.Value})
	}
	slices.Reverse(got)
	if !slices.EqualFunc(got, want, eq) {
		t.Fatalf("%s: ReverseScan yields %d pairs, the oracle holds %d (or they differ)", when, len(got), len(want))
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// scanReads is the READs of 100 told scans of 50 pairs from random keys
// (reverse ones if desc) and the pairs they yielded.
func scanReads(t *testing.T, tr *Tree, seed uint64, desc bool) (reads uint64, pairs int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0))
	before := tr.cn.Stats()
	for range 100 {
		from := binary.BigEndian.AppendUint64(nil, r.Uint64())
		seq := tr.ScanLimit(t.Context(), from, nil, 50)
		if desc {
			seq = tr.ReverseScanLimit(t.Context(), nil, from, 50)
		}
		for _, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			pairs++
		}
	}
	return tr.cn.Stats().Sub(before).Reads, pairs
}

// TestCompact: Compact moves every leaf of the range it is given, changes
// no pair (checked against an oracle, forward and reverse, with Verify),
// leaves a block already laid out alone, and scans of a compacted tree
// read far fewer leaves: READs of leaves next to one another in memory are
// merged (scanner.layout), forward and reverse. It fails if the merge is
// off (the scans then yield wrong pairs or read as much as before).
func TestCompact(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		maxValue int // 0: 8-byte keys and values
		keys     int
	}{
		{"8-byte", Options{}, 0, 20000},
		{"mixed", Options{}, 80, 20000},
		{"reclaim", Options{Reclaim: true}, 80, 20000},
		{"paper-nodes", Options{PaperNodes: true}, 0, 20000},
		// Blocks of one to a few leaves: the oracle, a second Compact that
		// moves nothing and scans that read no more are checked.
		{"large-values", Options{}, 3000, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := testseed.Seed(t)
			r := rand.New(rand.NewPCG(seed, 1))
			tr, _ := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20}, tc.opts)
			o := btree.NewG(8, compactLess)
			loadRandom(t, tr, o, r, tc.keys, tc.maxValue)
			fwd, n0 := scanReads(t, tr, seed, false)
			rev, n1 := scanReads(t, tr, seed, true)

			// A range first: only its keys move.
			lo, hi := []byte{0x40}, []byte{0x80}
			moved, err := tr.Compact(t.Context(), lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			inRange := 0
			o.AscendRange(compactPair{k: lo}, compactPair{k: hi}, func(compactPair) bool { inRange++; return true })
			few := tc.maxValue > compactBlockBytes/4
			// Every leaf but perhaps the range's last, when a chunk leaves
			// it alone (one leaf is a run of its own already).
			if !few && moved != inRange && moved != inRange-1 {
				t.Fatalf("Compact(%x, %x) moved %d leaves; the range holds %d keys", lo, hi, moved, inRange)
			}
			checkOracle(t, tr, o, "after compacting a range")
			// Everything: the keys outside the range move, those inside
			// where the blocks differ from the range's. A leaf that is a
			// run of its own stays: one alone between the leaves below the
			// range and the range's first block, one between the range's
			// last block and the leaves above it, and the tree's last leaf
			// when a chunk's end left it to a chunk of its own (seed
			// 3381533669171535 leaves the last two).
			least := o.Len() - inRange - 3
			if moved, err = tr.Compact(t.Context(), nil, nil); err != nil || !few && moved < least || moved > o.Len() {
				t.Fatalf("Compact(nil, nil) = %d, %v; want %d to %d keys moved", moved, err, least, o.Len())
			}
			checkOracle(t, tr, o, "after compacting everything")
			if moved, err = tr.Compact(t.Context(), nil, nil); err != nil || moved != 0 {
				t.Fatalf("Compact(nil, nil) of a compacted tree = %d, %v; want nothing moved", moved, err)
			}
			fwd2, m0 := scanReads(t, tr, seed, false)
			rev2, m1 := scanReads(t, tr, seed, true)
			if m0 != n0 || m1 != n1 {
				t.Fatalf("the same scans yielded %d and %d pairs before, %d and %d after", n0, n1, m0, m1)
			}
			t.Logf("READs of 100 scans of 50 pairs: forward %d → %d, reverse %d → %d (seed %d)", fwd, fwd2, rev, rev2, seed)
			if few && (fwd2 > fwd || rev2 > rev) {
				t.Errorf("scans of a compacted tree read %d and %d times, more than %d and %d before", fwd2, rev2, fwd, rev)
			}
			if !few && (fwd2*2 > fwd || rev2*2 > rev) {
				t.Errorf("scans of a compacted tree read %d and %d times, not less than half of %d and %d", fwd2, rev2, fwd, rev)
			}

			// Writes after the compaction land where they would without it:
			// new keys in one part of the key space, deletes anywhere.
			for range 2000 {
				k := append([]byte{0x10}, binary.BigEndian.AppendUint64(nil, r.Uint64())...)
				if err := tr.Put(t.Context(), k, k); err != nil {
					t.Fatal(err)
				}
				o.ReplaceOrInsert(compactPair{k, k})
			}
			for i := range 500 {
				it := compactPair{}
				o.Ascend(func(p compactPair) bool { it = p; return i > 0 && r.IntN(30) != 0 })
				if _, err := tr.Delete(t.Context(), it.k); err != nil {
					t.Fatal(err)
				}
				o.Delete(it)
			}
			checkOracle(t, tr, o, "after writes to the compacted tree")
			// Again: the blocks the inserts touched move, not those that
			// only lost leaves.
			limit := o.Len() / 4
			if few {
				limit += 2000 // the new keys are a large share of the tree
			}
			if moved, err = tr.Compact(t.Context(), nil, nil); err != nil || moved == 0 || moved > limit {
				t.Fatalf("Compact(nil, nil) after the writes = %d, %v; want some of %d keys moved, at most %d", moved, err, o.Len(), limit)
			}
			checkOracle(t, tr, o, "after compacting again")
		})
	}
}

// TestCompactBadInput: Compact of an empty or inverted range moves
// nothing; a cancelled context or a closed tree fails with their errors
// and loses no pair.
func TestCompactBadInput(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1}, Options{})
	o := btree.NewG(8, compactLess)
	loadRandom(t, tr, o, rand.New(rand.NewPCG(1, 1)), 3000, 0)
	for _, rg := range [][2][]byte{{{0x50}, {0x50}}, {{0x90}, {0x10}}} {
		if n, err := tr.Compact(t.Context(), rg[0], rg[1]); n != 0 || err != nil {
			t.Errorf("Compact(%x, %x) = %d, %v; want 0, nil", rg[0], rg[1], n, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := tr.Compact(ctx, nil, nil); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Compact with a cancelled context = %d, %v; want 0, context.Canceled", n, err)
	}
	checkOracle(t, tr, o, "after a cancelled Compact")
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Compact(t.Context(), nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Compact of a closed tree: %v; want ErrClosed", err)
	}
}
