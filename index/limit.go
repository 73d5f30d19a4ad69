package index

import (
	"context"
	"iter"
)

// LimitScanner is implemented by indexes whose scans can be told how many
// pairs the caller will take (both indexes of this module). A scan that
// its caller stops has read ahead of the caller without knowing where it
// would stop; told the count, it reads only what that many pairs need (a
// YCSB SCAN knows its length, a query its LIMIT), which on disaggregated
// memory saves READs of the memory nodes and often round trips.
type LimitScanner interface {
	// ScanLimit is Scan bounded to the first limit pairs (limit <= 0: no
	// bound), with Scan's guarantees (its bounds read when the iteration
	// starts among them); it reads no further ahead than those pairs need.
	ScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error]
	// ReverseScanLimit is ReverseScan bounded to the first limit pairs
	// (the limit greatest keys of the range; limit <= 0: no bound), with
	// ReverseScan's guarantees; it reads no further ahead than those pairs
	// need.
	ReverseScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error]
}

// ScanLimit yields the first limit pairs of idx.Scan(ctx, lo, hi) (limit <=
// 0: all of them): through idx's own ScanLimit when idx is a LimitScanner,
// otherwise by stopping the scan after limit pairs.
func ScanLimit(ctx context.Context, idx Index, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	if ls, ok := idx.(LimitScanner); ok {
		return ls.ScanLimit(ctx, lo, hi, limit)
	}
	return first(idx.Scan(ctx, lo, hi), limit)
}

// ReverseScanLimit yields the first limit pairs of idx.ReverseScan(ctx, lo,
// hi) (limit <= 0: all of them), through idx's own ReverseScanLimit when
// idx is a LimitScanner.
func ReverseScanLimit(ctx context.Context, idx Index, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	if ls, ok := idx.(LimitScanner); ok {
		return ls.ReverseScanLimit(ctx, lo, hi, limit)
	}
	return first(idx.ReverseScan(ctx, lo, hi), limit)
}

// first yields the first limit items of seq (all of them if limit <= 0),
// an error counting as one.
func first(seq iter.Seq2[KV, error], limit int) iter.Seq2[KV, error] {
	if limit <= 0 {
		return seq
	}
	return func(yield func(KV, error) bool) {
		n := 0
		for kv, err := range seq {
			if !yield(kv, err) {
				return
			}
			if n++; n == limit {
				return
			}
		}
	}
}
