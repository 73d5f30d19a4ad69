package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Client issues verbs on behalf of one goroutine at a time, like one queue
// pair per memory node. It owns its statistics, a bump allocator per memory
// node and one wait/signal permit.
type Client struct {
	cn    *ComputeNode
	pool  *Pool
	id    int
	stats counters
	one   [1]Op

	chunks []chunk // bump allocation state per memory node
	rr     int     // next memory node for round-robin allocation

	permit chan struct{} // real-time transports: the wait/signal permit
	sim    *simClient    // simulator state
	net    *netClient    // network transports' state
	fab    *fabricClient // fabric transport's state

	faulty atomic.Bool // a fault is armed or struck (crash.go)
	fault  fault

	by time.Duration // the deadline of the batch being executed (runBy; 0: none)
}

type chunk struct{ cur, end uint64 }

// ID returns the client's index in its compute node.
func (c *Client) ID() int { return c.id }

// ComputeNode returns the client's compute node.
func (c *Client) ComputeNode() *ComputeNode { return c.cn }

// Pool returns the client's pool.
func (c *Client) Pool() *Pool { return c.pool }

// Stats returns a snapshot of the client's I/O.
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// Read reads len(buf) bytes at a into buf in one round trip.
func (c *Client) Read(ctx context.Context, a Addr, buf []byte) error {
	c.one[0] = Read(a, buf)
	return c.Do(ctx, c.one[:])
}

// Write writes data at a in one round trip.
func (c *Client) Write(ctx context.Context, a Addr, data []byte) error {
	c.one[0] = Write(a, data)
	return c.Do(ctx, c.one[:])
}

// CAS compares the 8-byte word at a with compare and, if equal, replaces it
// with swap. It returns the old value: the CAS swapped iff old == compare.
func (c *Client) CAS(ctx context.Context, a Addr, compare, swap uint64) (old uint64, err error) {
	c.one[0] = CAS(a, compare, swap)
	err = c.Do(ctx, c.one[:])
	return c.one[0].Old, err
}

// FAA adds delta to the 8-byte word at a and returns its old value.
func (c *Client) FAA(ctx context.Context, a Addr, delta uint64) (old uint64, err error) {
	c.one[0] = FAA(a, delta)
	err = c.Do(ctx, c.one[:])
	return c.one[0].Old, err
}

// Do executes ops as one doorbell batch: one round trip. Verbs to the same
// memory node execute in posting order; verbs to different memory nodes
// proceed in parallel. On return READ buffers are filled and Old is set. If
// any verb is invalid, nothing is executed and the error names the verb.
// A context that ends first ends the call with its error (the local, shm
// and simulated transports run a batch at once): over tcp at once, over
// fabric at its deadline or within about 20 ms of its cancellation. A
// batch that writes and is cut in flight may still land: its client
// crashes (Crashed).
func (c *Client) Do(ctx context.Context, ops []Op) error { return c.run(ctx, ops, true) }

// DoBy is Do for a batch that must leave by time by on the client's clock
// (Now): a write under a lease, which others may act against once it has
// run out. If the batch would leave later, nothing of it is executed and
// DoBy returns ErrLate. The simulator checks at the batch's virtual posting
// instant, after any wait for its turn to run (a goroutine not started by
// Pool.Go queues for it while virtual time moves on); local and shm check
// once the batch holds the memory it changes, so that it then lands whole
// before any later batch that changes the same memory in the process;
// fabric checks right before it hands the batch to the network, which
// leaves the time the verbs take to leave the machine; tcp checks there
// too, and each memory node checks again, on its own clock, when its part
// arrives (the deadline converted at the connection's handshake, early
// by up to its round trip, on connections that read the node's clock
// within 5 ms; a deadline more than a day ahead is none), so that a batch
// held up on the way, by a stopped process or the network, does not run
// late. If some memory nodes of a batch changed memory with their part
// and another refused its part as late, the outcome is neither: DoBy
// fails with ErrUnavailable, and the client crashes (Crashed).
func (c *Client) DoBy(ctx context.Context, ops []Op, by time.Duration) error {
	return c.runBy(ctx, ops, by, true)
}

// Post posts ops unsignaled: the client does not wait for completion and
// the results (Old, READ contents) are not delivered. Verbs still execute in
// posting order per memory node, after every verb the client posted before.
// Use it only where the protocol does not depend on the outcome.
func (c *Client) Post(ctx context.Context, ops []Op) error { return c.run(ctx, ops, false) }

// PostBy is Post for a batch that must leave by time by on the client's
// clock, as DoBy: if it would leave later, nothing of it is executed and
// PostBy returns ErrLate. Over tcp the memory node checks the deadline
// again, as for DoBy; a batch that reaches it late executes nothing
// there, and since PostBy has returned, the client crashes (Crashed):
// the trees then take its locks over as a crashed client's, so that a
// release that never landed does not keep a lock set for ever.
func (c *Client) PostBy(ctx context.Context, ops []Op, by time.Duration) error {
	return c.runBy(ctx, ops, by, false)
}

