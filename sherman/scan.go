package sherman

import (
	"bytes"
	"context"
	"iter"
	"slices"

	"github.com/dmindex/dmindex/smart"
)

// Scan yields the pairs with lo <= key < hi in ascending key order (nil hi:
// no upper bound). It reads one leaf at a time along the B-link sibling
// chain, starting from the leaf that covers lo, so stopping early reads no
// further leaves. Each leaf is read as a consistent snapshot (torn reads are
// retried) and the next leaf starts exactly at the previous one's high
// fence, so a pair present for the whole scan is yielded exactly once.
func (t *Tree) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[smart.KV, error] {
	return func(yield func(smart.KV, error) bool) {
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return
		}
		s, err := t.session(ctx)
		if err != nil {
			yield(smart.KV{}, err)
			return
		}
		defer t.release(s)
		if err := s.scan(lo, hi, yield); err != nil {
			yield(smart.KV{}, err)
		}
	}
}

// scan runs a scan; it returns nil when the range is exhausted or yield
// asked to stop.
func (s *session) scan(lo, hi []byte, yield func(smart.KV, error) bool) error {
	p, err := s.readLeaf(lo)
	if err != nil {
		return err
	}
	slots := make([]int, 0, s.t.g.leafSpan)
	for hops := 0; ; hops++ {
		slots = slots[:0]
		for i := range s.t.g.leafSpan {
			k, _ := p.leafKV(i)
			if k != nil && bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0) && p.covers(k) == 0 {
				slots = append(slots, i)
			}
		}
		slices.SortFunc(slots, func(a, b int) int {
			ka, _ := p.leafKV(a)
			kb, _ := p.leafKV(b)
			return bytes.Compare(ka, kb)
		})
		var prev []byte
		for j, i := range slots {
			k, v := p.leafKV(i)
			if j > 0 && bytes.Equal(k, prev) {
				// The key moved between slots while the leaf was read
				// (deleted, then inserted again): both are valid values.
				continue
			}
			prev = k
			if !yield(smart.KV{Key: bytes.Clone(k), Value: bytes.Clone(v)}, nil) {
				return nil
			}
		}
		if p.reaches(hi) {
			return nil
		}
		low, next := bytes.Clone(p.high()), p.sibling()
		if next == 0 || hops > 1<<30 {
			return corrupt("leaf chain broken after fence %x", low)
		}
		s.retries = 0
		if p, err = s.read(next, 0, s.buf[0]); err != nil {
			return err
		}
		if !bytes.Equal(p.low(), low) {
			return corrupt("leaf %v has low fence %x, its left sibling's high fence is %x", next, p.low(), low)
		}
	}
}
