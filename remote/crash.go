package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCrashed: the client was stopped by fault injection (Client.Crash,
// ComputeNode.Crash or Pool.InjectCrashes), or by a batch of it that may
// change remote memory and failed (Client.Crashed). The batch that crashed
// it landed a prefix of its verbs (or, if it failed, an unknown part), and
// every later call of the client fails with it.
var ErrCrashed = errors.New("remote: client crashed")

// Fault is a point at which a client stops (fail-stop, the failure model of
// docs/recovery.md): After verbs land in full, counted from the first verb
// the client posts once the fault is armed (across batches, signaled or
// not); of the next verb, a WRITE lands its first Words 8-byte words (at
// most all but the last word: a WRITE that lands in full is the fault
// After+1, Words 0) and any other verb does not happen; nothing after it
// lands. The zero Fault stops the client before its next verb.
type Fault struct {
	After int // verbs that land in full
	Words int // 8-byte words of a cut WRITE that land
}

// fault is a client's armed fault and crashed state.
type fault struct {
	armed   bool
	f       Fault
	crashed atomic.Bool
	unsure  atomic.Pointer[error] // the failure that crashed the client (nil: an injected fault, or none)
}

// Crash arms f on the client: it stops at that point of its next verbs.
// Arming again replaces a fault that has not struck. Crash is called by the
// goroutine that uses the client, or while nobody does.
func (c *Client) Crash(f Fault) {
	c.fault.armed, c.fault.f = true, f
	c.faulty.Store(true)
}

// Crashed reports whether the client is stopped for good: an injected
// fault stopped it, or a batch of it that may change remote memory (one
// holding a WRITE, CAS or FAA) failed in a way that leaves its caller not
// knowing what it changed: with an error wrapping ErrUnavailable from the
// transport (the batch may have landed in full, in part or not at all, and
// may still land later, from a memory node's buffers; or it never left, a
// write its caller needed, such as a lock's release, with it), or with the
// context's error when the context ended while the batch was in flight.
// A batch of READs alone, and a batch refused before it left because its
// context ended, do not crash the client; but any batch does that finds
// that verbs the client posted unsignaled before may have been lost with a
// broken connection. The call of the batch that crashed the client returns
// the transport's error (wrapping ErrUnavailable or the context's error),
// and every later call fails with ErrCrashed, as after an injected fault,
// wrapping that error too (so that a caller who retries on ErrUnavailable
// sees why): like a crashed client, it must be replaced, and what it may
// have left (a lock it may hold) recovered (docs/recovery.md). Safe for
// concurrent use.
func (c *Client) Crashed() bool { return c.fault.crashed.Load() }

// lostOutcome reports whether err, the error of batch ops handed to the
// transport, crashes the client: see Crashed.
func lostOutcome(ops []Op, err error) bool {
	if errors.Is(err, errPostedLost) {
		return true // unsignaled verbs of before, whatever this batch holds
	}
	switch {
	case !changes(ops, nil):
		return false
	case errors.Is(err, ErrUnavailable):
		return true
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		var ns notSentError
		return !errors.As(err, &ns)
	}
	return false
}

// crashUnsure stops the client for good because a batch that may change
// remote memory failed with cause: see Crashed.
func (c *Client) crashUnsure(cause error) {
	c.fault.unsure.CompareAndSwap(nil, &cause)
	c.faulty.Store(true)
	c.setCrashed()
}

// setCrashed enters the crashed state, counted once by the compute node.
func (c *Client) setCrashed() {
	if c.fault.crashed.CompareAndSwap(false, true) {
		c.cn.crashes.Add(1)
	}
}

// crashedError is the error of a call refused because the client crashed.
func (c *Client) crashedError() error {
	if p := c.fault.unsure.Load(); p != nil {
		return fmt.Errorf("%w: a batch that may change remote memory failed: %w", ErrCrashed, *p)
	}
	return ErrCrashed
}

// notSentError marks an error of a batch of which nothing left for a
// memory node: the transport refused it before sending any of it (a node
// known down, a dial that failed or that the context stopped waiting for).
// Its outcome is known: nothing happened; the client still crashes if the
// error is ErrUnavailable (Crashed), not if it is the context's.
type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }
func (e notSentError) Unwrap() error { return e.err }

// notSent marks err as the error of a batch of which nothing was sent.
func notSent(err error) error {
	if err == nil {
		return nil
	}
	return notSentError{err}
}

// errPostedLost is wrapped by the error of a batch refused because the
// connection that carried unsignaled verbs the client posted before broke
// since: they may be lost (or land late).
var errPostedLost = errors.New("the connection failed after unsignaled verbs were posted; they may be lost")

// errPostedLate is the cause of the crash of a client whose batch, posted
// unsignaled by a deadline (PostBy), reached a memory node after it and
// executed nothing there: a lock the client released in it is still set.
// It wraps no sentinel: ErrLate would tell callers of the crashed client
// that their own batches executed nothing, and they would check and post
// again.
var errPostedLate = errors.New("a batch posted unsignaled by a deadline reached its memory node after it and executed nothing")

// Crash arms f on the next client of the compute node that posts a verb
// (one that has no fault of its own armed): tests use it to stop an
// operation whose client is internal to an index.
func (cn *ComputeNode) Crash(f Fault) {
	cn.mu.Lock()
	cn.pending = append(cn.pending, f)
	cn.mu.Unlock()
	cn.armed.Store(true)
}

