package rdwc

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/dgryski/go-farm"

	"github.com/dmindex/dmindex/remote"
)

// DefaultSlots is the number of local locks of a Table whose Options.Slots is
// zero.
const DefaultSlots = 1 << 16

// ErrClosed is returned (wrapped) by operations on a closed Table and by the
// operations that were waiting when it was closed.
var ErrClosed = errors.New("rdwc: table closed")

// ErrLeaderFailed is wrapped, together with the leader's error, into the
// error a combined writer returns when the leader of its window failed after
// taking the combined value: the write may or may not have been applied.
var ErrLeaderFailed = errors.New("rdwc: leader of a combined write failed")

// errMixedNodes is the panic of a Table used by clients of two compute nodes.
var errMixedNodes = errors.New("rdwc: clients of different compute nodes used with one Table")

// Options configure a Table. The zero Options enable read delegation and
// write combining with DefaultSlots local locks.
type Options struct {
	// Slots is the number of hash-slotted local locks, rounded up to a power
	// of two (default DefaultSlots). Each costs 16 bytes. Fewer slots mean
	// more collisions between different keys; a collision never shares a
	// result, it only forgoes sharing.
	Slots int
	// DisableReads turns read delegation off: Read always runs its callback
	// on its own.
	DisableReads bool
	// DisableWrites turns write combining off: Write always runs its
	// callback on its own.
	DisableWrites bool
}

// Table is a compute node's table of local locks for read delegation and
// write combining. All clients passed to one Table must belong to one
// compute node; each client runs at most one operation on the Table at a
// time. A Table is safe for concurrent use by those clients.
//
// Memory: 16 bytes per slot (1 MiB with DefaultSlots), allocated by New, plus
// per client that has used the table about 330 bytes and buffers that grow to
// the longest key it opened a window for, the longest value combined into its
// write windows and the largest number of waiters it woke at once. Nothing is
// allocated per operation once those buffers have grown, except the copy of a
// delegated read's value that each joiner returns.
type Table struct {
	opts  Options
	slots []slot
	mask  uint64

	// clients holds the per-client state, indexed by remote.Client.ID. It is
	// copied on growth, under grow.
	clients atomic.Pointer[[]*waiter]
	grow    sync.Mutex
	cn      *remote.ComputeNode // of the clients; set under grow

	closed    atomic.Bool
	closeErr  error // set before closed
	closeOnce sync.Once
}

// slot is one local lock: the window currently open on it, if any. mu guards
// the window's shared fields and every waiter queued on the slot; it is held
// only for short, non-blocking critical sections.
type slot struct {
	mu  sync.Mutex
	win *Window
}

// New returns a Table configured by opts.
func New(opts Options) *Table {
	n := DefaultSlots
	if opts.Slots > 0 {
		n = 1 << bits.Len(uint(opts.Slots-1))
	}
	opts.Slots = n
	t := &Table{opts: opts, slots: make([]slot, n), mask: uint64(n - 1)}
	t.clients.Store(new([]*waiter))
	return t
}

// Options returns the table's options with defaults filled in.
func (t *Table) Options() Options { return t.opts }

// slot returns the local lock of key.
func (t *Table) slot(key []byte) *slot { return &t.slots[farm.Hash64(key)&t.mask] }

// waiter returns c's state, creating it on c's first operation.
func (t *Table) waiter(c *remote.Client) *waiter {
	id := c.ID()
	if ws := *t.clients.Load(); id < len(ws) && ws[id] != nil {
		return ws[id].check(c)
	}
	t.grow.Lock()
	defer t.grow.Unlock()
	ws := *t.clients.Load()
	if id < len(ws) && ws[id] != nil {
		return ws[id].check(c)
	}
	if t.cn == nil {
		t.cn = c.ComputeNode()
	} else if t.cn != c.ComputeNode() {
		panic(errMixedNodes)
	}
	n := len(ws)
	if id >= n {
		n = max(id+1, 2*n)
	}
	grown := make([]*waiter, n) // copied: readers index the published slice unlocked
	copy(grown, ws)
	w := &waiter{c: c}
	grown[id] = w
	t.clients.Store(&grown)
	return w
}

// Close wakes every operation waiting in the table; they and every later
// Read or Write return an error wrapping ErrClosed and, if non-nil, cause (an
// index passes its own closed error). Delegates and leaders running their
// callback finish normally. The writes of combined writers woken by Close
// may or may not be applied by their leader. Close is idempotent; only the
// first cause counts.
func (t *Table) Close(cause error) {
	t.closeOnce.Do(func() {
		t.closeErr = ErrClosed
		if cause != nil {
			t.closeErr = fmt.Errorf("%w: %w", ErrClosed, cause)
		}
		t.closed.Store(true)
		var wake []*remote.Client
		for i := range t.slots {
			s := &t.slots[i]
			s.mu.Lock()
			if win := s.win; win != nil {
				for _, q := range [...]*queue{&win.joined, &win.pending} {
					for w := q.pop(); w != nil; w = q.pop() {
						w.state = stClosed
						wake = append(wake, w.c)
					}
				}
			}
			s.mu.Unlock()
			for _, c := range wake {
				c.Signal()
			}
			wake = wake[:0]
		}
	})
}

// Stats returns the table's counters summed over its clients.
func (t *Table) Stats() Stats {
	var s Stats
	for _, w := range *t.clients.Load() {
		if w != nil {
			s = s.add(w.stats.snapshot())
		}
	}
	return s
}
