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
// Memory: 64 bytes per lock stripe (at most stripeCount of them, 16 KiB),
// allocated by New, and nothing per slot without an open window, plus per
// client that has used the table about 330 bytes and buffers that grow to
// the longest key it opened a window for, the longest value combined into its
// write windows and the largest number of waiters it woke at once. Nothing is
// allocated per operation once those buffers have grown, except the copy of a
// delegated read's value that each joiner returns.
type Table struct {
	opts    Options
	stripes []stripe
	mask    uint64 // slots - 1

	// clients holds the per-client state, indexed by remote.Client.ID. It is
	// copied on growth, under grow.
	clients atomic.Pointer[[]*waiter]
	grow    sync.Mutex
	cn      *remote.ComputeNode // of the clients; set under grow

	closed    atomic.Bool
	closeErr  error // set before closed
	closeOnce sync.Once
}

// stripeCount is the number of mutexes guarding a table's slots (fewer if
// the table has fewer slots): slot i is guarded by stripe i mod the number of
// stripes. A slot costs nothing while no window is open on it, so the locks
// of a table with many slots fit in a few kilobytes, which stay in the
// processor's cache where a table of a lock per slot would miss it on every
// operation.
const stripeCount = 256

// stripe guards some of the table's slots and holds the windows open on
// them, at most one per slot. mu guards the list, those windows' shared
// fields and every waiter queued on them; it is held only for short,
// non-blocking critical sections.
type stripe struct {
	mu   sync.Mutex
	open []*Window
	_    [32]byte // a cache line per stripe
}

// window returns the window open on slot i, or nil. The caller holds s.mu.
func (s *stripe) window(i uint64) *Window {
	for _, win := range s.open {
		if win.slot == i {
			return win
		}
	}
	return nil
}

// replace puts win in the place of old, which is open on the same slot. The
// caller holds s.mu.
func (s *stripe) replace(old, win *Window) {
	for j, o := range s.open {
		if o == old {
			s.open[j] = win
			return
		}
	}
}

// remove takes the open window win out of the list. The caller holds s.mu.
func (s *stripe) remove(win *Window) {
	n := len(s.open) - 1
	for j, o := range s.open {
		if o == win {
			s.open[j] = s.open[n]
			s.open[n] = nil
			s.open = s.open[:n]
			return
		}
	}
}

// New returns a Table configured by opts.
func New(opts Options) *Table {
	n := DefaultSlots
	if opts.Slots > 0 {
		n = 1 << bits.Len(uint(opts.Slots-1))
	}
	opts.Slots = n
	t := &Table{opts: opts, stripes: make([]stripe, min(n, stripeCount)), mask: uint64(n - 1)}
	t.clients.Store(new([]*waiter))
	return t
}

// Options returns the table's options with defaults filled in.
func (t *Table) Options() Options { return t.opts }

// slot returns the local lock of key: its slot and the stripe guarding it.
func (t *Table) slot(key []byte) (*stripe, uint64) {
	i := farm.Hash64(key) & t.mask
	return &t.stripes[i%uint64(len(t.stripes))], i
}

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
		for i := range t.stripes {
			s := &t.stripes[i]
			s.mu.Lock()
			for _, win := range s.open {
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