// run executes ops, signaled (Do) or not (Post).
func (c *Client) run(ctx context.Context, ops []Op, signaled bool) error {
	if err := c.check(ctx, ops); err != nil || len(ops) == 0 {
		return err
	}
	if c.faulted() {
		if done, err := c.strike(ctx, ops); done {
			return err
		}
	}
	if err := c.pool.t.exec(ctx, c, ops, signaled); err != nil {
		if lostOutcome(ops, err) {
			c.crashUnsure(err)
		}
		return err
	}
	c.stats.countBatch(ops, signaled)
	return nil
}

// runBy is run for a batch that must leave by time by (DoBy, PostBy).
func (c *Client) runBy(ctx context.Context, ops []Op, by time.Duration, signaled bool) error {
	if c.Now() > by {
		return ErrLate
	}
	c.by = by
	defer func() { c.by = 0 }()
	return c.run(ctx, ops, signaled)
}

// ChargeOp charges the client CPU time of one index operation: the
// simulator's Profile.CPUPerOp in virtual time, nothing on the transports
// that run in real time (where that CPU time is spent for real). Index code
// calls it once per operation.
func (c *Client) ChargeOp() {
	if c.pool.opCPU > 0 {
		c.pool.t.compute(c, c.pool.opCPU)
	}
}

// Backoff waits before retry number attempt (from 0) of an action that
// waits for another client: a held lock, a record being written. In the
// simulator the wait is virtual time, doubling from 100 ns up to 6.4 µs. In
// real time the first retries only yield the processor (a preempted holder
// needs the CPU, not time) and later ones sleep, doubling from 1 µs up to
// 100 µs, so that a budget of thousands of attempts covers a second or more
// (how long a sleep lasts is the system's: a 100 µs sleep took 1.1 ms on a
// 2-core VM, where 16,384 attempts took 15 to 19 s).
func (c *Client) Backoff(attempt int) { c.pool.t.backoff(c, max(attempt, 0)) }

// check validates a batch before anything of it executes.
func (c *Client) check(ctx context.Context, ops []Op) error {
	if c.pool.closed.Load() {
		return ErrClosed
	}
	if d := ctx.Done(); d != nil {
		select {
		case <-d:
			return ctx.Err()
		default:
		}
	}
	for i := range ops {
		if err := c.pool.checkOp(&ops[i]); err != nil {
			return fmt.Errorf("verb %d of %d: %w", i, len(ops), err)
		}
	}
	return nil
}

// checkOp validates one verb's kind, address, bounds and alignment.
func (p *Pool) checkOp(o *Op) error {
	if o.Addr.IsNil() {
		return fmt.Errorf("%w: %v", ErrNilAddr, o.Kind)
	}
	if mn := o.Addr.MN(); mn >= len(p.geom) {
		return fmt.Errorf("%w: %v %v (pool has %d)", ErrUnknownNode, o.Kind, o.Addr, len(p.geom))
	}
	return checkVerb(p.geom[o.Addr.MN()], o.Kind, o.Addr, uint64(o.size()))
}

// Alloc allocates size bytes, 8-byte aligned, on the next memory node in
// round-robin order: an object of that size the compute node got back with
// Free, or else from the client's chunk of that node; a new chunk is fetched
// by RPC when it runs out. A full memory node is skipped; when every node is
// full Alloc returns ErrOutOfMemory.
func (c *Client) Alloc(ctx context.Context, size int) (Addr, error) {
	return c.AllocOn(ctx, -1, size, 8)
}

// AllocOn allocates size bytes aligned to align (a power of two, at least 8)
// on memory node mn, or round-robin if mn < 0.
func (c *Client) AllocOn(ctx context.Context, mn, size, align int) (Addr, error) {
	if size <= 0 || align < 8 || align&(align-1) != 0 || int64(size) > c.pool.cfg.NodeBytes {
		return 0, fmt.Errorf("%w: alloc of %d bytes aligned to %d", ErrBadRequest, size, align)
	}
	n := len(c.pool.geom)
	if mn >= n {
		return 0, fmt.Errorf("%w: alloc on memory node %d (pool has %d)", ErrUnknownNode, mn, n)
	}
	if mn >= 0 {
		return c.allocOn(ctx, mn, uint64(size), uint64(align))
	}
	var err error
	for range n {
		mn = c.rr
		c.rr = (c.rr + 1) % n
		var a Addr
		if a, err = c.allocOn(ctx, mn, uint64(size), uint64(align)); err == nil {
			return a, nil
		}
		if !errors.Is(err, ErrOutOfMemory) {
			return 0, err
		}
	}
	return 0, err
}

