package index

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
)

// sliceIndex is an Index over sorted keys that is not a LimitScanner: its
// scans yield keys[0:n] (descending for ReverseScan), then err if set, and
// count the pairs they were asked for.
type sliceIndex struct {
	keys   []string
	err    error
	pulled int
}

func (x *sliceIndex) Get(context.Context, []byte) ([]byte, bool, error) { return nil, false, nil }
func (x *sliceIndex) Put(context.Context, []byte, []byte) error         { return nil }
func (x *sliceIndex) Delete(context.Context, []byte) (bool, error)      { return false, nil }
func (x *sliceIndex) Close() error                                      { return nil }

func (x *sliceIndex) Scan(_ context.Context, _, _ []byte) iter.Seq2[KV, error] {
	return x.seq(x.keys)
}

func (x *sliceIndex) ReverseScan(_ context.Context, _, _ []byte) iter.Seq2[KV, error] {
	rev := slices.Clone(x.keys)
	slices.Reverse(rev)
	return x.seq(rev)
}

func (x *sliceIndex) seq(keys []string) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) {
		for _, k := range keys {
			x.pulled++
			if !yield(KV{Key: []byte(k)}, nil) {
				return
			}
		}
		if x.err != nil {
			yield(KV{}, x.err)
		}
	}
}

// limitIndex is a sliceIndex that is a LimitScanner: its own methods
// prefix the keys with "own:".
type limitIndex struct{ sliceIndex }

func (x *limitIndex) ScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) { yield(KV{Key: fmt.Appendf(nil, "own:%d", limit)}, nil) }
}

func (x *limitIndex) ReverseScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) { yield(KV{Key: fmt.Appendf(nil, "own-reverse:%d", limit)}, nil) }
}

// collect ranges over seq to its end and returns the keys and errors it
// yielded, in order.
func collect(seq iter.Seq2[KV, error]) []string {
	var out []string
	for kv, err := range seq {
		if err != nil {
			out = append(out, "error: "+err.Error())
			continue
		}
		out = append(out, string(kv.Key))
	}
	return out
}

func TestScanLimitFallback(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	boom := errors.New("boom")
	for _, tc := range []struct {
		limit   int
		err     error
		want    []string
		reverse []string
		pulled  int // pairs the forward scan was asked for
	}{
		{limit: 0, want: keys, reverse: []string{"d", "c", "b", "a"}, pulled: 4},
		{limit: -3, want: keys, reverse: []string{"d", "c", "b", "a"}, pulled: 4},
		{limit: 1, want: keys[:1], reverse: []string{"d"}, pulled: 1},
		{limit: 3, want: keys[:3], reverse: []string{"d", "c", "b"}, pulled: 3},
		{limit: 4, want: keys, reverse: []string{"d", "c", "b", "a"}, pulled: 4},
		{limit: 9, want: keys, reverse: []string{"d", "c", "b", "a"}, pulled: 4},
		{limit: 9, err: boom, want: append(slices.Clone(keys), "error: boom"), reverse: []string{"d", "c", "b", "a", "error: boom"}, pulled: 4},
		{limit: 4, err: boom, want: keys, reverse: []string{"d", "c", "b", "a"}, pulled: 4},
	} {
		x := &sliceIndex{keys: keys, err: tc.err}
		if got := collect(ScanLimit(t.Context(), x, nil, nil, tc.limit)); !slices.Equal(got, tc.want) {
			t.Errorf("ScanLimit(limit %d, err %v) = %q, want %q", tc.limit, tc.err, got, tc.want)
		}
		if x.pulled != tc.pulled {
			t.Errorf("ScanLimit(limit %d, err %v) asked the scan for %d pairs, want %d", tc.limit, tc.err, x.pulled, tc.pulled)
		}
		if got := collect(ReverseScanLimit(t.Context(), x, nil, nil, tc.limit)); !slices.Equal(got, tc.reverse) {
			t.Errorf("ReverseScanLimit(limit %d, err %v) = %q, want %q", tc.limit, tc.err, got, tc.reverse)
		}
	}
	// A consumer that stops early stops the bounded scan.
	x := &sliceIndex{keys: keys}
	for range ScanLimit(t.Context(), x, nil, nil, 3) {
		break
	}
	if x.pulled != 1 {
		t.Errorf("a loop broken after one pair asked the scan for %d", x.pulled)
	}
}

func TestScanLimitUsesLimitScanner(t *testing.T) {
	x := &limitIndex{sliceIndex{keys: []string{"a"}}}
	if got := collect(ScanLimit(t.Context(), x, nil, nil, 7)); !slices.Equal(got, []string{"own:7"}) {
		t.Errorf("ScanLimit of a LimitScanner = %q, want its own ScanLimit's", got)
	}
	if got := collect(ReverseScanLimit(t.Context(), x, nil, nil, 7)); !slices.Equal(got, []string{"own-reverse:7"}) {
		t.Errorf("ReverseScanLimit of a LimitScanner = %q, want its own ReverseScanLimit's", got)
	}
}
