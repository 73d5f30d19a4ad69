package smart

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"
	"slices"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/remote"
)

// Scan yields the pairs with lo <= key < hi in ascending order (nil hi: no
// upper bound).
//
// The scan keeps a frontier: the not yet yielded parts of the range as a
// list of slots in key order. Each round reads the first unresolved slots
// of the frontier in one batch, nodes and leaves alike (parallel reads per
// level), replaces each node read by its children that intersect the range,
// and yields the leaves at the front. A round reads entries in key order up
// to a budget of verbs (scanFirstWindow, growing by a quarter up to
// scanWindow) and of bytes (scanFirstRound, growing by a quarter up to
// scanMaxRound); the budgets grow only once pairs are being yielded, so
// stopping early reads little beyond what was yielded, and small leaves do
// not turn a short scan into hundreds of READs (the memory nodes' IOPS are
// the scarce resource). Growing by a quarter instead of doubling costs a
// scan of about 50 pairs one and a half round trips more and saves a
// quarter of its verbs (docs/results/README.md). A scan that follows one
// its caller stopped, on the same compute node's session, expects its
// caller to take as many pairs and reads as ScanLimit does for that many;
// past them it goes on with full rounds. Scans told their length, and
// scans that run out of keys, leave that expectation as it is.
// A leaf found retired sends the scan back to its slot (the same position in
// key order), so a key present for the whole scan is yielded exactly once
// even while leaves split or move.
func (t *Tree) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error] {
	return t.scan(ctx, lo, hi, false, 0)
}

// ReverseScan yields the pairs with lo <= key < hi in descending order (nil
// hi: no upper bound), with the guarantees and costs of Scan: it is the
// same frontier walk with every node's children taken in descending order
// of their partial keys (the key encoding is prefix-free, so a key's
// extensions sort after it and are yielded before it).
func (t *Tree) ReverseScan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error] {
	return t.scan(ctx, lo, hi, true, 0)
}

// ScanLimit is Scan bounded to the first limit pairs (limit <= 0: no
// bound; index.LimitScanner). A round then reads, in key order, the
// entries the pairs still to yield need, all at once (up to 64 READs and
// 64 KB a round) instead of a budget growing by a quarter: a leaf counts
// one pair, a node as many as the session's scans found below the nodes
// of its type (before they found any, a number its type implies). A scan
// of n pairs reads about n leaves and the nodes above them in fewer round
// trips, where a scan stopped by its caller after n pairs, unless the
// scan before it was stopped after as many, has read ahead (about a
// quarter more at 50 pairs).
func (t *Tree) ScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	return t.scan(ctx, lo, hi, false, max(limit, 0))
}

// ReverseScanLimit is ReverseScan bounded to the first limit pairs (limit
// <= 0: no bound), reading as ScanLimit does.
func (t *Tree) ReverseScanLimit(ctx context.Context, lo, hi []byte, limit int) iter.Seq2[KV, error] {
	return t.scan(ctx, lo, hi, true, max(limit, 0))
}

// scan is the sequence of the four scans: desc for the reverse ones, limit
// the most pairs to yield (0: no bound).
func (t *Tree) scan(ctx context.Context, lo, hi []byte, desc bool, limit int) iter.Seq2[KV, error] {
	return func(yield func(KV, error) bool) {
		if err := t.runScan(ctx, lo, hi, desc, limit, func(kv KV, _ slot) bool { return yield(kv, nil) }); err != nil {
			yield(KV{}, err)
		}
	}
}

// runScan runs a scan of [lo, hi) (desc, limit: as for scan) in a session
// of its own and calls yield with each pair and the slot value of its
// leaf until yield returns false. It returns the scan's error, nil when
// the scan ended or yield stopped it.
func (t *Tree) runScan(ctx context.Context, lo, hi []byte, desc bool, limit int, yield func(KV, slot) bool) error {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return nil
	}
	s, err := t.sessionFor(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	sc := s.scanner(lo, hi, desc, limit)
	defer sc.keep()
	err = sc.run(ctx, yield)
	if err == errStop && limit == 0 {
		s.scanHint = sc.yielded
	}
	if err != nil && err != errStop {
		return wrapRemote(err)
	}
	return nil
}

// scanner returns the session's scanner, set up for a scan of [lo, hi)
// (desc, limit: as for Tree.scan), with the buffers of its last scan: a
// scan allocates nothing but its closure and its arena. The caller calls
// keep when the scan ends.
func (s *session) scanner(lo, hi []byte, desc bool, limit int) *scanner {
	sc := &s.scan
	kept := *sc
	*sc = scanner{s: s, desc: desc, left: limit, budget: scanFirstRound, window: scanFirstWindow,
		front: kept.front, next: kept.next, buf: kept.buf, tmp: kept.tmp, spill: kept.spill, snap: kept.snap,
		offs: kept.offs, paths: kept.paths, pairs: kept.pairs, paths2: kept.paths2, pairs2: kept.pairs2,
		loBuf: kept.loBuf, hiBuf: kept.hiBuf, last: kept.last[:0]}
	// The bounds are copied: the caller may reuse its slices once the
	// scan has started (index.Index).
	sc.loBuf = append(sc.loBuf[:0], lo...)
	sc.lo = sc.loBuf
	if hi != nil {
		sc.hiBuf = append(sc.hiBuf[:0], hi...)
		sc.hi = sc.hiBuf[:len(hi):len(hi)]
	}
	if limit == 0 {
		sc.expect = s.scanHint
	}
	if limit > 0 || sc.expect > 0 {
		// Told its length, or expecting one, the scan reads what the rest
		// needs at once (round stops where the pairs still to yield, or
		// expected, are covered).
		sc.budget, sc.window = scanMaxRound, scanWindow
	}
	sc.elo = appendEncoded(kept.elo, lo)
	if hi != nil {
		sc.ehi = appendEncoded(kept.ehi, hi)
	}
	return sc
}

// The bytes one scan round reads (at least one entry) start at
// scanFirstRound and grow by a quarter up to scanMaxRound; its verbs start
// at scanFirstWindow and grow by a quarter up to scanWindow.
const (
	scanFirstRound  = 2 << 10
	scanMaxRound    = 64 << 10
	scanFirstWindow = 8
	scanWindow      = 64
	scanArena       = 4 << 10  // bytes of yielded pairs per allocation
	scanCompact     = 64 << 10 // see compact
	// scanRunGap is the most bytes a round reads between two leaves to
	// read them with one READ (layout): at the cx6 profile's rates a
	// memory node serves 256 bytes in about the time it spends on a verb.
	scanRunGap = 256
)

