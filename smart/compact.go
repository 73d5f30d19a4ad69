package smart

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dmindex/dmindex/remote"
)

// Compact moves the leaves of the keys in [lo, hi) (nil hi: no upper
// bound) next to one another in memory, in key order, in blocks of up to
// compactBlockBytes on one memory node each, and returns how many it
// moved. A scan then reads a block's leaves that it needs with one READ
// instead of one READ each (scan rounds read leaves adjacent in memory
// together), so the memory nodes' IOPS, which bind a radix tree's scans of
// small pairs, stop binding them. Leaves that already lie in key order, at
// least compactKeepRun in a row (a run, holes of deleted leaves allowed),
// stay where they are, so a second Compact moves nothing, and one after
// inserts moves the new leaves and the short runs between them. Leaves
// inserted or moved later (new keys, values that outgrow their leaf) are
// placed as before. The values stay as they are: each leaf moves as an
// update that outgrows its leaf does (moveLeaf: under its lock, the new
// leaf written and the old one marked before the slot CAS that links the
// new one), so Compact runs beside every other operation of any compute
// node and a reader sees the old leaf or the new one, both holding the
// current value. A leaf that its key's writers move meanwhile or that
// holds another key by then is skipped, its place in the block given back.
//
// Each moved leaf's old memory is retired as an outgrown leaf's is: reused
// with Options.Reclaim, leaked without it, so that Compact without Reclaim
// grows the memory nodes' use by the size of the leaves it moves. It costs
// about three round trips per leaf moved (lock and read, publish, retire)
// besides the scan that finds the keys.
func (t *Tree) Compact(ctx context.Context, lo, hi []byte) (int, error) {
	moved := 0
	var c chunk
	for {
		more, err := c.scan(ctx, t, lo, hi)
		if err != nil {
			return moved, err
		}
		if len(c.keys) == 0 {
			return moved, nil
		}
		// The pairs between runs of at least compactKeepRun leaves go to
		// a new block, unless they are one run already (a single pair, or
		// a short block that an earlier Compact wrote between long runs).
		from := 0
		for i := 0; i < len(c.keys); {
			j := c.runEnd(i)
			short := j-i < compactKeepRun
			if short && j < len(c.keys) {
				i = j
				continue
			}
			end := i
			if short {
				end = j // the chunk ends with short runs
			}
			if c.runEnd(from) < end {
				n, err := t.compactBlock(ctx, c.keys[from:end], c.classes[from:end])
				moved += n
				if err != nil {
					return moved, err
				}
			}
			i, from = j, j
		}
		if !more {
			return moved, nil
		}
		lo = append(bytes.Clone(c.keys[len(c.keys)-1]), 0) // the least key after the chunk's last
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return moved, nil
		}
	}
}

// A chunk is the pairs that one round of Compact looks at: at most
// compactBlockLeaves pairs and compactBlockBytes bytes of leaves, in key
// order, with their leaves (slot values) and the size classes Compact
// gives them.
type chunk struct {
	keys    [][]byte
	classes []int
	leaves  []slot
}

// scan fills c from lo on and reports whether pairs in [lo, hi) may follow.
// A run of leaves that the chunk's end would cut is left to the next chunk
// (unless it is the whole chunk), so that runs are judged whole.
func (c *chunk) scan(ctx context.Context, t *Tree, lo, hi []byte) (bool, error) {
	c.keys, c.classes, c.leaves = c.keys[:0], c.classes[:0], c.leaves[:0]
	size, more := 0, false
	err := t.runScan(ctx, lo, hi, false, compactBlockLeaves, func(kv KV, leaf slot) bool {
		k := t.lf.classOf(kv.Key, kv.Value)
		if size+classBytes(k) > compactBlockBytes && len(c.keys) > 0 {
			more = true
			return false
		}
		c.keys, c.classes, c.leaves = append(c.keys, kv.Key), append(c.classes, k), append(c.leaves, leaf)
		size += classBytes(k)
		return true
	})
	if err != nil {
		return false, err
	}
	if more = more || len(c.keys) == compactBlockLeaves; more {
		last := len(c.keys) - 1
		for last > 0 && c.follows(last) {
			last--
		}
		if last > 0 {
			c.keys, c.classes, c.leaves = c.keys[:last], c.classes[:last], c.leaves[:last]
		}
	}
	return more, nil
}

// follows reports whether pair i's leaf continues the run of pair i-1's:
// both of the size class Compact would give them, pair i's at most
// scanRunGap bytes after the end of the leaf before.
func (c *chunk) follows(i int) bool {
	if c.leaves[i].leafClass() != c.classes[i] || c.leaves[i-1].leafClass() != c.classes[i-1] {
		return false
	}
	return inRun(uint64(c.leaves[i-1].addr())+uint64(classBytes(c.classes[i-1])), uint64(c.leaves[i].addr()))
}