// Disarm removes the faults armed on the compute node and its clients that
// have not struck, and returns how many there were: a test that armed a
// fault before an operation learns whether the operation completed before
// reaching it. Call it while none of the node's clients is in use.
func (cn *ComputeNode) Disarm() int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	n := len(cn.pending)
	cn.pending = nil
	cn.armed.Store(false)
	for _, c := range cn.clients {
		if c.fault.armed {
			c.fault.armed = false
			n++
		}
	}
	return n
}

// InjectCrashes stops clients at random at an average of rate per second of
// the pool's clock (virtual time in the simulator), in a sequence set by
// seed: at the first batch a client posts after a crash is due, the client
// stops at a random verb of that batch, a WRITE cut at a random word. Only
// clients posting batches are hit, so a crash always lands inside an
// operation. A rate of 0 stops the injection. It returns the number of
// crashes injected so far (since the pool was created).
func (p *Pool) InjectCrashes(rate float64, seed uint64) uint64 {
	p.crash.mu.Lock()
	defer p.crash.mu.Unlock()
	p.crash.rate = rate
	if rate > 0 {
		p.crash.rng = rand.New(rand.NewPCG(seed, 0x637261736873))
		p.crash.next = p.Now() + expInterval(p.crash.rng, rate)
	}
	p.crash.on.Store(rate > 0)
	return p.crash.count.Load()
}

// Crashes returns the number of clients stopped by fault injection.
func (p *Pool) Crashes() uint64 { return p.crash.count.Load() }

// crashSchedule is the pool's random fault injection.
type crashSchedule struct {
	on    atomic.Bool
	count atomic.Uint64
	mu    sync.Mutex
	rate  float64
	rng   *rand.Rand
	next  time.Duration
}

// expInterval draws the time to the next event of a Poisson process of rate
// events per second (exponential, mean 1/rate, at least 1 ns).
func expInterval(rng *rand.Rand, rate float64) time.Duration {
	d := -math.Log(1-rng.Float64()) / rate * float64(time.Second)
	return time.Duration(max(d, 1))
}

// faulted reports whether a batch of c may be hit by a fault: c crashed, a
// fault armed on it or its compute node, or random injection (of crashes or
// stalls) on.
func (c *Client) faulted() bool {
	return c.faulty.Load() || c.cn.armed.Load() || c.pool.crash.on.Load() || c.pool.stall.on.Load()
}

// strike runs ops under c's fault state: it returns done = false if the
// batch is to execute normally, and otherwise executes the prefix that
// lands and returns ErrCrashed. The prefix is executed to completion, so
// that what a crash leaves is in memory when the call returns (the stopped
// client learns nothing of it). A stall that is due comes first; a batch
// with a deadline (DoBy, PostBy) that it makes late returns ErrLate.
func (c *Client) strike(ctx context.Context, ops []Op) (done bool, err error) {
	if c.fault.crashed.Load() {
		return true, c.crashedError()
	}
	if c.pool.stall.on.Load() && c.stallIfDue() && c.by != 0 && c.Now() > c.by {
		return true, ErrLate
	}
	if !c.fault.armed {
		c.adoptFault(len(ops))
	}
	if !c.fault.armed {
		return false, nil
	}
	if c.fault.f.After >= len(ops) {
		c.fault.f.After -= len(ops)
		return false, nil
	}
	f := c.fault.f
	c.fault.armed = false
	landed := make([]Op, f.After, f.After+1)
	copy(landed, ops[:f.After])
	if o := ops[f.After]; o.Kind == OpWrite {
		if n := cutBytes(o.Addr, len(o.Buf), f.Words); n > 0 {
			o.Buf = o.Buf[:n]
			landed = append(landed, o)
		}
	}
	c.setCrashed()
	c.pool.crash.count.Add(1)
	if len(landed) > 0 {
		if err := c.pool.t.exec(context.WithoutCancel(ctx), c, landed, true); err != nil {
			return true, errors.Join(ErrCrashed, err)
		}
		c.stats.countBatch(landed, true)
	}
	return true, ErrCrashed
}

// adoptFault arms on c a fault pending on its compute node, or a random one
// if the pool's next random crash is due, for a batch of n verbs.
func (c *Client) adoptFault(n int) {
	if cn := c.cn; cn.armed.Load() {
		cn.mu.Lock()
		if len(cn.pending) > 0 {
			c.Crash(cn.pending[0])
			cn.pending = cn.pending[1:]
			cn.armed.Store(len(cn.pending) > 0)
		}
		cn.mu.Unlock()
		if c.fault.armed {
			return
		}
	}
	s := &c.pool.crash
	if !s.on.Load() {
		return
	}
	now := c.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rate <= 0 || now < s.next {
		return
	}
	c.Crash(Fault{After: s.rng.IntN(n), Words: s.rng.IntN(8)})
	for s.next <= now {
		s.next += expInterval(s.rng, s.rate)
	}
}

// cutBytes returns how many bytes of a WRITE of n bytes at a land when it
// is cut after its first words 8-byte word boundaries (boundaries of the
// address space, strictly inside the WRITE; the last one if it has fewer).
func cutBytes(a Addr, n, words int) int {
	first := int(8 - uint64(a)%8) // the first boundary inside the WRITE
	if words <= 0 || first >= n {
		return 0
	}
	return min(first+8*(words-1), first+8*((n-1-first)/8))
}
