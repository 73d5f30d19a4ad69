package smart

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// session is the per-operation state of one goroutine: a remote client and
// scratch buffers. Sessions are taken from the tree's free list for one
// operation and returned after it, so no allocation happens per operation.
type session struct {
	t   *Tree
	c   *remote.Client
	ops []remote.Op
	// ctx is the context of the operation the session serves (sessionFor),
	// under which its upkeep runs too: registration, heartbeats (touch),
	// marking crashed clients dead (markBuried). Background between
	// operations.
	ctx context.Context

	enc     []byte // encoded key of the current operation
	enc2    []byte // encoded key of a leaf being split
	node    nodeView
	nodeBuf [nodeAllocBytes]byte
	leafBuf []byte
	img     []byte
	lockOps [2]remote.Op // lock + read of a node (locked variant)
	healOp  [1]remote.Op // repair of a parent slot's node type
	staged  []byte       // images of new structure, written in one batch
	pieces  []piece      // the WRITEs of staged
	word    [8]byte
	meta    [8]byte // a meta or lock word being written
	// The cache entry the current traversal started from.
	entry     *artcache.Entry
	entryPlen int
	entryIdx  int // the slot of entry the traversal started from
	slotWords [256]uint64
	retries   int      // re-reads in the current attempt
	waits     int      // waits for other clients' changes in the current operation
	nodeReads int      // internal nodes and slots read remotely in the current operation
	flagWaits int      // waits for other splits in the current operation
	flag      flagHold // the moving flag this session set, until it is cleared
	flags     uint64   // moving flags the session set (flagOf)
	full      []noRoom // per memory node: allocations it refused (allocNear)

	// Reclamation (reclaim.go): the client's registry member, nil without
	// Options.Reclaim, and the epoch the current operation started in.
	m     *registry.Member
	epoch uint32
	gen   uint64         // the registry's heartbeat generation at the pin (lost)
	redo  []byte         // a redo record being written (recover.go)
	watch registry.Watch // a reader's judgement of a torn leaf's writer
	// lockFrom is when others may have started to act on the leaf lock the
	// session last took: registry.Member.LockedAt of the time its CAS was
	// posted, or the time of the CAS that renewed it (holding).
	lockFrom time.Duration
	// lockBits are the bits the leaf lock word holds besides the session's
	// tag: repairBit while the session repairs a leaf it took over
	// (recover.go), 0 for a lock it took itself.
	lockBits uint64
	// nodeLock is the word of the node lock the session holds in the
	// locked-internal variant (nil: none), nodeFrom when others may have
	// started to act on it (as lockFrom) and nodeTag the tag it was taken
	// with (locked.go).
	nodeLock remote.Addr
	nodeFrom time.Duration
	nodeTag  uint64

	// The current scan, whose buffers are kept between scans
	// (scanner.keep).
	scan scanner
	// scanHint is how many pairs the session's last scan not told its
	// length yielded before its caller stopped it (0: none yet): the next
	// such scan expects as many (scanner.expect).
	scanHint int
	// scanPairs is what the session's scans learned of the pairs below a
	// node of each type (pairEstimate).
	scanPairs pairEstimate

	// The current operation's RDWC window, consulted deep in its path: a
	// search seals it right before the verb it linearizes at, a write takes
	// the combined value right before the verb that publishes it.
	win    *rdwc.Window
	sealed bool // seal was called in the current read window
	// The RDWC callbacks (getInWindow, putInWindow) as method values, bound
	// once per session so that an operation allocates no closure.
	getFn func(context.Context, *rdwc.Window) ([]byte, bool, error)
	putFn func(context.Context, *rdwc.Window) error
}

// maxLocalRetries bounds the re-reads of slots found changed (a stale
// snapshot, a leaf moved or unlinked) in one attempt before the operation
// restarts from the root. Re-reads that find nothing changed are waits.
const maxLocalRetries = 32

// maxLockAttempts bounds the attempts to take one leaf lock, and the waits
// of one operation (session.wait), before the operation fails with
// ErrContention. In real time nearly every attempt sleeps
// remote.Client.Backoff's longest step, 100 µs, which asks for 1.6 s in
// all; what it takes is what the system's sleeps take: on the 2-core
// development VM a 100 µs sleep lasts 1.1 ms, and a Put on a leaf whose
// live holder never releases it failed after 18.5 s on the local
// transport and 14.9 s over tcp (20 to 26 s in a user's run of 8 writers
// over tcp). That is longer than a lease, so a holder whose compute node
// fell silent is judged dead and its lock taken over within the wait
// (after about Options.Lease), and a holder of this compute node whose
// batch failed is judged dead at once (recover.go, replace).
const maxLockAttempts = 1 << 14

// errRestart makes an operation restart from the root.
var errRestart = fmt.Errorf("smart: restart")

// session is sessionFor of an operation without a context (Open).
func (t *Tree) session() (*session, error) { return t.sessionFor(context.Background()) }

// sessionFor takes a session for one operation, whose context is ctx, and
// charges the simulator's client CPU time of an operation to it.
func (t *Tree) sessionFor(ctx context.Context) (*session, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if n := t.cn.Crashes(); n != t.crashesSeen.Load() {
		t.replaceIdle(ctx, n)
	}
	var s *session
	t.mu.Lock()
	if n := len(t.free); n > 0 {
		s = t.free[n-1]
		t.free = t.free[:n-1]
		t.mu.Unlock()
		s.c.ChargeOp()
	} else {
		t.mu.Unlock()
		s = t.newSession()
	}
	s.ctx = ctx
	if err := s.begin(); err != nil {
		t.release(s)
		return nil, err
	}
	return s, nil
}

