package sherman

import (
	"bytes"
	"context"
	"iter"
	"slices"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// maxScanBatch bounds the leaves a scan reads in one round trip.
const maxScanBatch = 16

var _ index.LimitScanner = (*Tree)(nil)

// Scan yields the pairs with lo <= key < hi in ascending key order (nil hi:
// no upper bound).
//
// It starts at the leaf covering lo and follows the B-link sibling chain.
// The leaves after the first are read in batches of one round trip whose
// size doubles (2, 4, ... up to 16 leaves) while the caller keeps
// consuming, with addresses predicted from the cached level-1 pages and
// never beyond hi; stopping early therefore reads at most about as many
// leaves again as were consumed. A predicted leaf is used only if it is the
// previous leaf's sibling, so the scan is a walk of the sibling chain: each
// leaf is a consistent snapshot (torn reads are retried), the next leaf
// starts exactly at the previous one's high fence, and a pair present for
// the whole scan is yielded exactly once. The bounds are copied when the
// iteration starts (into the session's buffers): the caller may reuse lo
// and hi while it iterates.
func (t *Tree) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return t.scan(ctx, lo, hi, false, 0)
}

// ScanLimit is Scan bounded to the first limit pairs (limit <= 0: no
// bound; index.LimitScanner). After the first leaf, each batch reads as
// many leaves as the pairs still to yield need at the last leaf's
// occupancy (at most 16), instead of doubling: a scan of n pairs reads
// about the leaves that hold them, in fewer round trips.
func (t *Tree) ScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[index.KV, error] {
	return t.scan(ctx, lo, hi, false, max(limit, 0))
}

// ReverseScanLimit is ReverseScan bounded to the first limit pairs (limit
// <= 0: no bound). ReverseScan reads one leaf per round trip, so the bound
// only ends it.
func (t *Tree) ReverseScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[index.KV, error] {
	return t.scan(ctx, lo, hi, true, max(limit, 0))
}

// scan is the sequence of the four scans: desc for the reverse ones, limit
// the most pairs to yield (0: no bound).
func (t *Tree) scan(ctx context.Context, lo, hi []byte, desc bool, limit int) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return
		}
		s, err := t.session(ctx)
		if err != nil {
			yield(index.KV{}, closedError(err))
			return
		}
		defer t.release(s)
		sc := &s.scan
		sc.start(s, lo, hi, desc, limit, yield)
		defer sc.keep()
		run := sc.run
		if desc {
			run = sc.runReverse
		}
		if err := run(ctx); err != nil {
			yield(index.KV{}, closedError(err))
		}
	}
}

// scanner is the state of one scan. A session keeps its scanner, so that
// the buffers of one scan serve the next (start, keep): a scan allocates
// only the pairs it yields, which the caller owns.
type scanner struct {
	s      *session
	lo, hi []byte
	desc   bool   // ReverseScan: leaves from the right, pairs in descending order
	left   int    // the pairs the scan may still yield (ScanLimit); 0: no bound
	filled int    // the pairs the leaf emitted last holds, in range or not
	parent []byte // ReverseScan: the last level-1 page read
	yield  func(index.KV, error) bool
	slots  []int
	bufs   [][]byte // batch read buffers
	ops    []remote.Op
	addrs  []remote.Addr // a batch's leaves
	from   []*centry     // the cached pages that predicted them
	low    []byte        // Scan: the low fence the next leaf must have
	bound  []byte        // ReverseScan: the bound hi was lowered to
	// loBuf and hiBuf hold copies of the caller's bounds, taken when the
	// iteration starts: the caller may reuse its slices while it iterates.
	loBuf, hiBuf []byte
}

// start sets the session's scanner up for a scan (see Tree.scan), with
// the buffers of its last scan. The scan reads copies of lo and hi (a nil
// hi stays nil: no upper bound).
func (sc *scanner) start(s *session, lo, hi []byte, desc bool, limit int, yield func(index.KV, error) bool) {
	*sc = scanner{s: s, desc: desc, left: limit, yield: yield,
		slots: slices.Grow(sc.slots[:0], s.t.g.leafSpan), bufs: sc.bufs, ops: sc.ops[:0],
		addrs: sc.addrs[:0], from: sc.from[:0], low: sc.low[:0], bound: sc.bound[:0],
		loBuf: append(sc.loBuf[:0], lo...), hiBuf: append(sc.hiBuf[:0], hi...)}
	sc.lo = sc.loBuf
	if hi != nil {
		if sc.hi = sc.hiBuf; sc.hi == nil {
			sc.hi = []byte{} // an empty hi bounds the scan, unlike nil
		}
	}
}