// runEnd returns the end of the run that starts at pair i.
func (c *chunk) runEnd(i int) int {
	j := i + 1
	for j < len(c.keys) && c.follows(j) {
		j++
	}
	return j
}

// A block of Compact holds at most compactBlockLeaves leaves and
// compactBlockBytes bytes; runs of at least compactKeepRun leaves stay
// where they are (a chunk of Compact spans about a block, so a block of
// fewer, larger leaves is a run of its own and stays too). Blocks go
// round-robin over the memory nodes, and the hot ranges of a skewed scan
// workload fall on a few of them: blocks of 4 KB balance the nodes better
// than blocks of 16 KB at a verb per scan more now and then (YCSB-E at 1 M
// records, 8 × 32 clients: 5.60 against 5.40 Mops with 8-byte values,
// 3.33 against 3.22 with 64-byte values; 2 KB and 1 KB blocks were no
// better, docs/results/README.md).
const (
	compactBlockBytes  = 4 << 10
	compactBlockLeaves = 64
	compactKeepRun     = 16
)

// compactBlock moves the leaves of keys (ascending, of the given size
// classes) into one new block, in that order.
func (t *Tree) compactBlock(ctx context.Context, keys [][]byte, classes []int) (int, error) {
	size := 0
	for _, c := range classes {
		size += classBytes(c)
	}
	s, err := t.sessionFor(ctx)
	if err != nil {
		return 0, err
	}
	mn := int(t.compactNext.Add(1)-1) % s.c.Pool().MemoryNodes()
	base, err := s.allocNear(ctx, mn, size, leafAlign)
	t.release(s)
	if err != nil {
		return 0, fmt.Errorf("smart: compact: a block of %d bytes: %w", size, wrapRemote(err))
	}
	moved, off := 0, 0
	for i, key := range keys {
		na := base.Add(uint64(off))
		off += classBytes(classes[i])
		ok, err := t.relocate(ctx, key, na, classes[i])
		if err != nil {
			// The rest of the block goes back.
			if s, serr := t.sessionFor(context.WithoutCancel(ctx)); serr == nil {
				for j := i + 1; j < len(keys); j++ {
					s.dropUnlinked(base.Add(uint64(off)), classes[j])
					off += classBytes(classes[j])
				}
				t.release(s)
			}
			return moved, wrapRemote(err)
		}
		if ok {
			moved++
		}
	}
	return moved, nil
}

// relocate moves the leaf of key to na in a session of its own (as every
// operation, so that a long Compact holds back no reclamation), restarting
// as a Put does when the tree changed under it.
func (t *Tree) relocate(ctx context.Context, key []byte, na remote.Addr, class int) (bool, error) {
	s, err := t.sessionFor(ctx)
	if err != nil {
		return false, err
	}
	defer t.release(s)
	s.enc = appendEncoded(s.enc[:0], key)
	moved, used := false, false // used: na is linked or given back
	err = s.attempt(ctx, "compact", func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := s.relocate(ctx, key, na, class)
		if err != errRestart {
			moved, used = m, true
		}
		return err
	})
	if !used {
		s.dropUnlinked(na, class)
	}
	if errors.Is(err, ErrContention) {
		err = nil // skipped
	}
	return moved, err
}

// relocate runs one attempt of moving the leaf of key (s.enc) to na, a
// leaf of class class allocated for it, and reports whether it did: not if
// the key is gone, or its value no longer fits class, or the node holding
// its slot is moving. It returns errRestart, with na unused, for another
// attempt; otherwise na is linked (moved) or given back. A move that began
// completes even if ctx is cancelled.
func (s *session) relocate(ctx context.Context, key []byte, na remote.Addr, class int) (bool, error) {
	cur, err := s.start(ctx)
	for err == nil {
		var d descent
		if d, err = s.descend(ctx, s.enc, cur); err != nil || d.out != atLeaf {
			break
		}
		var res leafLock
		var v leafView
		if res, v, cur, err = s.lockLeaf(ctx, d.cur, key, false); err != nil || res == leafOther {
			break
		}
		if res == leafMoved {
			continue
		}
		if s.t.lf.classOf(key, v.value) != class {
			err = s.unlock(context.WithoutCancel(ctx), cur.sl, v.meta)
			break
		}
		done, _, err := s.moveLeafTo(context.WithoutCancel(ctx), cur, v.meta, key, v.value, na, class)
		if err == errRestart {
			err = nil // the lock was lost meanwhile: na went back
		}
		return done, err // not done and no error: the slot was frozen, na went back
	}
	if err == errRestart {
		return false, err
	}
	s.dropUnlinked(na, class)
	return false, err
}
