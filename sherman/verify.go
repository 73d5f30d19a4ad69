package sherman

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// Verify walks the whole remote tree level by level along the sibling
// chains and checks every rule of docs/sherman-layout.md ("Verify's
// rules"); a violation is reported as an error wrapping index.ErrCorrupt
// that names its rule. It expects a quiescent tree (no operation in flight
// on any compute node):
//
//   - S1: the descriptors match this tree's geometry and LockTableSize;
//     the root is the only page of the top level, with fences (-inf, +inf);
//   - S2: every page passes its checks (header hash, version-salted entry
//     checks) and has its level's level;
//   - S3: at each level the fences are contiguous (a page's low fence is
//     its left sibling's high fence), start at -inf and end at +inf exactly
//     at the page without a sibling, and no range is empty;
//   - S4: internal pages are sorted, their keys lie strictly inside their
//     fences, and the children of a level, in order, are exactly the pages
//     of the level below with low fences equal to their separators, except
//     that a page whose separator never reached its parent (the separator
//     insert after its split failed: Stats.UnlinkedSplits) may be skipped:
//     it is still reached along the sibling chain, as B-link trees allow;
//   - S5: leaf keys lie inside their fences and occur once per leaf;
//   - S6: the global lock word of every page is free;
//   - S7: no page lies in memory that compute nodes which closed the tree
//     handed on (its depot, internal/depot).
func (t *Tree) Verify(ctx context.Context) error {
	s, err := t.session(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	info, err := s.verify(ctx, false)
	if err != nil {
		return err
	}
	return s.checkDepot(ctx, info.addrs)
}

// treeInfo summarizes a verified tree.
type treeInfo struct {
	height   int   // levels, 1 for a single leaf
	pages    []int // pages per level
	keys     int
	unlisted int // pages not yet referenced by their parent level
	addrs    []remote.Addr
}

type childRef struct {
	addr remote.Addr
	low  []byte
}

// verify implements Verify. If strict is false, pages that their parent
// level does not reference yet (a split whose separator insertion did not
// complete, e.g. after a cancelled operation) are accepted and counted.
func (s *session) verify(ctx context.Context, strict bool) (treeInfo, error) {
	s.verifying = true
	defer func() { s.verifying = false }()
	var info treeInfo
	root, err := s.checkRoot(ctx)
	if err != nil {
		return info, err
	}
	top := root.level
	info.height = top + 1
	info.pages = make([]int, top+1)
	expect := []childRef{{root.addr, nil}}
	for level := top; level >= 0; level-- {
		if expect, err = s.verifyLevel(ctx, level, expect, strict, &info); err != nil {
			return info, err
		}
	}
	return info, nil
}

// checkRoot checks rule S1 and returns the root.
func (s *session) checkRoot(ctx context.Context) (rootRef, error) {
	t, g := s.t, &s.t.g
	var meta [24]byte
	if err := s.c.Read(ctx, t.meta, meta[:]); err != nil {
		return rootRef{}, err
	}
	if d := le.Uint64(meta[offMetaDescr:]); d != g.descriptor() {
		return rootRef{}, corrupt("S1: descriptor %#x, want %#x", d, g.descriptor())
	}
	if d := le.Uint64(meta[offMetaLocks:]); d != lockDescriptor(t.opts.LockTableSize) {
		return rootRef{}, corrupt("S1: lock descriptor %#x, want %#x", d, lockDescriptor(t.opts.LockTableSize))
	}
	root := remote.Addr(le.Uint64(meta[offMetaRoot:]))
	rp, err := s.read(ctx, root, -1, s.buf[0])
	if err != nil {
		return rootRef{}, pageErr(err, "root %v", root)
	}
	if len(rp.low()) != 0 || !rp.highInf() || rp.sibling() != 0 {
		return rootRef{}, corrupt("S1: root %v has fences [%x, %x) inf=%v and sibling %v",
			root, rp.low(), rp.high(), rp.highInf(), rp.sibling())
	}
	return rootRef{addr: root, level: rp.level()}, nil
}

// verifyLevel walks one level's sibling chain, checking each page against
// the children the level above listed (expect), and returns the children
// this level lists.
func (s *session) verifyLevel(ctx context.Context, level int, expect []childRef, strict bool, info *treeInfo) ([]childRef, error) {
	var next []childRef
	var prevHigh []byte
	j := 0 // next expected child
	a := expect[0].addr
	for n := 0; a != 0; n++ {
		if n > 1<<26 {
			return nil, corrupt("S3: sibling chain at level %d does not end", level)
		}
		p, err := s.read(ctx, a, level, s.buf[0])
		if err != nil {
			return nil, pageErr(err, "level %d page %v", level, a)
		}
		info.pages[level]++
		info.addrs = append(info.addrs, a)
		switch {
		case j < len(expect) && expect[j].addr == a:
			if !bytes.Equal(p.low(), expect[j].low) {
				return nil, corrupt("S4: page %v at level %d has low fence %x, its parent's separator is %x",
					a, level, p.low(), expect[j].low)
			}
			j++
		case strict || n == 0:
			return nil, corrupt("S4: page %v at level %d is not referenced by the level above", a, level)
		default:
			info.unlisted++
		}
		if err := checkFences(p, a, level, n, prevHigh); err != nil {
			return nil, err
		}
		if level > 0 {
			if next, err = checkInner(p, a, level, next); err != nil {
				return nil, err
			}
		} else {
			keys, err := checkLeaf(p, a)
			if err != nil {
				return nil, err
			}
			info.keys += keys
		}
		if err := s.checkLock(ctx, a); err != nil {
			return nil, err
		}
		prevHigh = bytes.Clone(p.high())
		a = p.sibling()
	}
	if j != len(expect) {
		return nil, corrupt("S4: level %d: %d of %d children referenced by level %d are not on its sibling chain",
			level, len(expect)-j, len(expect), level+1)
	}
	return next, nil
}

// pageErr reports a page read that failed: in a quiescent tree a page that
// never validates breaks rule S2 (corruption); other errors (a closed pool,
// a cancelled context) pass through.
func pageErr(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, index.ErrContention) {
		return corrupt("S2: %s never validates: %v", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// checkFences checks rule S3 for page p, the n-th of its level.
func checkFences(p page, a remote.Addr, level, n int, prevHigh []byte) error {
	switch {
	case n == 0 && len(p.low()) != 0:
		return corrupt("S3: first page %v of level %d has low fence %x", a, level, p.low())
	case n > 0 && !bytes.Equal(p.low(), prevHigh):
		return corrupt("S3: page %v at level %d has low fence %x, its left sibling's high is %x", a, level, p.low(), prevHigh)
	case p.highInf() != (p.sibling() == 0):
		return corrupt("S3: page %v at level %d: high fence inf=%v with sibling %v", a, level, p.highInf(), p.sibling())
	case !p.highInf() && bytes.Compare(p.low(), p.high()) >= 0:
		return corrupt("S3: page %v at level %d has empty range [%x, %x)", a, level, p.low(), p.high())
	}
	return nil
}

// checkInner checks rule S4's order and fences for internal page p and
// appends the children it lists to next.
func checkInner(p page, a remote.Addr, level int, next []childRef) ([]childRef, error) {
	next = append(next, childRef{p.leftmost(), bytes.Clone(p.low())})
	for i := range p.count() {
		k := p.innerKey(i)
		if i == 0 && bytes.Compare(k, p.low()) <= 0 || i > 0 && bytes.Compare(k, p.innerKey(i-1)) <= 0 {
			return nil, corrupt("S4: page %v at level %d: key %d (%x) out of order", a, level, i, k)
		}
		if p.covers(k) != 0 {
			return nil, corrupt("S4: page %v at level %d: key %x outside its fences", a, level, k)
		}
		next = append(next, childRef{p.innerChild(i), bytes.Clone(k)})
	}
	return next, nil
}

// checkLeaf checks rule S5 for leaf p and returns its number of keys.
func checkLeaf(p page, a remote.Addr) (int, error) {
	seen := make(map[string]bool)
	for i := range p.g.leafSpan {
		k, _ := p.leafKV(i)
		if k == nil {
			continue
		}
		if p.covers(k) != 0 {
			return 0, corrupt("S5: leaf %v: key %x outside its fences [%x, %x)", a, k, p.low(), p.high())
		}
		if seen[string(k)] {
			return 0, corrupt("S5: leaf %v holds key %x twice", a, k)
		}
		seen[string(k)] = true
	}
	return len(seen), nil
}

// checkLock checks rule S6 for the page at a.
func (s *session) checkLock(ctx context.Context, a remote.Addr) error {
	var w [8]byte
	_, word := s.t.locks.lockWord(a)
	if err := s.c.Read(ctx, word, w[:]); err != nil {
		return err
	}
	if v := le.Uint64(w[:]); v != 0 {
		return corrupt("S6: global lock %v of page %v is held by %#x", word, a, v)
	}
	return nil
}
