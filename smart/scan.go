package smart

import (
	"bytes"
	"context"
	"iter"
	"slices"

	"github.com/dmindex/dmindex/remote"
)

// Scan yields the pairs with lo <= key < hi in ascending order (nil hi: no
// upper bound). It walks the tree depth first in partial-key order, reading
// one node at a time and the leaves under a node in batches (one round trip
// for up to scanWindow leaves, the window doubling from scanFirstWindow), so
// stopping early reads little beyond what was yielded. A leaf found retired
// sends the scan back to its slot, so a key present for the whole scan is
// yielded exactly once even while leaves split or move.
func (t *Tree) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) {
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return
		}
		s, err := t.session()
		if err != nil {
			yield(KV{}, err)
			return
		}
		defer t.release(s)
		sc := scanner{s: s, lo: lo, hi: hi, elo: appendEncoded(nil, lo), window: scanFirstWindow}
		if hi != nil {
			sc.ehi = appendEncoded(nil, hi)
		}
		if err := sc.run(ctx, yield); err != nil {
			yield(KV{}, wrapRemote(err))
		}
	}
}

const (
	scanFirstWindow = 8
	scanWindow      = 64
)

type scanner struct {
	s        *session
	lo, hi   []byte
	elo, ehi []byte
	stack    []frame
	window   int
	bufs     []byte
}

// frame is an expanded node: its in-range children in partial-key order.
type frame struct {
	path  []byte // encoded bytes leading to the children, without their partial
	items []cursor
	i     int
}

// errStop ends a scan whose consumer stopped.
var errStop = &stopError{}

type stopError struct{}

func (*stopError) Error() string { return "smart: scan stopped" }

func (sc *scanner) run(ctx context.Context, yield func(KV, error) bool) error {
	cur, err := sc.s.root(ctx)
	if err != nil {
		return err
	}
	if err := sc.expand(ctx, cur, nil); err != nil {
		return err
	}
	for len(sc.stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := &sc.stack[len(sc.stack)-1]
		if f.i == len(f.items) {
			sc.stack = sc.stack[:len(sc.stack)-1]
			continue
		}
		it := f.items[f.i]
		if !it.sl.isLeaf() {
			f.i++
			path := append(slices.Clip(f.path), it.sl.partial())
			if err := sc.expand(ctx, it, path); err != nil {
				return err
			}
			continue
		}
		n := 0
		for f.i+n < len(f.items) && n < sc.window && f.items[f.i+n].sl.isLeaf() {
			n++
		}
		sc.window = min(2*sc.window, scanWindow)
		err := sc.leaves(ctx, f, n, yield)
		if err == errStop {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leaves reads the next n leaf items of f in one round trip and yields
// those in range. A retired leaf's slot is re-read; if it now leads to a
// node, the item is replaced and left for the main loop.
func (sc *scanner) leaves(ctx context.Context, f *frame, n int, yield func(KV, error) bool) error {
	s := sc.s
	total := 0
	for _, c := range f.items[f.i : f.i+n] {
		total += classBytes(c.sl.leafClass())
	}
	sc.bufs = grow(sc.bufs, total)
	ops := s.batch()
	off := 0
	for _, c := range f.items[f.i : f.i+n] {
		m := classBytes(c.sl.leafClass())
		ops = append(ops, remote.Read(c.sl.addr(), sc.bufs[off:off+m]))
		off += m
	}
	if err := s.do(ctx, ops); err != nil {
		return err
	}
	off = 0
	for range n {
		c := f.items[f.i]
		m := classBytes(c.sl.leafClass())
		buf := sc.bufs[off : off+m]
		off += m
		s.retries = 0
		for {
			v, st := parseLeaf(buf, c.sl.leafClass())
			if st == leafOK {
				f.i++
				if sc.inRange(v.key) && !yield(KV{Key: bytes.Clone(v.key), Value: bytes.Clone(v.value)}, nil) {
					return errStop
				}
				break
			}
			var err error
			if st == leafTorn {
				err = s.retry()
			} else if c, err = s.reread(ctx, c); err == nil && (!c.sl.isLeaf() || c.sl.isTombstone()) {
				// Split into a node, or deleted: let the main loop handle it.
				f.items[f.i] = c
				if c.sl.isTombstone() {
					f.i++
				}
				return nil
			}
			if err != nil {
				return err
			}
			f.items[f.i] = c
			buf = grow(s.leafBuf, classBytes(c.sl.leafClass()))
			s.leafBuf = buf
			if err := s.c.Read(ctx, c.sl.addr(), buf); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sc *scanner) inRange(key []byte) bool {
	return bytes.Compare(key, sc.lo) >= 0 && (sc.hi == nil || bytes.Compare(key, sc.hi) < 0)
}

// expand reads the node cur points to and pushes a frame of its children
// whose subtrees intersect the range. path is the encoded prefix above the
// node (the partial keys of the slots that led here).
func (sc *scanner) expand(ctx context.Context, cur cursor, path []byte) error {
	s := sc.s
	s.retries = 0
	for {
		if cur.sl.isTombstone() {
			return nil
		}
		if cur.sl.isLeaf() {
			sc.stack = append(sc.stack, frame{path: path, items: []cursor{cur}})
			return nil
		}
		cur.depth = len(path)
		ok, err := s.readNode(ctx, cur)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if cur, err = s.reread(ctx, cur); err != nil {
			return err
		}
	}
	n := &s.node
	path = n.prefix(path)
	if !sc.overlaps(path) {
		return nil
	}
	f := frame{path: path}
	for i := range n.typ.capacity() {
		sl := n.slots[i]
		if !sl.isChild() {
			continue
		}
		if sc.overlaps(append(path, sl.partial())) {
			f.items = append(f.items, cursor{addr: n.slotAddr(i), sl: sl, depth: len(path) + 1})
		}
	}
	slices.SortFunc(f.items, func(a, b cursor) int { return int(a.sl.partial()) - int(b.sl.partial()) })
	sc.stack = append(sc.stack, f)
	return nil
}

// overlaps reports whether some encoded key starting with p may lie in
// [elo, ehi).
func (sc *scanner) overlaps(p []byte) bool {
	if m := min(len(p), len(sc.elo)); bytes.Compare(p[:m], sc.elo[:m]) < 0 {
		return false
	}
	if sc.ehi != nil {
		m := min(len(p), len(sc.ehi))
		c := bytes.Compare(p[:m], sc.ehi[:m])
		if c > 0 || (c == 0 && len(p) >= len(sc.ehi)) {
			return false
		}
	}
	return true
}