// entry is one slot of the scan frontier, or the rest of a node's children
// (spill > 0, see children and expand). It holds no pointer: the frontier
// moves entries round by round, and entries without pointers move without
// write barriers and need no clearing for the garbage collector.
type entry struct {
	cur cursor
	// The encoded bytes above the slot's partial key (shared by
	// siblings): scanner.paths[pathOff:][:pathLen].
	pathOff uint32
	pathLen uint16
	// cut, if not 0, narrows a node entry to its children from partial key
	// cut-1 on in scan order (descending: up to it): the part of a NODE_256
	// that the cache did not stand in for (fromCache).
	cut uint16
	// ready: the key and the value of a leaf read and in range are
	// scanner.pairs[pairOff:][:pairLen], the key first.
	pairOff, pairLen uint32
	keyLen           uint8 // of the pair
	ready            bool
	root             bool // the root slot: no partial key of its own
	snap             bool // cur.sl comes from the cache's snapshot of its node (fromCache)
	// inside: every key under the slot lies in the scan's range, so a
	// leaf there needs no comparison with its bounds (insideBounds).
	inside  bool
	retries int16
	// The children of the node cur names that are not in the frontier
	// yet: the node's slots as read are at spill-1 in the scanner's spill
	// buffer, followed by the slot indexes of its children in scan order,
	// of which the first took are in the frontier and the next left not.
	spill      int32
	took, left uint16
}

// readyWith makes e ready to yield the pair of leaf v, copied into the
// scanner's pairs.
func (e *entry) readyWith(sc *scanner, v leafView) {
	e.pairOff, e.pairLen = uint32(len(sc.pairs)), uint32(len(v.key)+len(v.value))
	appendBytes(&sc.pairs, v.key[:len(v.key)+len(v.value)]) // the value follows the key
	e.keyLen = uint8(len(v.key))
	e.ready = true
}

// kv returns the pair of a ready entry, copied into the scan's arena: the
// caller owns it.
func (sc *scanner) kv(e *entry) KV {
	p := sc.own(sc.pairs[e.pairOff:][:e.pairLen])
	k := int(e.keyLen)
	return KV{Key: p[:k:k], Value: p[k:]}
}

// path returns e's path (entry.pathOff), valid until the next setPath.
func (sc *scanner) path(e *entry) []byte { return sc.paths[e.pathOff:][:e.pathLen] }

// setPath makes a copy of p e's path.
func (sc *scanner) setPath(e *entry, p []byte) {
	e.pathOff, e.pathLen = uint32(len(sc.paths)), uint16(len(p))
	appendBytes(&sc.paths, p)
}

type scanner struct {
	s      *session
	lo, hi []byte
	desc   bool // ReverseScan: the frontier is in descending key order
	// left is the number of pairs the scan may still yield (ScanLimit),
	// or 0 for no bound: a bounded scan ends when it yielded its last.
	left int
	// expect is, for a scan not told its length, how many more pairs it
	// expects its caller to take: what the session's last such scan
	// yielded before its caller stopped it (session.scanHint), less the
	// pairs yielded since; 0 once they are yielded, or without a hint.
	// Rounds read for it as for a told length (want), since callers that
	// stop scans tend to stop them at the same length, and without it a
	// scan starts small and grows its rounds by a quarter.
	expect   int
	yielded  int // pairs passed to the caller so far
	elo, ehi []byte
	// front is the frontier as a stack: its last entry comes first in
	// scan order, so a round replaces the entries at its top and never
	// moves the (often long) rest. Entries past its length are stale
	// (entries hold no pointer, so nothing clears them).
	front  []entry
	next   []entry // a round's results, in scan order
	budget int     // bytes read per round
	window int     // verbs per round
	buf    []byte
	tmp    []byte
	spill  []byte // the slots of nodes whose children wait in the frontier (expand)
	snap   []byte // a cached node's slot words (fromCache)
	offs   []int  // where in buf a round reads each entry (layout)
	// noCache: the scan restarted; it reads every node from here on.
	noCache bool
	arena   []byte // the yielded pairs' bytes (see own)
	// last is the scan's own copy of the key of the last pair yielded
	// (resume; empty until one is: keys are never empty), and loBuf and
	// hiBuf of its bounds: the caller owns its bounds and the pairs
	// yielded, and may change them while the scan goes on.
	last         []byte
	loBuf, hiBuf []byte
	// The entries' paths and pairs (entry.pathOff, entry.pairOff), and
	// the buffers compact moves them to; kept is how many bytes of each
	// the last compaction kept.
	paths, pairs, paths2, pairs2 []byte
	keptPaths, keptPairs         int
}

// keep empties the scanner's buffers for the session's next scan and drops
// its references to yielded pairs, paths and the caller's bounds.
func (sc *scanner) keep() {
	*sc = scanner{front: sc.front[:0], next: sc.next[:0], buf: sc.buf, tmp: sc.tmp[:0],
		spill: sc.spill[:0], snap: sc.snap, offs: sc.offs[:0], elo: sc.elo[:0], ehi: sc.ehi[:0],
		paths: sc.paths[:0], pairs: sc.pairs[:0], paths2: sc.paths2[:0], pairs2: sc.pairs2[:0],
		loBuf: sc.loBuf[:0], hiBuf: sc.hiBuf[:0], last: sc.last[:0]}
}

// compact moves the paths of the frontier's entries and the pairs of its
// ready ones to the start of the other buffers when either buffer has
// grown past scanCompact bytes and twice what the last compaction kept,
// so that a long scan keeps only what its frontier still names (siblings
// keep sharing their path). It runs between rounds.
func (sc *scanner) compact() {
	if len(sc.paths) <= max(scanCompact, 2*sc.keptPaths) && len(sc.pairs) <= max(scanCompact, 2*sc.keptPairs) {
		return
	}
	paths, pairs := sc.paths2[:0], sc.pairs2[:0]
	lastOff, lastLen, lastNew := -1, 0, uint32(0)
	for i := range sc.front {
		e := &sc.front[i]
		if int(e.pathOff) != lastOff || int(e.pathLen) != lastLen {
			lastOff, lastLen, lastNew = int(e.pathOff), int(e.pathLen), uint32(len(paths))
			paths = append(paths, sc.path(e)...)
		}
		e.pathOff = lastNew
		if e.ready {
			off := uint32(len(pairs))
			pairs = append(pairs, sc.pairs[e.pairOff:][:e.pairLen]...)
			e.pairOff = off
		}
	}
	sc.paths, sc.paths2 = paths, sc.paths[:0]
	sc.pairs, sc.pairs2 = pairs, sc.pairs[:0]
	sc.keptPaths, sc.keptPairs = len(paths), len(pairs)
}

