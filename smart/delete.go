package smart

import (
	"context"

	"github.com/dmindex/dmindex/remote"
)

// Delete removes key and reports whether it was present.
//
// The leaf is locked (with a read in the same round trip), its slot is
// replaced by a tombstone that keeps the partial key (so slots never become
// empty again), and the leaf is retired (valid bit clear, lock retired for
// good) before Delete returns. Nodes are not merged: a node left with one
// child is still a valid, sound node, only less compact.
func (t *Tree) Delete(ctx context.Context, key []byte) (found bool, err error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	s, err := t.sessionFor(ctx)
	if err != nil {
		return false, err
	}
	defer t.release(s)
	s.enc = appendEncoded(s.enc[:0], key)
	err = s.attempt(ctx, "delete", func() error {
		found, err = s.delete(ctx, key)
		return err
	})
	return found, wrapRemote(err)
}

func (s *session) delete(ctx context.Context, key []byte) (bool, error) {
	cur, err := s.start(ctx)
	if err != nil {
		return false, err
	}
	for {
		d, err := s.descend(ctx, s.enc, cur)
		if err != nil || d.out != atLeaf {
			return false, err
		}
		var done, found bool
		done, found, cur, err = s.deleteLocked(ctx, d.cur, key)
		if err != nil || done {
			return found, err
		}
	}
}

// deleteLocked deletes under the leaf's lock.
func (s *session) deleteLocked(ctx context.Context, cur cursor, key []byte) (done, found bool, next cursor, err error) {
	res, v, cur, err := s.lockLeaf(ctx, cur, key, false)
	switch {
	case err != nil || res == leafMoved:
		return false, false, cur, err
	case res == leafOther:
		return true, false, cur, nil
	}
	// The leaf is ours: complete even if ctx is cancelled. Every batch under
	// the lock is checked and posted by doUnder (linkUnder).
	//  1. W(L.meta without valid): I6, marked before it is unlinked.
	//  2. CAS(slot: L → tombstone): the linearization point; the tombstone
	//     keeps the partial key (I1, I2).
	//  3. W(L.lock = RETIRED) before returning (I4, I5).
	ctx = context.WithoutCancel(ctx)
	leaf := cur.sl
	ops, err := s.linkUnder(ctx, leafLockAddr(leaf), s.markRemoved(s.batch(), leaf, v.meta), remote.CAS(cur.addr, uint64(cur.sl), uint64(tombstone(cur.sl.partial()))))
	if err != nil {
		return false, false, cur, err
	}
	if got := slot(ops[len(ops)-1].Old); got != cur.sl {
		if got == cur.sl|slotFrozen {
			// The node holding the slot is moving: undo and start again.
			return false, false, cur.with(got), s.unlock(ctx, leaf, v.meta)
		}
		return false, false, cur, lockedSlotChanged(cur, got)
	}
	return true, true, cur, s.retire(ctx, leaf)
}
