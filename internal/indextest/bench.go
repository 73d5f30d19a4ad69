package indextest

import (
	"context"
	"encoding/binary"
	"iter"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// BenchKeys is the number of keys the benchmark battery loads.
const BenchKeys = 100_000

// Bench runs the module's benchmark battery against tg, one client in local
// mode on an index of BenchKeys random 8-byte keys with 8-byte values and a
// warm cache: Get, Update (Put of an existing key), Insert (Put of a new
// key), Delete (of a present key; it is put back untimed), Scan100 and
// ReverseScan100 (the first 100 pairs from a random key up, or down, the
// loop stopping the scan), ScanLimit100 and ReverseScanLimit100 (the same,
// the scan told the count: index.ScanLimit), CompactedScanLimit100 and
// CompactedReverseScanLimit100 (the same after index.Compacter's Compact
// of the whole index, if the index is one). Each
// reports, besides time, rtt/op, verbs/op, read-B/op and write-B/op from
// the compute node's remote.Stats, which do not depend on the machine. The
// sub-benchmark names are the same for every index, so that benchstat can
// compare two packages' results:
//
//	go test -run XXX -bench Battery -count 6 ./smart > smart.txt
//	go test -run XXX -bench Battery -count 6 ./sherman > sherman.txt
//	benchstat smart.txt sherman.txt
func Bench(b *testing.B, tg Target) {
	checkTarget(b, tg)
	b.Run("Get", func(b *testing.B) {
		bench(b, tg, false, func(ctx context.Context, x *benchIndex, r *rand.Rand) {
			if _, ok, err := x.idx.Get(ctx, x.key(r.IntN(BenchKeys))); err != nil || !ok {
				b.Fatal(ok, err)
			}
		})
	})
	b.Run("Update", func(b *testing.B) {
		bench(b, tg, false, func(ctx context.Context, x *benchIndex, r *rand.Rand) {
			if err := x.idx.Put(ctx, x.key(r.IntN(BenchKeys)), x.value(r.Uint64())); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("Insert", func(b *testing.B) {
		next := BenchKeys
		bench(b, tg, false, func(ctx context.Context, x *benchIndex, _ *rand.Rand) {
			if err := x.idx.Put(ctx, x.key(next), x.value(uint64(next))); err != nil {
				b.Fatal(err)
			}
			next++
		})
	})
	b.Run("Delete", func(b *testing.B) {
		bench(b, tg, false, func(ctx context.Context, x *benchIndex, r *rand.Rand) {
			i := r.IntN(BenchKeys)
			if found, err := x.idx.Delete(ctx, x.key(i)); err != nil || !found {
				b.Fatal(found, err)
			}
			x.untimed(b, func() {
				if err := x.idx.Put(ctx, x.key(i), x.value(uint64(i))); err != nil {
					b.Fatal(err)
				}
			})
		})
	})
	for _, sc := range []struct {
		name               string
		rev, told, compact bool
	}{
		{"Scan100", false, false, false},
		{"ReverseScan100", true, false, false},
		{"ScanLimit100", false, true, false},
		{"ReverseScanLimit100", true, true, false},
		{"CompactedScanLimit100", false, true, true},
		{"CompactedReverseScanLimit100", true, true, true},
	} {
		b.Run(sc.name, func(b *testing.B) {
			bench(b, tg, sc.compact, func(ctx context.Context, x *benchIndex, r *rand.Rand) {
				scan100(b, ctx, x.idx, x.key(r.IntN(BenchKeys)), sc.rev, sc.told)
			})
		})
	}
}

// scan100 takes the first 100 pairs of idx from key up (rev: below key,
// down), stopping the scan (told false) or telling it the count
// (index.ScanLimit).
func scan100(b *testing.B, ctx context.Context, idx index.Index, key []byte, rev, told bool) {
	var seq iter.Seq2[index.KV, error]
	switch {
	case told && rev:
		seq = index.ReverseScanLimit(ctx, idx, nil, key, 100)
	case told:
		seq = index.ScanLimit(ctx, idx, key, nil, 100)
	case rev:
		seq = idx.ReverseScan(ctx, nil, key)
	default:
		seq = idx.Scan(ctx, key, nil)
	}
	n := 0
	for _, err := range seq {
		if err != nil {
			b.Fatal(err)
		}
		if n++; n == 100 {
			break
		}
	}
}

// benchIndex is the index under benchmark and its compute node.
type benchIndex struct {
	tg      Target
	idx     index.Index
	cn      *remote.ComputeNode
	skipped remote.Stats // I/O of untimed work, not reported
}

// key returns the 8-byte key number i (a pseudo-random permutation, so that
// keys spread over the whole tree), fitted to the target.
func (x *benchIndex) key(i int) []byte {
	return x.tg.fitKey(binary.BigEndian.AppendUint64(nil, mix64(uint64(i)+1)))
}

func (x *benchIndex) value(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// untimed runs fn with the timer stopped and its I/O left out.
func (x *benchIndex) untimed(b *testing.B, fn func()) {
	b.StopTimer()
	before := x.cn.Stats()
	fn()
	x.skipped = x.skipped.Add(x.cn.Stats().Sub(before))
	b.StartTimer()
}

// bench loads a fresh index, compacts it if compact is set and it is an
// index.Compacter, warms it with one Get per key, and times op.
func bench(b *testing.B, tg Target, compact bool, op func(context.Context, *benchIndex, *rand.Rand)) {
	ctx := context.Background()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	x := &benchIndex{tg: tg, cn: p.NewComputeNode()}
	if x.idx, err = tg.Open(x.cn, "bench"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.idx.Close() })
	for i := range BenchKeys {
		if err := x.idx.Put(ctx, x.key(i), x.value(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
	if c, ok := x.idx.(index.Compacter); ok && compact {
		if _, err := c.Compact(ctx, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := range BenchKeys {
		if _, _, err := x.idx.Get(ctx, x.key(i)); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	before := x.cn.Stats()
	n := 0
	for b.Loop() {
		op(ctx, x, r)
		n++
	}
	d := x.cn.Stats().Sub(before).Sub(x.skipped)
	ops := float64(n)
	b.ReportMetric(float64(d.RoundTrips)/ops, "rtt/op")
	b.ReportMetric(float64(d.Verbs())/ops, "verbs/op")
	b.ReportMetric(float64(d.ReadBytes)/ops, "read-B/op")
	b.ReportMetric(float64(d.WriteBytes)/ops, "write-B/op")
}
