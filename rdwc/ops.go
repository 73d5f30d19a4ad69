package rdwc

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dmindex/dmindex/remote"
)

// Read runs the search for key through the table and returns its outcome.
//
// If no window is open on key's slot, c becomes the delegate: read runs with
// c's window and its outcome is returned as is. If a read window of key is
// open and unsealed, c joins it, waits and returns a copy of the delegate's
// value (owned by the caller), its found flag and its error. If a write window
// of key, or a sealed read window, is open, c waits for it to end and
// competes for the next window. If the slot is busy with another key, or read
// delegation is disabled, read runs with a window of its own that shares
// nothing.
//
// read gets ctx back (so that an index can pass a method value built once
// instead of a closure per call; Window.Key gives the key) and must call
// Window.Seal immediately before the verb at which the search linearizes. If the delegate's read fails because the delegate's own
// context is done, or returns without sealing, its joiners compete again
// instead of receiving its outcome. While waiting, c returns ctx.Err() if ctx
// is done first, and remote.ErrClosed if the pool is closed.
func (t *Table) Read(ctx context.Context, c *remote.Client, key []byte,
	read func(ctx context.Context, w *Window) (value []byte, found bool, err error)) (value []byte, found bool, err error) {
	w := t.waiter(c)
	w.stats.reads.Add(1)
	w.begin(kindRead, nil)
	defer w.end()
	if t.closed.Load() {
		return nil, false, t.closeErr
	}
	if t.opts.DisableReads {
		return read(ctx, w.win.solo(key, nil))
	}
	for {
		st, err := t.enter(ctx, w, key)
		if err != nil {
			return nil, false, err
		}
		switch st {
		case stOwner:
			return t.delegate(ctx, w, read)
		case stServed:
			w.stats.delegated.Add(1)
			return w.value, w.found, w.err
		case stRetry:
			w.stats.retried.Add(1)
		case stSolo:
			return read(ctx, w.win.solo(key, nil))
		}
	}
}

// Write runs the write of value under key through the table and returns its
// outcome.
//
// If no window is open on key's slot, c becomes the leader: write runs with
// c's window, whose Value is the latest value combined into it. If a write
// window of key is open and unsealed, c copies value into its combining
// buffer, waits, and returns the leader's error (wrapped with
// ErrLeaderFailed if non-nil). If a read window of key, or a sealed write
// window, is open, c waits for it to end and competes for the next window. If
// the slot is busy with another key, or write combining is disabled, write
// runs with a window of its own whose Value is value.
//
// write gets ctx back, as read does for Read, and must obtain the
// value to publish with Window.Value immediately before the verb that
// publishes it. If the leader returns without calling Value,
// its joiners compete again. While waiting, c returns ctx.Err() if ctx is
// done first, and remote.ErrClosed if the pool is closed; a writer that gives
// up after its leader took the combined value may or may not be applied,
// one that gives up before is not applied by that leader.
func (t *Table) Write(ctx context.Context, c *remote.Client, key, value []byte,
	write func(ctx context.Context, w *Window) error) error {
	w := t.waiter(c)
	w.stats.writes.Add(1)
	w.begin(kindWrite, value)
	defer w.end()
	if t.closed.Load() {
		return t.closeErr
	}
	if t.opts.DisableWrites {
		return write(ctx, w.win.solo(key, value))
	}
	for {
		st, err := t.enter(ctx, w, key)
		if err != nil {
			return err
		}
		switch st {
		case stOwner:
			return t.lead(ctx, w, write)
		case stServed:
			w.stats.combined.Add(1)
			return w.err
		case stRetry:
			w.stats.retried.Add(1)
		case stSolo:
			return write(ctx, w.win.solo(key, value))
		}
	}
}

// delegate runs read as the delegate of w's window and shares its outcome.
func (t *Table) delegate(ctx context.Context, w *waiter,
	read func(context.Context, *Window) ([]byte, bool, error)) (value []byte, found bool, err error) {
	done := false
	defer func() {
		if !done { // read panicked: let the joiners compete again
			t.release(w, nil, false, nil, false)
		}
	}()
	value, found, err = read(ctx, &w.win)
	done = true
	// An error of the delegate's own context says nothing about the key.
	own := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	t.release(w, value, found, err, !own)
	return value, found, err
}