// own copies b into the scan's arena: the caller owns the copy, and one
// allocation of up to scanArena bytes serves many pairs; a scan told its
// length, or expecting one, takes what its pairs left need at b's size
// (a larger pair later takes another allocation for the rest), since every
// byte allocated brings the next garbage collection closer, and the
// collections cost a scan of 100 pairs about a tenth of its CPU
// (docs/results/README.md). The arena is never written again once a slice
// of it was handed out.
func (sc *scanner) own(b []byte) []byte {
	if len(sc.arena)+len(b) > cap(sc.arena) {
		n := scanArena
		if w := sc.want(); w > 0 {
			n = min(n, len(b)*w)
		}
		sc.arena = make([]byte, 0, max(len(b), n))
	}
	n := len(sc.arena)
	appendBytes(&sc.arena, b)
	return sc.arena[n:len(sc.arena):len(sc.arena)]
}

// appendBytes appends b to *dst. Unlike *dst = append(*dst, b...), it
// stores the slice's pointer only when the slice grows: every store of a
// pointer into the heap pays a write barrier while the garbage collector
// marks, which cost a told scan of 100 pairs 3% of its CPU when it stored
// the pointers of its pairs, paths and arena at each append.
func appendBytes(dst *[]byte, b []byte) {
	n := len(*dst)
	if cap(*dst)-n < len(b) {
		*dst = slices.Grow(*dst, len(b))
	}
	*dst = (*dst)[:n+len(b)]
	copy((*dst)[n:], b)
}

// errStop ends a scan whose consumer stopped.
var errStop = &stopError{}

type stopError struct{}

func (*stopError) Error() string { return "smart: scan stopped" }

func (sc *scanner) run(ctx context.Context, yield func(KV, slot) bool) error {
	if err := sc.start(ctx); err != nil {
		return err
	}
	resumes := 0 // in a row, without a pair yielded in between
	for len(sc.front) > 0 {
		if sc.s.lost() {
			// Other compute nodes may have reused leaves the frontier
			// names (I8): continue after the last pair yielded, from the
			// root, with a new pin.
			if resumes++; resumes > sc.s.t.retryBudget {
				return fmt.Errorf("%w: scan: the compute node's lease was lost %d times in a row (operations slower than half of 10 × ReclaimInterval?)", ErrContention, resumes-1)
			}
			if err := sc.resume(ctx); err != nil {
				return err
			}
			continue
		}
		done := 0
		var last []byte // the key of the last pair yielded here, in sc.pairs, for sc.last
		for n := len(sc.front); n > 0 && sc.front[n-1].ready; n-- {
			e := &sc.front[n-1]
			kv, leaf := sc.kv(e), e.cur.sl
			last = sc.pairs[e.pairOff:][:e.keyLen]
			sc.front = sc.front[:n-1]
			sc.yielded++
			if sc.expect > 0 {
				sc.expect--
			}
			if !yield(kv, leaf) {
				return errStop
			}
			done++
			resumes = 0
			if sc.left > 0 {
				if sc.left--; sc.left == 0 {
					return nil
				}
			}
		}
		if done > 0 {
			sc.last = append(sc.last[:0], last...)
			// Streaming leaves: read further ahead. While descending to the
			// first leaf the budget stays small.
			sc.budget = min(sc.budget+sc.budget/4, scanMaxRound)
			sc.window = min(sc.window+sc.window/4, scanWindow)
		}
		if len(sc.front) == 0 {
			return nil
		}
		sc.compact()
		if err := ctx.Err(); err != nil {
			return err
		}
		sc.s.touch()
		if err := sc.round(ctx); err != errRestart {
			if err != nil {
				return err
			}
			continue
		}
		// A node on the way was moving (docs/smart-node-growth.md): the
		// frontier may name its slots, which stop counting once it moved;
		// continue after the last pair yielded, from the root.
		if resumes++; resumes > sc.s.t.retryBudget {
			return fmt.Errorf("%w: scan: met moving nodes %d times in a row", ErrContention, resumes-1)
		}
		if err := sc.restartPast(ctx); err != nil {
			return err
		}
	}
	return nil
}

// start puts the root slot alone in the frontier, with the value the
// compute node last read there (session.rememberedRoot).
func (sc *scanner) start(ctx context.Context) error {
	root, err := sc.s.rememberedRoot(ctx)
	if err != nil {
		return err
	}
	sc.front = append(sc.front[:0], entry{cur: root, root: true})
	sc.spill = sc.spill[:0]
	return nil
}

// resume renews a lost scan's pin and starts it again past the last pair
// yielded: the range shrinks to the keys after it (before it, descending).
func (sc *scanner) resume(ctx context.Context) error {
	if err := sc.s.renew(); err != nil {
		return err
	}
	return sc.restartPast(ctx)
}

// restartPast starts the scan again past the last pair yielded.
func (sc *scanner) restartPast(ctx context.Context) error {
	sc.noCache = true
	if len(sc.last) > 0 {
		if sc.desc {
			sc.hiBuf = append(sc.hiBuf[:0], sc.last...)
			sc.hi = sc.hiBuf
			sc.ehi = appendEncoded(sc.ehi[:0], sc.hi)
		} else {
			sc.loBuf = append(append(sc.loBuf[:0], sc.last...), 0) // the least key after last
			sc.lo = sc.loBuf
			sc.elo = appendEncoded(sc.elo[:0], sc.lo)
		}
		if sc.hi != nil && bytes.Compare(sc.lo, sc.hi) >= 0 {
			sc.front = sc.front[:0]
			return nil
		}
	}
	return sc.start(ctx)
}

