package sherman

import (
	"context"
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
	s, err := t.session()
	if err != nil {
		return false, err
	}
	defer t.release(s)
	l, err := s.lockLeaf(ctx, key)
	if err != nil {
		return false, err
	}
	slot, _ := l.p.findLeaf(key)
	if slot < 0 {
		return false, s.unlock(ctx, l.h)
	}
	g := &t.g
	e := s.buf[1][:g.leafEntry]
	g.putEntry(e, l.p.version(), nil, nil)
	if err := s.unlock(ctx, l.h, s.pageWrite(l.addr, g.entryOffset(slot), e)...); err != nil {
		return false, err
	}
	return true, nil
}
