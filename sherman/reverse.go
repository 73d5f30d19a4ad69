package sherman

import (
	"bytes"
	"context"
	"iter"
	"sort"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// ReverseScan yields the pairs with lo <= key < hi in descending order (nil
// hi: no upper bound).
//
// Sherman's leaves link to the right only (B-link), so the scan finds each
// leaf by a search for the keys just below the previous leaf's low fence:
// routed from the level-1 page the previous search read while that page
// still covers them (one round trip per leaf, plus a hop right per
// concurrent split), and by a descent from the root where it ends (the
// tree's height in round trips). Scan follows sibling pointers instead and
// reads several leaves per round trip, so it is cheaper for long ranges.
// Each leaf is read as a consistent snapshot, and a leaf's low fence never
// changes (a split moves the upper part of a leaf to a new right sibling),
// so the ranges the leaves cover are adjacent and a pair present for the
// whole scan is yielded exactly once.
func (t *Tree) ReverseScan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return t.scan(ctx, lo, hi, true, 0)
}

// runReverse yields leaf after leaf from the right, lowering the scan's
// upper bound to each leaf's low fence.
func (sc *scanner) runReverse(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := sc.leafBefore(ctx, sc.hi)
		if err != nil {
			return err
		}
		if !sc.emit(p) {
			return nil
		}
		low := p.low()
		if len(low) == 0 || bytes.Compare(low, sc.lo) <= 0 {
			return nil
		}
		sc.bound = append(sc.bound[:0], low...) // p's buffer is read into again
		sc.hi = sc.bound
	}
}

// leafBefore reads the leaf that holds the keys just below ub (nil ub: the
// rightmost leaf): the leaf whose low fence is below ub and whose high fence
// is at or above it. It routes from the level-1 page remembered from the
// previous search if that page covers those keys, else it descends from the
// root; each level is routed to the child whose separator is below ub, and
// a page that no longer covers the keys (a split moved them) is left for
// its right sibling. A stale remembered page can only route to a child whose
// low fence is below ub (low fences never change), so moving right finds
// the leaf.
func (sc *scanner) leafBefore(ctx context.Context, ub []byte) (page, error) {
	s := sc.s
	a, level := s.t.root.Load().addr, -1
	if sc.parent != nil {
		if pp := (page{&s.t.g, sc.parent}); pp.coversBefore(ub) == 0 {
			a, level = pp.routeBefore(ub), 0
		}
	}
	for hops := 0; ; hops++ {
		p, err := s.read(ctx, a, level, s.buf[0])
		if err != nil {
			return page{}, err
		}
		switch p.coversBefore(ub) {
		case 1:
			if a = p.sibling(); a == 0 || hops > 1<<20 {
				return page{}, corrupt("sibling chain broken at level %d", p.level())
			}
			level = p.level()
			continue
		case -1:
			return page{}, corrupt("descent for the keys below %x reached page %v whose low fence is %x", ub, a, p.low())
		}
		if p.isLeaf() {
			return p, nil
		}
		if p.level() == 1 {
			sc.parent = append(sc.parent[:0], p.b...)
		}
		a, level = p.routeBefore(ub), p.level()-1
	}
}

// coversBefore reports where the keys just below ub lie relative to the
// page's fences: -1 below the low fence (ub <= low), 0 inside (low < ub <=
// high), +1 above the high fence (ub > high). A nil ub stands for +inf.
func (p page) coversBefore(ub []byte) int {
	if ub == nil {
		if p.highInf() {
			return 0
		}
		return 1
	}
	if low := p.low(); len(low) > 0 && bytes.Compare(ub, low) <= 0 {
		return -1
	}
	if !p.highInf() && bytes.Compare(ub, p.high()) > 0 {
		return 1
	}
	return 0
}

// routeBefore returns the child of an internal page that covers the keys
// just below ub (nil: the last child).
func (p page) routeBefore(ub []byte) remote.Addr {
	i := p.count()
	if ub != nil {
		i = sort.Search(i, func(m int) bool { return bytes.Compare(p.innerKey(m), ub) >= 0 })
	}
	if i > 0 {
		return p.innerChild(i - 1)
	}
	return p.leftmost()
}