// round reads the first unresolved entries of the frontier in one batch and
// resolves them: the entries from the top of the stack down to the last
// one read are replaced by what they resolve to.
func (sc *scanner) round(ctx context.Context) error {
	s := sc.s
	n, total, low := 0, 0, len(sc.front)
	ahead := 0 // with a limit: the pairs the entries before i are expected to yield, in sixteenths
	for i := len(sc.front) - 1; i >= 0; i-- {
		e := &sc.front[i]
		if e.ready {
			ahead += 16
			continue
		}
		if want := sc.want(); n == sc.window || (want > 0 && ahead >= 16*want) {
			break
		}
		// Entries resolved without a READ: the rest of a node's children,
		// a NODE_256 the cache can stand in for.
		k := 0
		if e.spill > 0 {
			k = sc.expand(i)
		} else if !sc.noCache && !e.cur.sl.isLeaf() && e.cur.sl.nodeType() == node256 {
			k = sc.fromCache(i)
		}
		if k > 0 {
			// The entries selected so far move up by what replaced entry i.
			low += k - 1
			i += k
			continue
		}
		m := readSize(e.cur.sl)
		if n > 0 && total+m > sc.budget {
			break
		}
		n++
		total += m
		low = i
		ahead += sc.expected(e.cur.sl)
	}
	ops := sc.layout(low, total)
	if err := s.do(ctx, ops); err != nil {
		return err
	}
	// Resolve the entries read from the bottom of the stack up, each into
	// its results in reverse scan order. Up to the first node, an entry
	// resolves to itself or to nothing, so the results stay in the
	// frontier (w: the end of those kept); from there on they go to
	// next[w:], and the shorter of front[:w] and next[w:] is copied to
	// join the other (a round that expands a node resolves most of the
	// frontier, so its results are seldom the shorter).
	next, w := sc.next[:0], low
	inPlace := true // no node resolved yet: the results so far are front[low:w]
	for i := low; i < len(sc.front); i++ {
		e := &sc.front[i]
		keep := true // e stays, resolved in place (a node's results are in next)
		var err error
		if !e.ready {
			off := sc.offs[i-low]
			buf := sc.buf[off : off+readSize(e.cur.sl)]
			if e.cur.sl.isLeaf() {
				keep, err = sc.leaf(ctx, e, buf)
			} else {
				if inPlace {
					next = slices.Grow(next, w)[:w] // front[:w] may come here
				}
				next, err = sc.node(ctx, next, e, buf)
				keep, inPlace = false, false
			}
		}
		switch {
		case !keep:
		case inPlace:
			if w != i {
				sc.front[w] = *e
			}
			w++
		default:
			next = append(next, *e)
		}
		if err != nil {
			sc.next = next[:0]
			return err
		}
	}
	switch {
	case inPlace:
		sc.front = sc.front[:w]
	case w <= len(next)-w:
		copy(next, sc.front[:w])
		sc.front, sc.next = next, sc.front[:0]
	default:
		sc.front = append(sc.front[:w], next[w:]...)
		sc.next = next[:0]
	}
	return nil
}

// layout returns the READs of a round that reads the unresolved entries of
// front[low:], whose reads take total bytes, and sets sc.offs[i-low] to
// where in sc.buf entry i is read. An entry is one READ, except that leaves
// in scan order whose memory follows in the same direction (ascending or
// descending) with at most scanRunGap bytes between one leaf and the next
// (a run) are read by one READ of the bytes from the first to the last:
// one verb of the memory node's IOPS instead of one per leaf, for at most
// scanRunGap bytes more per leaf (Compact lays leaves out so; the gaps are
// lock words and the leaves of nodes that this round does not resolve
// yet). Each leaf of a run is then checked as any other leaf read (I7),
// from its own bytes; what the READ brings between them is not looked at.
func (sc *scanner) layout(low, total int) []remote.Op {
	ops := sc.s.batch()
	sc.offs = slices.Grow(sc.offs[:0], len(sc.front)-low)[:len(sc.front)-low]
	sc.buf = grow(sc.buf, total+(8+scanRunGap)*len(sc.offs)) // room for what runs read between leaves
	off := 0
	for i := len(sc.front) - 1; i >= low; i-- {
		e := &sc.front[i]
		if e.ready {
			continue
		}
		// The entries from i down to j+1 are read by one READ of [from,
		// to); offs holds their addresses until the READ is placed.
		from := uint64(e.cur.sl.addr())
		to := from + uint64(readSize(e.cur.sl))
		sc.offs[i-low] = int(from)
		j := i - 1
		if e.cur.sl.isLeaf() {
			// [lo, hi): the last leaf of the run, lock word included.
			lo, hi, dir := from, from+uint64(classBytes(e.cur.sl.leafClass())), 0
		run:
			for ; j >= low; j-- {
				f := &sc.front[j]
				if f.ready {
					continue
				}
				sl := f.cur.sl
				if !sl.isLeaf() {
					break
				}
				a := uint64(sl.addr())
				end := a + uint64(classBytes(sl.leafClass()))
				switch {
				case dir >= 0 && inRun(hi, a):
					dir, to = 1, end-8
				case dir <= 0 && inRun(end, lo):
					dir, from = -1, a
				default:
					break run
				}
				lo, hi = a, end
				sc.offs[j-low] = int(a)
			}
		}
		// The READ is set field by field in place: an Op appended whole is
		// copied with a bulk write barrier while the garbage collector
		// marks (about a quarter of the time while scans allocate their
		// arenas): runtime.wbMove, 1.7% of a scan of 100 pairs.
		span := int(to - from)
		ops = slices.Grow(ops, 1)[:len(ops)+1]
		o := &ops[len(ops)-1]
		o.Kind, o.Addr, o.Buf = remote.OpRead, remote.Addr(from), sc.buf[off:off+span]
		o.Compare, o.Swap, o.Old = 0, 0, 0
		for k := i; k > j; k-- {
			if !sc.front[k].ready {
				sc.offs[k-low] += off - int(from)
			}
		}
		off += span
		i = j + 1
	}
	return ops
}

// inRun reports whether a leaf that starts at next is close enough after
// the end of another (end) for a scan round to read both with one READ:
// at most scanRunGap bytes between them.
func inRun(end, next uint64) bool { return next >= end && next-end <= scanRunGap }

