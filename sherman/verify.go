package sherman

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dmindex/dmindex/remote"
)

// Verify walks the whole remote tree level by level along the sibling
// chains and checks every invariant; violations are reported as errors
// wrapping smart.ErrCorrupt. It expects a quiescent tree (no operation in
// flight on any compute node) and checks:
//
//   - the descriptors match this tree's geometry and LockTableSize; the
//     root is the only page of the top level, with fences (-inf, +inf);
//   - every page passes its checks (header hash, version-salted entry
//     checks) and has its level's level;
//   - at each level the fences are contiguous (a page's low fence is its
//     left sibling's high fence), start at -inf and end at +inf exactly at
//     the page without a sibling;
//   - internal pages are sorted, their keys lie strictly inside their fences,
//     and the children of a level, in order, are exactly the pages of the
//     level below with low fences equal to their separators (fences
//     nested), except that a page whose separator never reached its parent
//     (the separator insert after its split failed: Stats.UnlinkedSplits)
//     may be skipped: it is still reached along the sibling chain, as
//     B-link trees allow;
//   - leaf keys lie inside their fences and occur once per leaf;
//   - the global lock word of every page is free.
func (t *Tree) Verify(ctx context.Context) error {
	s, err := t.session(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	_, err = s.verify(false)
	return err
}

// treeInfo summarizes a verified tree.
type treeInfo struct {
	height   int   // levels, 1 for a single leaf
	pages    []int // pages per level
	keys     int
	unlisted int // pages not yet referenced by their parent level
}

type childRef struct {
	addr remote.Addr
	low  []byte
}

// verify implements Verify. If strict is false, pages that their parent
// level does not reference yet (a split whose separator insertion did not
// complete, e.g. after a cancelled operation) are accepted and counted.
func (s *session) verify(strict bool) (treeInfo, error) {
	t, g := s.t, &s.t.g
	var info treeInfo
	var meta [24]byte
	if err := s.c.Read(s.ctx, t.meta, meta[:]); err != nil {
		return info, err
	}
	if d := le.Uint64(meta[offMetaDescr:]); d != g.descriptor() {
		return info, corrupt("descriptor %#x, want %#x", d, g.descriptor())
	}
	if d := le.Uint64(meta[offMetaLocks:]); d != lockDescriptor(t.opts.LockTableSize) {
		return info, corrupt("lock descriptor %#x, want %#x", d, lockDescriptor(t.opts.LockTableSize))
	}
	root := remote.Addr(le.Uint64(meta[offMetaRoot:]))
	rp, err := s.read(root, -1, s.buf[0])
	if err != nil {
		return info, err
	}
	if len(rp.low()) != 0 || !rp.highInf() || rp.sibling() != 0 {
		return info, corrupt("root %v has fences [%x, %x) inf=%v and sibling %v",
			root, rp.low(), rp.high(), rp.highInf(), rp.sibling())
	}
	top := rp.level()
	info.height = top + 1
	info.pages = make([]int, top+1)
	expect := []childRef{{root, nil}}
	for level := top; level >= 0; level-- {
		var next []childRef
		var prevHigh []byte
		j := 0 // next expected child
		a := expect[0].addr
		for n := 0; a != 0; n++ {
			if n > 1<<26 {
				return info, corrupt("sibling chain at level %d does not end", level)
			}
			p, err := s.read(a, level, s.buf[0])
			if err != nil {
				return info, fmt.Errorf("level %d page %v: %w", level, a, err)
			}
			info.pages[level]++
			if j < len(expect) && expect[j].addr == a {
				if !bytes.Equal(p.low(), expect[j].low) {
					return info, corrupt("page %v at level %d has low fence %x, its parent's separator is %x",
						a, level, p.low(), expect[j].low)
				}
				j++
			} else if strict || n == 0 {
				return info, corrupt("page %v at level %d is not referenced by the level above", a, level)
			} else {
				info.unlisted++
			}
			if n == 0 && len(p.low()) != 0 {
				return info, corrupt("first page %v of level %d has low fence %x", a, level, p.low())
			}
			if n > 0 && !bytes.Equal(p.low(), prevHigh) {
				return info, corrupt("page %v at level %d has low fence %x, its left sibling's high is %x",
					a, level, p.low(), prevHigh)
			}
			if p.highInf() != (p.sibling() == 0) {
				return info, corrupt("page %v at level %d: high fence inf=%v with sibling %v",
					a, level, p.highInf(), p.sibling())
			}
			if !p.highInf() && bytes.Compare(p.low(), p.high()) >= 0 {
				return info, corrupt("page %v at level %d has empty range [%x, %x)", a, level, p.low(), p.high())
			}
			if level > 0 {
				next = append(next, childRef{p.leftmost(), bytes.Clone(p.low())})
				for i := range p.count() {
					k := p.innerKey(i)
					if i == 0 && bytes.Compare(k, p.low()) <= 0 || i > 0 && bytes.Compare(k, p.innerKey(i-1)) <= 0 {
						return info, corrupt("page %v at level %d: key %d (%x) out of order", a, level, i, k)
					}
					if p.covers(k) != 0 {
						return info, corrupt("page %v at level %d: key %x outside its fences", a, level, k)
					}
					next = append(next, childRef{p.innerChild(i), bytes.Clone(k)})
				}
			} else {
				seen := make(map[string]bool)
				for i := range g.leafSpan {
					k, _ := p.leafKV(i)
					if k == nil {
						continue
					}
					if p.covers(k) != 0 {
						return info, corrupt("leaf %v: key %x outside its fences [%x, %x)", a, k, p.low(), p.high())
					}
					if seen[string(k)] {
						return info, corrupt("leaf %v holds key %x twice", a, k)
					}
					seen[string(k)] = true
					info.keys++
				}
			}
			prevHigh = bytes.Clone(p.high())
			sib := p.sibling()
			var w [8]byte
			_, word := t.locks.lockWord(a)
			if err := s.c.Read(s.ctx, word, w[:]); err != nil {
				return info, err
			}
			if v := le.Uint64(w[:]); v != 0 {
				return info, corrupt("global lock %v of page %v is held by %#x", word, a, v)
			}
			a = sib
		}
		if j != len(expect) {
			return info, corrupt("level %d: %d of %d children referenced by level %d are not on its sibling chain",
				level, len(expect)-j, len(expect), level+1)
		}
		expect = next
	}
	return info, nil
}
