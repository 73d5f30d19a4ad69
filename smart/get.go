package smart

import (
	"bytes"
	"context"
	"errors"

	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Get returns the value stored under key.
//
// Protocol (docs/smart-protocol.md): read the root slot, then one node per
// level, then the leaf. A torn leaf (bad checksum) is read again; a retired
// leaf (valid bit clear) sends the reader back to its slot.
func (t *Tree) Get(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	s, err := t.sessionFor(ctx)
	if err != nil {
		return nil, false, err
	}
	defer t.release(s)
	s.enc = appendEncoded(s.enc[:0], key)
	value, found, err = t.rd.Read(ctx, s.c, key, s.getFn)
	for range maxDelegateCrashes {
		// The delegate whose result this search shared was stopped by a
		// crash: search again (a read is idempotent), unless it was this
		// session's own client.
		if !errors.Is(err, remote.ErrCrashed) || s.c.Crashed() {
			break
		}
		value, found, err = t.rd.Read(ctx, s.c, key, s.getFn)
	}
	return value, found, wrapRemote(err)
}

// maxDelegateCrashes bounds the searches a Get runs again because the
// delegate it shared a read window with crashed.
const maxDelegateCrashes = 4

// getInWindow is the search of Get run by rdwc: alone, or as the delegate
// whose result the readers of its window share.
func (s *session) getInWindow(ctx context.Context, w *rdwc.Window) ([]byte, bool, error) {
	s.win, s.sealed = w, false
	var v []byte
	var found bool
	err := s.attempt(ctx, "get", func() (err error) {
		v, found, err = s.get(ctx, w.Key())
		if err == nil && s.lost() {
			err = errRestart // what it read may be reused memory (I8)
		}
		return err
	})
	return v, found, err
}

func (s *session) get(ctx context.Context, key []byte) ([]byte, bool, error) {
	cur, err := s.start(ctx)
	if err != nil {
		return nil, false, err
	}
	for {
		d, err := s.descend(ctx, s.enc, cur)
		if err != nil {
			return nil, false, err
		}
		if d.out != atLeaf {
			if !s.sealed {
				// The key is absent from a node read before the window was
				// sealed: seal and search again, so every delegated reader
				// gets a result read after it arrived.
				s.seal()
				if cur, err = s.start(ctx); err != nil {
					return nil, false, err
				}
				continue
			}
			return nil, false, nil
		}
		cur = d.cur
		s.seal()
		v, st, err := s.readLeaf(ctx, cur.sl, false)
		if err != nil {
			return nil, false, err
		}
		switch {
		case st == leafTorn && (cur.cached || s.mayBeReused(cur)):
			// Through a snapshot's slot, a leaf that reads torn may be one
			// the slot no longer names (read at the snapshot's class, not its
			// own): read the slot first.
			cur, err = s.reread(ctx, cur)
		case st == leafTorn:
			// Being written, or cut by a crash: a writer that died holding
			// the lock is recovered (I9).
			if err = s.wait(); err == nil {
				err = s.judgeLeaf(ctx, cur.sl, s.waits)
			}
		case (st == leafOK && s.stale(cur, v.rev)) || s.reused(cur, v.birth):
			cur, err = s.reread(ctx, cur)
		case st == leafOK && v.matches(key):
			return bytes.Clone(v.value), true, nil
		case st == leafOK && v.rev != cur.addr:
			// Another key's leaf that a split has moved since its slot was
			// read (possibly before the read window was sealed): the key may
			// be in the new node now. A split holds the leaf's lock until it
			// published: one whose client died is recovered (I9).
			// A move of the node holding the slot that died before pointing
			// the leaf at its new slot is finished (docs/smart-node-growth.md).
			leaf := cur.sl
			if cur, err = s.reread(ctx, cur); err == nil && cur.sl == leaf {
				var moved bool
				if moved, err = s.unfinishedMove(ctx, cur, v.rev); err == nil && !moved {
					err = s.judgeLeaf(ctx, leaf, s.waits)
				}
			}
		case st == leafOK:
			return nil, false, nil
		case s.mayBeReused(cur):
			// Retired, but possibly in another life than the one the
			// snapshot named: its content counts only if read after the
			// slot.
			cur, err = s.reread(ctx, cur)
		default:
			// Retired: the leaf is being (or was) unlinked. If its slot still
			// holds it, the removal has not happened yet and its frozen
			// content is current.
			leaf := cur.sl.addr()
			if cur, err = s.reread(ctx, cur); err == nil && cur.sl.addr() == leaf {
				if v.matches(key) {
					return bytes.Clone(v.value), true, nil
				}
				return nil, false, nil
			}
		}
		if err != nil {
			return nil, false, err
		}
	}
}