// expectedPairs is how many pairs a scan expects below a node of type t
// before its session's scans learned better (pairEstimate): the least
// number of slots a node of its type has in use when its type is taken in
// place only once the one below it is full (the paper's nodes: one more
// than the type below holds), which deletes may leave as tombstones. By
// size class a node moves to twice or four times its slots and a leaf
// split creates a NODE_8 under a dense node, so the same counts are a
// typical number rather than a bound, and a NODE_8 counts four: it starts
// with two children and is full at eight.
func expectedPairs(t nodeType, paper bool) int {
	switch {
	case t == node8 && !paper:
		return 4
	case t > node4:
		return (t - 1).capacity() + 1
	}
	return 2
}

// pairEstimate is what a session's scans learned of how many pairs lie
// below a node of each type: for each type, the pairs below the first node
// of that type a scan read whole, then a moving average (weight 1/8 per
// node) of them, in sixteenths of a pair; 0 before the first. The type
// alone says little: a NODE_8 created under a dense node holds about 2.6
// pairs when 100 k random keys load a tree and 3 to 4 with YCSB's keys,
// and an estimate too high costs a told scan a round trip for the pairs
// it lacks, one too low READs it does not need (docs/results/README.md,
// "What a scan expects below a node: learned, not fixed").
type pairEstimate [node256 + 1]int32

// expected returns the pairs, in sixteenths, the scan expects below the
// child of sl: for a node, what the session's scans learned of its type,
// or before they learned anything (and for a leaf) what the slot implies
// (fixed).
func (sc *scanner) expected(sl slot) int {
	if !sl.isLeaf() {
		if v := sc.s.scanPairs[sl.nodeType()]; v > 0 {
			return int(v)
		}
	}
	return sc.fixed(sl)
}

// fixed returns the pairs, in sixteenths, that the slot sl alone implies
// below its child: one for a leaf, expectedPairs of its type for a node.
func (sc *scanner) fixed(sl slot) int {
	if sl.isLeaf() {
		return 16
	}
	return 16 * expectedPairs(sl.nodeType(), sc.s.t.opts.PaperNodes)
}

// learn adds to the session's estimate a node of type t read whole, whose
// children are the slots order names, counted by what their slots imply
// (fixed). Not by what was learned of the child nodes' types: a type's
// estimate would then feed on itself through the nodes of its type below
// (a NODE_256 whose children are NODE_256s counts 256 times its own
// estimate, which after three such nodes overflows; TestLearnBounded).
func (sc *scanner) learn(t nodeType, slots []byte, order []uint8) {
	pairs := 0
	for _, i := range order {
		pairs += sc.fixed(slot(binary.LittleEndian.Uint64(slots[8*int(i):])))
	}
	if v := &sc.s.scanPairs[t]; *v == 0 {
		*v = int32(max(pairs, 1))
	} else {
		*v = max(*v+(int32(pairs)-*v)/8, 1)
	}
}

// readSize is how many bytes a scan reads for the child of sl.
func readSize(sl slot) int {
	if sl.isLeaf() {
		return leafReadBytes(sl.leafClass())
	}
	return sl.nodeType().readBytes()
}

// leaf resolves a leaf entry read into buf, in place: it reports whether
// e stays in the frontier, ready to yield its pair or unresolved for the
// next round.
func (sc *scanner) leaf(ctx context.Context, e *entry, buf []byte) (bool, error) {
	v, st := sc.s.t.lf.parse(buf, e.cur.sl.leafClass())
	switch {
	case st == leafOK && !sc.s.reused(e.cur, v.birth):
		if !e.inside && !sc.inRange(v.key) {
			return false, nil
		}
		e.readyWith(sc, v)
		return true, nil
	case st == leafTorn:
		// Being written: read it again next round, after a wait.
		if err := sc.s.wait(); err != nil {
			return false, err
		}
		return true, sc.retry(e)
	}
	// Retired, or born during the scan (possibly a later life of the leaf
	// the slot named, I8): what the slot holds now takes the leaf's place;
	// if it still holds this leaf, the removal has not happened, the leaf
	// is the one linked there, and the content is current.
	w, err := sc.s.readWord(ctx, e.cur.addr)
	if err != nil {
		return false, err
	}
	if slot(w).isFrozen() {
		return false, sc.s.movingRestart(ctx, cursor{}, e.cur.node)
	}
	if slot(w).addr() == e.cur.sl.addr() {
		if sc.s.t.opts.Reclaim && !e.cur.confirmed {
			// With reclamation the content counts only if read after a
			// read of the slot that named the leaf (I8): read it again.
			e.cur.confirmed = true
			return true, sc.retry(e)
		}
		if !e.inside && !sc.inRange(v.key) {
			return false, nil
		}
		e.readyWith(sc, v)
		return true, nil
	}
	e.cur.sl = slot(w)
	if !e.cur.sl.isChild() {
		return false, nil // deleted
	}
	return true, sc.retry(e)
}

// again keeps e unresolved for the next round, within the retry budget.
func (sc *scanner) again(next []entry, e *entry) ([]entry, error) {
	if err := sc.retry(e); err != nil {
		return next, err
	}
	return append(next, *e), nil
}

// retry counts a read of e that resolved nothing against the retry budget.
func (sc *scanner) retry(e *entry) error {
	if e.retries++; e.retries > maxScanRetries {
		return fmt.Errorf("%w: scan: the slot at %v kept changing for %d reads", ErrContention, e.cur.addr, maxScanRetries)
	}
	return nil
}

// maxScanRetries bounds the re-reads of one frontier entry (a leaf torn by
// writers again and again, a node split again and again).
const maxScanRetries = 1 << 12