func (t *Tree) newSession() *session {
	s := &session{t: t, c: t.cn.NewClient(), leafBuf: make([]byte, 256), ctx: context.Background()}
	s.getFn, s.putFn = s.getInWindow, s.putInWindow
	s.c.ChargeOp()
	return s
}

// seal closes the current read window to new joiners: called right before
// the verb whose result the search returns.
func (s *session) seal() {
	s.sealed = true
	s.win.Seal()
}

// value returns the value to publish: the latest combined value, read right
// before the verb that publishes it.
func (s *session) value() []byte { return s.win.Value() }

func (t *Tree) release(s *session) {
	s.end()
	if s.c.Crashed() {
		t.replace(s)
		return
	}
	s.ctx = context.Background()
	s.win, s.entry, s.flagWaits, s.waits, s.watch, s.nodeLock = nil, nil, 0, 0, registry.Watch{}, 0
	t.mu.Lock()
	t.free = append(t.free, s)
	t.mu.Unlock()
}

// retry counts one re-read; past the local budget the operation restarts.
func (s *session) retry() error {
	s.retries++
	if s.retries > maxLocalRetries {
		return errRestart
	}
	return nil
}

// wait counts one wait of the operation for another client's change in
// progress on what it needs to read: a leaf torn by a WRITE still landing,
// a slot that still holds a leaf or node its holder is unlinking, moving or
// splitting. Unlike a retry (a re-read that finds something new), a wait
// re-reads the same thing, so it backs off: the first wait of an operation
// re-reads at once (over RDMA the change lands within a round trip), later
// ones wait remote.Client.Backoff, as a lock waiter does. In real time a
// holder preempted in the middle of its change keeps it in progress for as
// long as the machine is loaded, so waits are bounded like lock attempts
// (maxLockAttempts, seconds) rather than by the retry budget, and a
// holder that died is judged by the caller meanwhile (judgeLeaf,
// recoverHeld) and recovered.
func (s *session) wait() error {
	s.waits++
	if s.waits > maxLockAttempts {
		return fmt.Errorf("%w: waited %d times for another client's change to land", ErrContention, maxLockAttempts)
	}
	if s.waits > 1 {
		s.c.Backoff(s.waits - 2)
	}
	s.touch()
	return nil
}

// attempt runs fn until it does not ask for a restart, at most RetryBudget
// times. what names the operation in the error.
func (s *session) attempt(ctx context.Context, what string, fn func() error) error {
	var last error
	s.nodeReads = 0
	for range s.t.retryBudget {
		s.retries = 0
		err := fn()
		if err != errRestart {
			s.countLookup()
			return err
		}
		last = err
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.lost() {
			if err := s.renew(); err != nil {
				return err
			}
		}
		runtime.Gosched()
	}
	return fmt.Errorf("%w: %s restarted %d times (%v)", ErrContention, what, s.t.retryBudget, last)
}

// countLookup counts a point operation that ended in the cache statistics:
// a hit if it read no internal node.
func (s *session) countLookup() {
	if s.t.opts.CacheBytes < 0 {
		return
	}
	s.t.cstats.lookups.Add(1)
	if s.nodeReads == 0 {
		s.t.cstats.hits.Add(1)
	}
}

// batch returns the session's op slice, emptied.
func (s *session) batch() []remote.Op { return s.ops[:0] }

// do executes ops as one round trip and keeps the slice for reuse.
func (s *session) do(ctx context.Context, ops []remote.Op) error {
	s.ops = ops
	s.touchIn(ctx)
	return s.c.Do(ctx, ops)
}

// doBy is do with a deadline (remote.Client.DoBy), or without one if by is
// 0.
func (s *session) doBy(ctx context.Context, ops []remote.Op, by time.Duration) error {
	if by == 0 {
		return s.do(ctx, ops)
	}
	s.ops = ops
	s.touchIn(ctx)
	return s.c.DoBy(ctx, ops, by)
}

// readWord reads one 8-byte word.
func (s *session) readWord(ctx context.Context, a remote.Addr) (uint64, error) {
	s.nodeReads++
	s.touchIn(ctx)
	if err := s.c.Read(ctx, a, s.word[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(s.word[:]), nil
}

// readLeaf reads the leaf sl points to into the session's leaf buffer.
func (s *session) readLeaf(ctx context.Context, sl slot, lock bool) (leafView, leafState, error) {
	n := leafReadBytes(sl.leafClass())
	if lock {
		n = classBytes(sl.leafClass())
	}
	s.leafBuf = grow(s.leafBuf, n)
	s.touchIn(ctx)
	if err := s.c.Read(ctx, sl.addr(), s.leafBuf); err != nil {
		return leafView{}, 0, err
	}
	v, st := s.t.lf.parse(s.leafBuf, sl.leafClass())
	return v, st, nil
}

// lockTag is the value a client writes into a lock word it holds: its
// registry tag, which names the client and its incarnation to a waiter that
// judges whether the holder is alive (recover.go).
func (s *session) lockTag() uint64 { return s.m.Tag() }

func putWord(b []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(b, v)
}
