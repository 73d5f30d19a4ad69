package smart

import (
	"context"
	"fmt"

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
	s, err := t.session()
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
	for attempt := 0; ; attempt++ {
		v, st, lockOld, err := s.lockAndRead(ctx, cur.sl)
		if err != nil {
			return false, false, cur, err
		}
		locked := lockOld == 0
		switch {
		case st == leafRetired || lockOld == lockRetired || (st == leafOK && s.stale(cur, v.rev)):
			if locked {
				s.unlockAsync(ctx, cur.sl)
			}
			cur, err = s.reread(ctx, cur)
			return false, false, cur, err
		case st == leafTorn:
			if locked {
				s.unlockAsync(ctx, cur.sl)
			}
			if err := s.retry(); err != nil {
				return false, false, cur, err
			}
			continue
		case !v.matches(key):
			if locked {
				s.unlockAsync(ctx, cur.sl)
			}
			return true, false, cur, nil
		case !locked:
			if attempt >= maxLockAttempts {
				return false, false, cur, fmt.Errorf("%w: leaf lock at %v held by %#x for %d attempts", ErrContention, cur.sl.addr(), lockOld, attempt)
			}
			s.c.Backoff(attempt)
			continue
		}
		// The leaf is ours: complete even if ctx is cancelled. Its valid bit
		// is cleared before the slot CAS (see moveLeaf).
		ctx := context.WithoutCancel(ctx)
		leaf := cur.sl
		ops := s.markRemoved(s.batch(), leaf, v.meta)
		for {
			ops, err = s.link(ctx, ops, remote.CAS(cur.addr, uint64(cur.sl), uint64(tombstone(cur.sl.partial()))))
			if err != nil {
				return false, false, cur, err
			}
			if old := slot(ops[len(ops)-1].Old); old == cur.sl {
				return true, true, cur, s.retire(ctx, leaf)
			} else if cur, err = s.relocate(ctx, cur.with(old), leaf); err != nil {
				// A leaf split moved the locked leaf deeper and it cannot be
				// found: give it back.
				if uerr := s.unlock(ctx, leaf, v.meta); uerr != nil {
					return false, false, cur, uerr
				}
				return false, false, cur, err
			}
			ops = s.batch()
		}
	}
}