// node resolves a node entry read into buf: its children that intersect the
// range take its place, appended to next in reverse scan order (the
// frontier's stack order).
func (sc *scanner) node(ctx context.Context, next []entry, e *entry, buf []byte) ([]entry, error) {
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	if h.isForwarded() {
		if e.snap {
			return sc.refresh(ctx, next, e)
		}
		return next, sc.s.movingRestart(ctx, cursor{}, e.cur.sl.addr())
	}
	if e.snap && remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:])) != e.cur.addr {
		// The slot value came from the cache, and the node's reverse
		// pointer names another slot, or carries a moving flag: a header
		// split may have published a new node above it and not yet
		// lowered its header, which then reads as the snapshot expects
		// while the new node holds keys the snapshot cannot show (what
		// session.stale checks for point operations). Read the slot.
		return sc.reread(ctx, next, e)
	}
	depth := int(e.pathLen) + 1
	if e.root {
		depth = 0
	}
	skip := depth - h.depth()
	if t := h.nodeType(); t > e.cur.sl.nodeType() && t <= node256 {
		// The node switched type: read it again in full next round.
		e.cur.sl = e.cur.sl.withType(t)
		return sc.again(next, e)
	}
	if h.depth() > depth || skip > h.prefixLen() || h == 0 {
		// A header split moved the node: re-read the slot.
		return sc.reread(ctx, next, e)
	}
	sc.tmp = append(sc.tmp[:0], sc.path(e)...)
	if !e.root {
		sc.tmp = append(sc.tmp, e.cur.sl.partial())
	}
	for i := skip; i < h.prefixLen(); i++ {
		sc.tmp = append(sc.tmp, h.prefixByte(i))
	}
	if !sc.overlaps(sc.tmp) {
		return next, nil
	}
	slots := buf[nodeSlotsOff : nodeSlotsOff+8*e.cur.sl.nodeType().capacity()]
	first, last := sc.entryBounds(e, sc.tmp)
	var order [256]uint8
	n, frozen := childOrder(slots, first, last, sc.desc, &order)
	if frozen {
		if e.snap {
			return sc.refresh(ctx, next, e)
		}
		return next, sc.s.movingRestart(ctx, cursor{}, e.cur.sl.addr())
	}
	if first == 0 && last == 255 {
		sc.learn(e.cur.sl.nodeType(), slots, order[:n])
	}
	if e.cur.sl.nodeType() == node256 && h.prefixLen() == 0 {
		sc.remember(sc.tmp, e.cur, slots)
	}
	rest := entry{cur: e.cur}
	sc.setPath(&rest, sc.tmp) // shared by the children's entries
	return sc.children(next, rest, slots, order[:n]), nil
}

// remember caches the slots of a NODE_256 without a compressed path that
// the scan read at cur, under its full prefix, unless the cache holds the
// same snapshot: later scans take its children from there (fromCache) once
// every partial key has a child node. Point operations seldom read these
// nodes again once the nodes below them are cached, so without this their
// snapshots would stay as old as the first read.
func (sc *scanner) remember(prefix []byte, cur cursor, slots []byte) {
	s := sc.s
	if s.t.opts.CacheBytes < 0 {
		return
	}
	used := len(slots) / 8
	for used > 0 && binary.LittleEndian.Uint64(slots[8*(used-1):]) == 0 {
		used--
	}
	if c, ok := s.t.cache.Get(prefix); ok && c.Addr == uint64(cur.sl.addr()) && sameWords(c.Slots(), slots[:8*used]) {
		return // compared in place: most scans read a node as cached
	}
	words := s.slotWords[:used]
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(slots[8*i:])
	}
	s.cacheNode(prefix, cur.sl.addr(), words, int(cur.level))
}

// sameWords reports whether b holds the words of w, little-endian.
func sameWords(w []uint64, b []byte) bool {
	if 8*len(w) != len(b) {
		return false
	}
	for i, x := range w {
		if binary.LittleEndian.Uint64(b[8*i:]) != x {
			return false
		}
	}
	return true
}

// fromCache replaces the frontier's entry i, the slot of a NODE_256, by the
// node's children as the compute node's cache last saw them, without
// reading the node, when the snapshot is sure to name every child the
// range needs: the cache holds the node under the prefix the slot implies
// (so the node has no compressed path, and never will), and every partial
// key of the range has a child node in the snapshot. Slots never become
// empty again and a slot naming a node only ever names a node (I1), so the
// node has those children, and no others in the range, now and for the
// rest of the scan. When only the range's first partial keys in scan
// order have child nodes there, and those are expected to hold the pairs
// the scan still takes, the snapshot stands in for them, and entry i,
// narrowed to the rest of the range (entry.cut), goes after them: the node
// is read only if the scan gets there. What a child slot names may have
// changed since, as it may for any slot the frontier holds: a child that
// moved is found forwarded or frozen when read (refresh), one under a
// header split at the wrong depth; either drops the snapshot
// (dropSnapshot) and reads the slot again. It returns how many entries
// replace entry i, 0 if the cache cannot stand in for the READ.
func (sc *scanner) fromCache(i int) int {
	e := sc.front[i]
	sc.tmp = append(sc.tmp[:0], sc.path(&e)...)
	if !e.root {
		sc.tmp = append(sc.tmp, e.cur.sl.partial())
	}
	c, ok := sc.s.t.cache.Get(sc.tmp)
	if !ok || remote.Addr(c.Addr) != e.cur.sl.addr() || !sc.overlaps(sc.tmp) {
		return 0
	}
	first, last := sc.entryBounds(&e, sc.tmp)
	if first > last {
		return 0
	}
	words := c.Slots() // up to the last slot used: the rest were empty
	n := e.cur.sl.nodeType().capacity()
	if len(words) > n {
		return 0
	}
	// Every partial key of the part the snapshot stands for needs a child
	// node: the range's partial keys in scan order up to the first without
	// one (cut), all of them if none lacks one. A large entry answers
	// through its index, a lookup per key, and for a scan told its length
	// (or expecting one) stops (cuts) once the children are expected to
	// hold twice the pairs it still takes (want): the rest of the range
	// waits below them, and a scan that gets there takes it from the
	// cache again (a walk over every partial key of a root's range cost a
	// told scan of 100 pairs 3.5% of its CPU; at the pairs left alone the
	// estimate fell short often enough to cost YCSB-E 1.8% more round
	// trips). A small entry answers in a pass over its slots.
	cut, pairs, want := -1, 0, sc.want() // pairs: expected under the children before cut, in sixteenths
	var order [256]uint8
	walked := -1 // a large entry: the children before cut, in order[:walked]
	if len(words) > artcache.IndexedSlots {
		// The walk finds the children themselves: their words go to
		// sc.snap at their slot indexes, which order lists in scan order.
		sc.snap = grow(sc.snap, 8*n)
		walked = 0
		for j := range last - first + 1 {
			b := first + j
			if sc.desc {
				b = last - j
			}
			idx, w, ok := c.Slot(byte(b))
			if !ok || !slot(w).isChild() || slot(w).isLeaf() {
				cut = b
				break
			}
			if slot(w).isFrozen() {
				return 0
			}
			binary.LittleEndian.PutUint64(sc.snap[8*idx:], w)
			order[walked] = uint8(idx)
			walked++
			if pairs += sc.expected(slot(w)); want > 0 && pairs >= 32*want && j < last-first {
				// Children enough for twice the pairs the scan still
				// takes: the rest of the range waits below them (cut).
				if cut = b + 1; sc.desc {
					cut = b - 1
				}
				break
			}
		}
	} else {
		var missing [4]uint64 // the partial keys of the range without a child node
		for w := range missing {
			missing[w] = ^uint64(0)
		}
		keepRange(&missing, first, last)
		for _, w := range words {
			if sl := slot(w); sl.isChild() && !sl.isLeaf() {
				missing[sl.partial()/64] &^= 1 << (sl.partial() % 64)
			}
		}
		for j := range missing {
			w := j
			if sc.desc {
				w = len(missing) - 1 - j
			}
			if m := missing[w]; m != 0 {
				if cut = 64*w + bits.TrailingZeros64(m); sc.desc {
					cut = 64*w + 63 - bits.LeadingZeros64(m)
				}
				break
			}
		}
		if cut >= 0 {
			for _, w := range words {
				if b := int(slot(w).partial()); slot(w).isChild() && (!sc.desc && first <= b && b < cut || sc.desc && cut < b && b <= last) {
					pairs += sc.expected(slot(w))
				}
			}
		}
	}
	// Only part of the range from the snapshot is worth it when that part
	// is expected to hold the pairs the scan still takes (want; a scan
	// neither told nor expecting a length: a full round's worth), since otherwise the rest of the
	// node is read anyway and the snapshot's copy costs without saving the
	// READ.
	if want := cmp.Or(want, scanWindow); cut >= 0 && pairs < 16*want {
		return 0
	}
	if walked < 0 {
		// The snapshot stands in for the node unless a slot of it is
		// frozen (the node was moving when it was read).
		sc.snap = grow(sc.snap, 8*n)
		for j, w := range words {
			if slot(w).isFrozen() {
				return 0
			}
			binary.LittleEndian.PutUint64(sc.snap[8*j:], w)
		}
		clear(sc.snap[8*len(words):])
	}
	next := sc.next[:0]
	if cut >= 0 {
		// The rest of the node, from cut on, is read when the scan
		// gets there: it goes below the children the snapshot gives.
		if sc.desc {
			first = cut + 1
		} else {
			last = cut - 1
		}
		e.cut = uint16(cut) + 1
		next = append(next, e)
	}
	k := walked
	if walked < 0 {
		k, _ = childOrder(sc.snap, first, last, sc.desc, &order)
	}
	rest := entry{cur: e.cur, snap: true}
	sc.setPath(&rest, sc.tmp)
	return sc.replace(i, sc.children(next, rest, sc.snap, order[:k]))
}