func (c *Client) allocOn(ctx context.Context, mn int, size, align uint64) (Addr, error) {
	a, err := c.carve(ctx, mn, size, align)
	if err == nil {
		c.stats.allocBytes.Add(size)
	}
	return a, err
}

// carve takes an object from the compute node's free list or the client's
// chunk of memory node mn.
func (c *Client) carve(ctx context.Context, mn int, size, align uint64) (Addr, error) {
	if a := c.cn.free.Take(mn, size, align); !a.IsNil() {
		return a, nil
	}
	ch := &c.chunks[mn]
	if ch.cur != 0 && ch.fits(size, align) {
		return MakeAddr(mn, ch.bump(size, align)), nil
	}
	chunkBytes := uint64(c.pool.cfg.ChunkBytes)
	req := rpcRequest{Kind: rpcAlloc, Size: size, Align: align}
	if size+align <= chunkBytes/4 {
		// Memory that a compute node which left handed on
		// (ComputeNode.Reuse), else a new chunk, or, if not a whole chunk
		// is left, just this object from the node's tail. Large objects
		// get their own RPC instead of wasting a chunk.
		if sp, ok := c.cn.takeSpare(mn, size, align); ok {
			*ch = sp
			return MakeAddr(mn, ch.bump(size, align)), nil
		}
		req = rpcRequest{Kind: rpcAlloc, Size: chunkBytes, Align: 64, OrSize: size, OrAlign: align}
	}
	r, err := c.rpc(ctx, mn, &req)
	if r.Used != 0 {
		c.cn.used[mn].Store(r.Used)
	}
	if err != nil || req.OrSize == 0 || r.Fallen {
		if err != nil {
			return 0, err
		}
		return MakeAddr(mn, r.Off), nil
	}
	*ch = chunk{cur: r.Off, end: r.Off + chunkBytes}
	return MakeAddr(mn, ch.bump(size, align)), nil
}

// fits reports whether the chunk holds size more bytes aligned to align.
func (ch *chunk) fits(size, align uint64) bool {
	return (ch.cur+align-1)&^(align-1)+size <= ch.end
}

// bump carves size bytes aligned to align from the chunk, which fits them,
// and returns their offset.
func (ch *chunk) bump(size, align uint64) uint64 {
	start := (ch.cur + align - 1) &^ (align - 1)
	ch.cur = start + size
	return start
}

// Named returns the address of the zeroed region of size bytes registered
// under name on memory node 0, creating it on first use. Every client of the
// pool gets the same address for the same name: it is how compute nodes find
// a shared structure's root.
func (c *Client) Named(ctx context.Context, name string, size int) (Addr, error) {
	if size <= 0 || int64(size) > c.pool.cfg.NodeBytes {
		return 0, fmt.Errorf("%w: named region %q of %d bytes", ErrBadRequest, name, size)
	}
	if len(name) > MaxNameBytes {
		return 0, fmt.Errorf("%w: named region's name of %d bytes (at most %d)", ErrBadRequest, len(name), MaxNameBytes)
	}
	r, err := c.rpc(ctx, 0, &rpcRequest{Kind: rpcNamed, Name: name, Size: uint64(size)})
	if err != nil {
		return 0, err
	}
	return MakeAddr(0, r.Off), nil
}

// rpc sends req to memory node mn's CPU.
func (c *Client) rpc(ctx context.Context, mn int, req *rpcRequest) (rpcReply, error) {
	if c.pool.closed.Load() {
		return rpcReply{}, ErrClosed
	}
	if c.Crashed() {
		return rpcReply{}, c.crashedError()
	}
	if err := ctx.Err(); err != nil {
		return rpcReply{}, err
	}
	c.stats.rpcs.Add(1)
	r, err := c.pool.t.rpc(ctx, c, mn, req)
	if err != nil {
		return r, fmt.Errorf("memory node %d: %s: %w", mn, req.Kind, err)
	}
	return r, nil
}

// Wait parks the client until another client calls Signal on it, the
// context is done, or the pool is closed. A Signal sent before Wait is not
// lost: the client keeps one permit. Waiting is CN-local and visible to the
// simulator's scheduler.
func (c *Client) Wait(ctx context.Context) error {
	if c.pool.closed.Load() {
		return ErrClosed
	}
	return c.pool.t.wait(ctx, c)
}

// Signal gives the client a permit and wakes it if it is parked in Wait. It
// may be called from any goroutine.
func (c *Client) Signal() { c.pool.t.signal(c) }

// Compute charges d of client CPU time: in the simulator the client's
// virtual clock advances by d before its next verb; in local mode it is a
// no-op (the CPU time is real).
func (c *Client) Compute(d time.Duration) { c.pool.t.compute(c, d) }

// Now returns the client's clock: its virtual time in the simulator, wall
// time since the pool was created otherwise.
func (c *Client) Now() time.Duration { return c.pool.t.now(c) }