// keep drops what the scan referred to (the caller's yield, the cached
// pages of its last prediction) and keeps the buffers.
func (sc *scanner) keep() {
	clear(sc.from)
	clear(sc.ops)
	*sc = scanner{slots: sc.slots[:0], bufs: sc.bufs, ops: sc.ops[:0], addrs: sc.addrs[:0],
		from: sc.from[:0], low: sc.low[:0], bound: sc.bound[:0], loBuf: sc.loBuf[:0], hiBuf: sc.hiBuf[:0]}
}

// run scans; it returns nil when the range is exhausted or the caller
// stopped.
func (sc *scanner) run(ctx context.Context) error {
	s, g := sc.s, &sc.s.t.g
	p, err := s.readLeaf(ctx, sc.lo)
	if err != nil {
		return err
	}
	if !sc.emit(p) || p.reaches(sc.hi) {
		return nil
	}
	sc.low = append(sc.low[:0], p.high()...)
	next := p.sibling()
	for batch := 1; ; {
		if next == 0 {
			return corrupt("leaf chain broken after fence %x", sc.low)
		}
		// Read the sibling and the predicted leaves after it in one batch.
		if sc.left > 0 {
			batch = min((sc.left+sc.filled-1)/max(sc.filled, 1), maxScanBatch)
		} else {
			batch = min(2*batch, maxScanBatch)
		}
		addrs, from := append(sc.addrs[:0], next), append(sc.from[:0], nil)
		if c := s.t.cache; c != nil {
			addrs, from = c.successors(addrs, from, sc.low, next, batch-1, sc.hi)
		}
		sc.addrs, sc.from = addrs, from
		for len(sc.bufs) < len(addrs) {
			sc.bufs = append(sc.bufs, make([]byte, g.leafBytes))
		}
		sc.ops = sc.ops[:0]
		for i, a := range addrs {
			sc.ops = append(sc.ops, remote.Read(a, sc.bufs[i]))
		}
		if err := s.c.Do(ctx, sc.ops); err != nil {
			return err
		}
		s.retries = 0
		for i, a := range addrs {
			if a != next { // a stale prediction: follow the chain instead
				s.dropCached(from[i])
				break
			}
			p := page{g, sc.bufs[i]}
			if !p.valid() {
				s.t.stats.tornReads.Add(1)
				if p, err = s.read(ctx, a, 0, sc.bufs[i]); err != nil {
					return err
				}
			}
			if p.level() != 0 || !bytes.Equal(p.low(), sc.low) {
				return corrupt("leaf %v has low fence %x at level %d, its left sibling's high fence is %x",
					a, p.low(), p.level(), sc.low)
			}
			if !sc.emit(p) || p.reaches(sc.hi) {
				return nil
			}
			sc.low, next = append(sc.low[:0], p.high()...), p.sibling()
		}
	}
}

// emit yields the pairs of leaf p within the scan's bounds in key order
// (descending for a reverse scan); it reports false if the caller stopped
// or the scan yielded its last pair (ScanLimit).
func (sc *scanner) emit(p page) bool {
	sc.slots, sc.filled = sc.slots[:0], 0
	for i := range p.g.leafSpan {
		k, _ := p.leafKV(i)
		if k == nil {
			continue
		}
		sc.filled++
		if bytes.Compare(k, sc.lo) >= 0 && (sc.hi == nil || bytes.Compare(k, sc.hi) < 0) && p.covers(k) == 0 {
			sc.slots = append(sc.slots, i)
		}
	}
	slices.SortFunc(sc.slots, func(a, b int) int {
		ka, _ := p.leafKV(a)
		kb, _ := p.leafKV(b)
		if sc.desc {
			return bytes.Compare(kb, ka)
		}
		return bytes.Compare(ka, kb)
	})
	var prev []byte
	for j, i := range sc.slots {
		k, v := p.leafKV(i)
		if j > 0 && bytes.Equal(k, prev) {
			// The key moved between slots while the leaf was read (deleted,
			// then inserted again): both are valid values.
			continue
		}
		prev = k
		if !sc.yield(index.KV{Key: bytes.Clone(k), Value: bytes.Clone(v)}, nil) {
			return false
		}
		if sc.left > 0 {
			if sc.left--; sc.left == 0 {
				return false
			}
		}
	}
	return true
}