// refresh resolves an entry whose slot value came from a cached snapshot
// (fromCache) and names a node found moving or moved: it waits for the
// move to complete, then drops the snapshot and reads the slot again
// (reread).
func (sc *scanner) refresh(ctx context.Context, next []entry, e *entry) ([]entry, error) {
	if err := sc.s.awaitMove(ctx, e.cur.sl.addr()); err != nil {
		return next, err
	}
	return sc.reread(ctx, next, e)
}

// reread resolves an entry whose slot no longer names what the entry
// holds (a node split above, or moved): it drops the snapshot the value
// came from, if it did, and reads the slot again, whose value takes the
// entry's place next round (a frozen slot: the node holding it is moving,
// restart).
func (sc *scanner) reread(ctx context.Context, next []entry, e *entry) ([]entry, error) {
	sc.dropSnapshot(e)
	w, err := sc.s.readWord(ctx, e.cur.addr)
	if err != nil {
		return next, err
	}
	if slot(w).isFrozen() {
		return next, sc.s.movingRestart(ctx, cursor{}, e.cur.node)
	}
	e.cur.sl, e.snap = slot(w), false
	return sc.again(next, e)
}

// dropSnapshot drops the cache entry that e's slot value came from, if it
// did (fromCache) and the entry is still there: e's node was found moved
// or split, so the snapshot names a child that is no longer the node's.
func (sc *scanner) dropSnapshot(e *entry) {
	if !e.snap {
		return
	}
	if c, ok := sc.s.t.cache.Get(sc.path(e)); ok && remote.Addr(c.Addr) == e.cur.node {
		sc.s.t.cache.Invalidate(sc.path(e), c)
		sc.s.t.cstats.invalidations.Add(1)
	}
}

// childOrder puts into order the indexes of the slots (a node's slot words)
// that hold a child with a partial key in first..last (none if first >
// last), in scan order (descending partial keys if desc), and returns how
// many there are, or frozen if a slot is frozen (the node is moving). A
// node holds each partial key once (I2): small nodes are sorted in place,
// larger ones through a bitmap of the partial keys present, in steps of
// one per child rather than one per partial key.
func childOrder(slots []byte, first, last int, desc bool, order *[256]uint8) (n int, frozen bool) {
	if len(slots) <= 8*16 {
		for i := range len(slots) / 8 {
			sl := slot(binary.LittleEndian.Uint64(slots[8*i:]))
			if sl.isFrozen() {
				return 0, true
			}
			if b := int(sl.partial()); sl.isChild() && first <= b && b <= last {
				// Insertion sort by partial key.
				j := n
				for ; j > 0 && desc == (int(slots[8*int(order[j-1])]) < b); j-- {
					order[j] = order[j-1]
				}
				order[j] = uint8(i)
				n++
			}
		}
		return n, false
	}
	var at [256]uint8 // slot index of each partial key present
	var present [4]uint64
	for i := range len(slots) / 8 {
		sl := slot(binary.LittleEndian.Uint64(slots[8*i:]))
		if sl.isFrozen() {
			return 0, true
		}
		if sl.isChild() {
			b := sl.partial()
			at[b] = uint8(i)
			present[b/64] |= 1 << (b % 64)
		}
	}
	if first > last {
		return 0, false
	}
	keepRange(&present, first, last)
	if desc {
		for w := 3; w >= 0; w-- {
			for m := present[w]; m != 0; n++ {
				b := 63 - bits.LeadingZeros64(m)
				m &^= 1 << b
				order[n] = at[64*w+b]
			}
		}
	} else {
		for w := range present {
			for m := present[w]; m != 0; n++ {
				b := bits.TrailingZeros64(m)
				m &= m - 1
				order[n] = at[64*w+b]
			}
		}
	}
	return n, false
}

