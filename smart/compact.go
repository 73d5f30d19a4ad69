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
// small pairs, stop binding them. Leaves inserted or moved later (new keys,
// values that outgrow their leaf) are placed as before, so a tree under
// inserts needs Compact again now and then. The values stay as they are:
// each leaf moves as an update that outgrows its leaf does (moveLeaf: under
// its lock, the new leaf written and the old one marked before the slot CAS
// that links the new one), so Compact runs beside every other operation of
// any compute node and a reader sees the old leaf or the new one, both
// holding the current value. A leaf that its key's writers move meanwhile
// or that holds another key by then is skipped, its place in the block
// left unused.
//
// Each moved leaf's old memory is retired as an outgrown leaf's is: reused
// with Options.Reclaim, leaked without it, so that Compact without Reclaim
// grows the memory nodes' use by the size of the leaves it moves. It costs
// about three round trips per leaf (lock and read, publish, retire) besides
// the scan that finds the keys.
func (t *Tree) Compact(ctx context.Context, lo, hi []byte) (int, error) {
	moved := 0
	var keys [][]byte
	var classes []int
	for {
		keys, classes = keys[:0], classes[:0]
		size, full := 0, false
		for kv, err := range t.ScanLimit(ctx, lo, hi, compactBlockLeaves) {
			if err != nil {
				return moved, err
			}
			c := classFor(leafPayload(len(kv.Key), len(kv.Value)))
			if size+classBytes(c) > compactBlockBytes && len(keys) > 0 {
				full = true
				break
			}
			keys = append(keys, kv.Key)
			classes = append(classes, c)
			size += classBytes(c)
		}
		if len(keys) == 0 {
			return moved, nil
		}
		n, err := t.compactBlock(ctx, keys, classes, size)
		moved += n
		if err != nil {
			return moved, err
		}
		if !full && len(keys) < compactBlockLeaves {
			return moved, nil
		}
		lo = append(bytes.Clone(keys[len(keys)-1]), 0) // the least key after the block's last
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return moved, nil
		}
	}
}

// A block of Compact holds at most compactBlockLeaves leaves and
// compactBlockBytes bytes (a READ of a whole block stays far below a scan
// round's 64 KB).
const (
	compactBlockBytes  = 16 << 10
	compactBlockLeaves = 256
)

// compactBlock moves the leaves of keys (ascending, of the given size
// classes, size bytes in all) into one new block, in that order.
func (t *Tree) compactBlock(ctx context.Context, keys [][]byte, classes []int, size int) (int, error) {
	s, err := t.session()
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
			if s, serr := t.session(); serr == nil {
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
	s, err := t.session()
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
		if classFor(leafPayload(len(key), len(v.value))) != class {
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
