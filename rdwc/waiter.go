package rdwc

import "github.com/dmindex/dmindex/remote"

// state is where a client's operation stands in a slot. Every transition
// happens under the slot's mutex; a transition out of stQueued or stJoined is
// followed, after the mutex is released, by exactly one Signal to the client.
type state uint8

const (
	stIdle   state = iota
	stQueued       // in the window's pending queue, waiting for the next window
	stJoined       // admitted to the window, waiting for its outcome
	stOwner        // handed the next window: run the callback
	stServed       // the owner delivered its outcome
	stRetry        // the window ended without sharing: compete again
	stClosed       // the table was closed
	stSolo         // (returned only) the slot is busy with another key: run on your own
)

// waiter is a client's state in a Table, created on its first operation and
// reused by every later one.
type waiter struct {
	c *remote.Client

	// Guarded by the mutex of the slot the client waits on.
	next  *waiter // link in a window's joined or pending queue
	state state
	kind  kind   // the waiting operation's kind
	arg   []byte // the waiting write's value (the caller's slice)
	value []byte // the delegated read's value, a copy owned by the client
	found bool
	err   error

	win  Window           // the window the client opens as delegate or leader; its key is the operation's
	wake []*remote.Client // reused: clients to signal after a release
	busy bool             // an operation of the client is in the table

	stats counters
}

// check returns w after making sure it belongs to c: two clients with one ID
// come from different compute nodes.
func (w *waiter) check(c *remote.Client) *waiter {
	if w.c != c {
		panic(errMixedNodes)
	}
	return w
}

// begin marks the start of an operation of w's client.
func (w *waiter) begin(k kind, arg []byte) {
	if w.busy {
		panic("rdwc: client used by two operations at once (a callback called its own Table)")
	}
	w.busy = true
	w.kind, w.arg = k, arg
}

// end marks the end of the operation and forgets the caller's slices.
func (w *waiter) end() {
	w.busy = false
	w.arg, w.value, w.found, w.err = nil, nil, false, nil
	w.state = stIdle
	w.win.clear()
}

// queue is an intrusive FIFO of waiters linked through waiter.next.
type queue struct{ head, tail *waiter }

func (q *queue) push(w *waiter) {
	w.next = nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
}

func (q *queue) pop() *waiter {
	w := q.head
	if w != nil {
		q.head = w.next
		if q.head == nil {
			q.tail = nil
		}
		w.next = nil
	}
	return w
}

// remove unlinks w, which must be in q.
func (q *queue) remove(w *waiter) {
	var prev *waiter
	for p := q.head; p != w; p = p.next {
		prev = p
	}
	if prev == nil {
		q.head = w.next
	} else {
		prev.next = w.next
	}
	if q.tail == w {
		q.tail = prev
	}
	w.next = nil
}