// children appends to next, in reverse scan order (the frontier's stack
// order), the entries of the first sc.window of the children order names
// (slot indexes in scan order) among the slots of rest's node as read; if
// more remain, rest goes below them for them, with the node's slots and
// the rest of order in the spill buffer (already there if rest.spill is
// set: order is then the tail of what it holds). Taking a round's window
// of entries at a time keeps the frontier what it would be with every
// child in it, as far as a round looks: a scan that stops early never
// builds the entries of children it does not reach.
func (sc *scanner) children(next []entry, rest entry, slots []byte, order []uint8) []entry {
	n := min(len(order), sc.window)
	if n < len(order) {
		if rest.spill == 0 {
			rest.spill = int32(len(sc.spill)) + 1
			sc.spill = append(sc.spill, slots...)
			sc.spill = append(sc.spill, order...)
			rest.took = 0
		}
		rest.took += uint16(n)
		rest.left = uint16(len(order) - n)
		next = append(next, rest)
	}
	// The entries are written in place, field by field: a composite
	// literal appended is built on the stack and copied.
	node := rest.cur.sl.addr()
	above, below := sc.insideBounds(sc.path(&rest))
	at := len(next)
	next = slices.Grow(next, n)[:at+n]
	for j := n - 1; j >= 0; j-- {
		i := int(order[j])
		e := &next[at+n-1-j]
		*e = entry{}
		e.cur.addr, e.cur.sl, e.cur.node = nodeSlotAddr(node, i), slot(binary.LittleEndian.Uint64(slots[8*i:])), node
		e.inside = above < int(e.cur.sl.partial()) && int(e.cur.sl.partial()) < below
		e.cur.depth, e.cur.level = int16(rest.pathLen+1), rest.cur.level+1
		e.pathOff, e.pathLen, e.snap = rest.pathOff, rest.pathLen, rest.snap
	}
	return next
}

// expand replaces the frontier's entry i, the rest of a node's children,
// by the next of them (children) and returns how many entries replace it
// (the first child in scan order is the highest). The spilled slots of a
// node whose children are all out are dropped when they end the spill
// buffer, as they do when every entry above rest is a plain slot.
func (sc *scanner) expand(i int) int {
	rest := sc.front[i]
	from := int(rest.spill - 1)
	slots := sc.spill[from : from+8*rest.cur.sl.nodeType().capacity()]
	order := sc.spill[from+len(slots)+int(rest.took):][:rest.left]
	next := sc.children(sc.next[:0], rest, slots, order)
	if next[0].spill != rest.spill && from+len(slots)+int(rest.took+rest.left) == len(sc.spill) {
		sc.spill = sc.spill[:from]
	}
	return sc.replace(i, next)
}

// replace puts next (built in sc.next) in the frontier in place of its
// entry i and returns how many entries it holds.
func (sc *scanner) replace(i int, next []entry) int {
	sc.front = slices.Replace(sc.front, i, i+1, next...)
	sc.next = next[:0]
	return len(next)
}

// keepRange clears the bits of set outside [first, last] (0 <= first <=
// last <= 255).
func keepRange(set *[4]uint64, first, last int) {
	for w := range set {
		lo, hi := 64*w, 64*w+63
		if hi < first || lo > last {
			set[w] = 0
			continue
		}
		if first > lo {
			set[w] &^= 1<<(first-lo) - 1
		}
		if last < hi {
			set[w] &= 1<<(last-lo+1) - 1
		}
	}
}

// entryBounds is childBounds(path) for the node of entry e, narrowed to
// the part of the node e stands for (entry.cut).
func (sc *scanner) entryBounds(e *entry, path []byte) (first, last int) {
	first, last = sc.childBounds(path)
	switch {
	case e.cut == 0:
	case sc.desc:
		last = min(last, int(e.cut)-1)
	default:
		first = max(first, int(e.cut)-1)
	}
	return first, last
}

// childBounds returns the partial keys b, first to last, for which some
// encoded key starting with path+b may lie in [elo, ehi), given that one
// starting with path may (overlaps): a bound whose encoding extends path
// limits them by its next byte, and the upper one excludes that byte too
// when it ends right after it, or right after the terminator that follows
// it (every key starting with path+b is then ehi or sorts after it: the
// terminator sorts below every byte of an encoding). A descending scan
// below the key "a" no longer reads the child 'a' of the root.
func (sc *scanner) childBounds(path []byte) (first, last int) {
	above, below := sc.insideBounds(path)
	first, last = max(above, 0), min(below, 255)
	if n := len(path); below < 256 && (len(sc.ehi) == n+1 || len(sc.ehi) == n+2 && sc.ehi[n+1] == 0) {
		last--
	}
	return first, last
}

// insideBounds returns the partial keys above and below which every
// encoded key starting with path+b lies in [elo, ehi): those of b with
// above < b < below. A bound whose encoding extends path limits them by
// its next byte (path+b then orders every key that starts with it before
// or after the bound); one that does not leaves them unlimited, given that
// some key starting with path may lie in the range (overlaps).
func (sc *scanner) insideBounds(path []byte) (above, below int) {
	above, below = -1, 256
	if n := len(path); len(sc.elo) > n && bytes.Equal(path, sc.elo[:n]) {
		above = int(sc.elo[n])
	}
	if n := len(path); sc.ehi != nil && len(sc.ehi) > n && bytes.Equal(path, sc.ehi[:n]) {
		below = int(sc.ehi[n])
	}
	return above, below
}

// want is how many more pairs the scan is told (left) or expects
// (expect) to yield, 0 if neither.
func (sc *scanner) want() int { return cmp.Or(sc.left, sc.expect) }

// inRange reports whether key lies in [lo, hi).
func (sc *scanner) inRange(key []byte) bool {
	return bytes.Compare(key, sc.lo) >= 0 && (sc.hi == nil || bytes.Compare(key, sc.hi) < 0)
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
