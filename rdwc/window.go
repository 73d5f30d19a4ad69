package rdwc

// kind is the kind of operation a window shares.
type kind uint8

const (
	kindRead kind = iota + 1
	kindWrite
)

// Window is the time window of one shared operation: a delegated read or a
// combined write. Read and Write pass it to their callback, which must not
// retain it. A window opened by a client that runs on its own (collision,
// switch off) shares nothing and its methods only return the client's own
// value.
type Window struct {
	s      *stripe // guards the slot the window is open on; nil if the client runs on its own
	slot   uint64  // the slot the window is open on
	kind   kind
	sealed bool   // no operation joins any more; guarded by s.mu
	key    []byte // copy of the owner's key (reused buffer)

	own []byte // the owner's value (a write's argument)
	val []byte // the latest combined value: own, or buf after a joiner combined
	buf []byte // the write-combining buffer (reused buffer of the owner)

	joined  queue // operations admitted to this window, in arrival order
	pending queue // operations of this key waiting for the next window
}

// Seal closes the window to new joiners. The callback calls it immediately
// before issuing the verb at which the shared operation linearizes (a
// search's leaf READ, or the READ that finds the key absent); every operation
// admitted before Seal receives that verb's result. Calling it earlier only
// shares less; calling it again has no effect. A callback that never calls
// Seal shares nothing: its joiners compete again for the next window.
func (w *Window) Seal() {
	if w.s == nil {
		return
	}
	w.s.mu.Lock()
	w.sealed = true
	w.s.mu.Unlock()
}

// Key returns the key of the window's operation (a copy, valid until the
// callback returns; it must not be modified).
func (w *Window) Key() []byte { return w.key }

// Value seals the window and returns the value to write: the value of the
// last writer admitted to the window (the leader's own if none joined). The
// leader calls it immediately before the verb that publishes the write (the
// WRITE of an in-place update, or the WRITE of a new leaf that a CAS then
// links); it may call it again and gets the same value. The slice is valid
// until the callback returns and must not be modified. On a read window
// Value seals and returns nil.
func (w *Window) Value() []byte {
	w.Seal()
	return w.val
}

// open makes win, whose key is set, the window of owner's operation on slot
// i, which s guards. The caller holds s.mu.
func (win *Window) open(s *stripe, i uint64, owner *waiter) {
	win.s, win.slot = s, i
	win.kind = owner.kind
	win.sealed = false
	win.own = owner.arg
	win.val = owner.arg
}

// solo prepares win for an operation on key that shares nothing.
func (win *Window) solo(key, arg []byte) *Window {
	win.key = append(win.key[:0], key...)
	win.s = nil
	win.kind = 0
	win.own = arg
	win.val = arg
	return win
}

// clear forgets the window's operation so that no caller slice is retained;
// the key and combining buffers are kept for reuse.
func (win *Window) clear() {
	win.s = nil
	win.key = win.key[:0]
	win.own = nil
	win.val = nil
}

// join admits w to the window. The caller holds win.s.mu and has checked that
// the window is unsealed and of w's kind.
func (win *Window) join(w *waiter) {
	w.state = stJoined
	win.joined.push(w)
	if win.kind == kindWrite {
		win.combine(w.arg)
	}
}

// combine makes v the latest combined value.
func (win *Window) combine(v []byte) {
	win.buf = append(win.buf[:0], v...)
	win.val = win.buf
}

// leave removes a waiter that gives up (its context is done) from the
// window. A writer that leaves an unsealed window takes its value out of the
// combined result: the latest remaining writer's value becomes current. The
// caller holds win.s.mu.
func (win *Window) leave(w *waiter) {
	if w.state == stQueued {
		win.pending.remove(w)
		return
	}
	wasLast := win.joined.tail == w
	win.joined.remove(w)
	if win.kind == kindWrite && !win.sealed && wasLast {
		if last := win.joined.tail; last != nil {
			win.combine(last.arg)
		} else {
			win.val = win.own
		}
	}
}
