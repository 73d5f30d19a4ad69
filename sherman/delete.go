package sherman

import (
	"context"
	"errors"
)

// Delete removes key and reports whether it was present. It frees the
// key's leaf slot in place (one entry WRITE coalesced with the unlock);
// pages are never merged or freed, and free slots are reused by later
// inserts into the same leaf.
func (t *Tree) Delete(ctx context.Context, key []byte) (_ bool, err error) {
	defer func() { err = closedError(err) }()
	if err := t.checkKey(key); err != nil {
		return false, err
	}
	s, err := t.session(ctx)
	if err != nil {
		return false, err
	}
	defer t.release(s)
	for {
		found, err := s.delete(ctx, key)
		if !errors.Is(err, ErrLeaseLost) {
			return found, err
		}
		// Nothing was written: start again (as Put does).
		if rerr := s.retry("lock lost while the compute node was silent", 0); rerr != nil {
			return false, errors.Join(err, rerr)
		}
	}
}

// delete is one attempt of Delete.
func (s *session) delete(ctx context.Context, key []byte) (bool, error) {
	l, err := s.lockLeaf(ctx, key)
	if err != nil {
		return false, err
	}
	slot, _ := l.p.findLeaf(key)
	if slot < 0 {
		return false, s.unlock(ctx, l.h)
	}
	g := &s.t.g
	e := s.buf[1][:g.leafEntry]
	g.putEntry(e, l.p.version(), nil, nil)
	if err := s.unlock(ctx, l.h, s.pageWrite(l.addr, g.entryOffset(slot), e)...); err != nil {
		return false, err
	}
	return true, nil
}