// lead runs write as the leader of w's window and shares its outcome.
func (t *Table) lead(ctx context.Context, w *waiter, write func(context.Context, *Window) error) (err error) {
	done := false
	defer func() {
		if !done { // write panicked: let the joiners compete again
			t.release(w, nil, false, nil, false)
		}
	}()
	err = write(ctx, &w.win)
	done = true
	t.release(w, nil, false, err, true)
	return err
}

// enter takes w's operation on key to its slot: it opens a window (stOwner),
// finds the slot busy with another key (stSolo), or waits in the slot's
// window and returns how the wait ended. The key is copied into w's window,
// so that the caller's slice is never retained.
func (t *Table) enter(ctx context.Context, w *waiter, key []byte) (state, error) {
	w.win.key = append(w.win.key[:0], key...)
	s, i := t.slot(key)
	s.mu.Lock()
	if t.closed.Load() {
		s.mu.Unlock()
		return stClosed, t.closeErr
	}
	win := s.window(i)
	if win == nil {
		w.win.open(s, i, w)
		s.open = append(s.open, &w.win)
		s.mu.Unlock()
		return stOwner, nil
	}
	if !bytes.Equal(win.key, key) {
		s.mu.Unlock()
		w.stats.collisions.Add(1)
		return stSolo, nil
	}
	if win.kind == w.kind && !win.sealed {
		win.join(w)
	} else {
		w.state = stQueued
		win.pending.push(w)
		w.stats.queued.Add(1)
	}
	s.mu.Unlock()
	return t.await(ctx, w, s, i)
}

// await parks w's client, queued on slot i, which s guards, until its
// operation leaves stQueued and stJoined, or until its wait fails (ctx done,
// pool closed) first; then the operation leaves the window and await returns
// the wait's error. It consumes exactly the one Signal that accompanies the
// transition.
func (t *Table) await(ctx context.Context, w *waiter, s *stripe, i uint64) (state, error) {
	for {
		err := w.c.Wait(ctx)
		s.mu.Lock()
		st := w.state
		if st == stQueued || st == stJoined {
			if err == nil { // a permit that was not ours
				s.mu.Unlock()
				continue
			}
			s.window(i).leave(w)
			w.state = stIdle
			s.mu.Unlock()
			return stIdle, err
		}
		s.mu.Unlock()
		if err != nil {
			// The transition's Signal follows the mutex release at once.
			_ = w.c.Wait(context.Background())
			switch st {
			case stOwner: // give the window up unshared
				t.release(w, nil, false, nil, false)
				return stIdle, err
			case stRetry:
				return stIdle, err
			}
		}
		if st == stClosed {
			return st, t.closeErr
		}
		return st, nil
	}
}

// release ends w's window. If share and the window was sealed, the joined
// operations receive the outcome (value, found, err); otherwise they compete
// again. The oldest pending operation opens the next window, and the pending
// operations of its kind join it at once; the others stay pending. Every
// operation whose state changed is signalled after the mutex is released.
func (t *Table) release(w *waiter, value []byte, found bool, err error, share bool) {
	win := &w.win
	s := win.s
	wake := w.wake[:0]
	s.mu.Lock()
	share = share && win.sealed
	if share && err != nil && win.kind == kindWrite {
		err = fmt.Errorf("%w: %w", ErrLeaderFailed, err)
	}
	for j := win.joined.pop(); j != nil; j = win.joined.pop() {
		j.state = stRetry
		if share {
			j.state, j.err = stServed, err
			if win.kind == kindRead {
				j.value, j.found = bytes.Clone(value), found
			}
		}
		wake = append(wake, j.c)
	}
	if next := win.pending.pop(); next != nil {
		nw := &next.win
		nw.open(s, win.slot, next)
		next.state = stOwner
		for q := win.pending.pop(); q != nil; q = win.pending.pop() {
			if q.kind == nw.kind {
				nw.join(q)
			} else {
				nw.pending.push(q)
			}
		}
		s.replace(win, nw)
		wake = append(wake, next.c)
	} else {
		s.remove(win)
	}
	win.clear()
	s.mu.Unlock()
	for i, c := range wake {
		c.Signal()
		wake[i] = nil
	}
	w.wake = wake[:0]
}
