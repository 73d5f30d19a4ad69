package remote

import (
	"context"
	"errors"
	"fmt"
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

	permit chan struct{} // local transport: the wait/signal permit
	sim    *simClient    // simulator state
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
func (c *Client) Do(ctx context.Context, ops []Op) error {
	if err := c.check(ctx, ops); err != nil || len(ops) == 0 {
		return err
	}
	if err := c.pool.t.exec(ctx, c, ops, true); err != nil {
		return err
	}
	c.stats.countBatch(ops, true)
	return nil
}

// Post posts ops unsignaled: the client does not wait for completion and
// the results (Old, READ contents) are not delivered. Verbs still execute in
// posting order per memory node, after every verb the client posted before.
// Use it only where the protocol does not depend on the outcome.
func (c *Client) Post(ctx context.Context, ops []Op) error {
	if err := c.check(ctx, ops); err != nil || len(ops) == 0 {
		return err
	}
	if err := c.pool.t.exec(ctx, c, ops, false); err != nil {
		return err
	}
	c.stats.countBatch(ops, false)
	return nil
}

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
	switch o.Kind {
	case OpRead, OpWrite:
	case OpCAS, OpFAA:
		if o.Addr%8 != 0 {
			return fmt.Errorf("%w: %v %v", ErrMisaligned, o.Kind, o.Addr)
		}
	default:
		return fmt.Errorf("%w: verb kind %d", ErrBadRequest, o.Kind)
	}
	return p.checkRange(o.Addr, uint64(o.size()), o.Kind)
}

// checkRange validates the region [a, a+n).
func (p *Pool) checkRange(a Addr, n uint64, k OpKind) error {
	if a.IsNil() {
		return fmt.Errorf("%w: %v", ErrNilAddr, k)
	}
	mn := a.MN()
	if mn >= len(p.mns) {
		return fmt.Errorf("%w: %v %v (pool has %d)", ErrUnknownNode, k, a, len(p.mns))
	}
	size := uint64(len(p.mns[mn].region(a))) * 8
	off := a.Offset()
	if off >= size || n > size-off {
		return fmt.Errorf("%w: %v of %d bytes at %v (region is %d bytes)", ErrOutOfBounds, k, n, a, size)
	}
	return nil
}

// Alloc allocates size bytes, 8-byte aligned, on the next memory node in
// round-robin order, from the client's chunk of that node; a new chunk is
// fetched by RPC when it runs out. A full memory node is skipped; when every
// node is full Alloc returns ErrOutOfMemory. Memory is never reused.
func (c *Client) Alloc(ctx context.Context, size int) (Addr, error) {
	return c.AllocOn(ctx, -1, size, 8)
}

// AllocOn allocates size bytes aligned to align (a power of two, at least 8)
// on memory node mn, or round-robin if mn < 0.
func (c *Client) AllocOn(ctx context.Context, mn, size, align int) (Addr, error) {
	if size <= 0 || align < 8 || align&(align-1) != 0 || int64(size) > c.pool.cfg.NodeBytes {
		return 0, fmt.Errorf("%w: alloc of %d bytes aligned to %d", ErrBadRequest, size, align)
	}
	if mn >= len(c.pool.mns) {
		return 0, fmt.Errorf("%w: alloc on memory node %d (pool has %d)", ErrUnknownNode, mn, len(c.pool.mns))
	}
	if mn >= 0 {
		return c.allocOn(ctx, mn, uint64(size), uint64(align))
	}
	var err error
	for range c.pool.mns {
		mn = c.rr
		c.rr = (c.rr + 1) % len(c.pool.mns)
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
	ch := &c.chunks[mn]
	start := (ch.cur + align - 1) &^ (align - 1)
	if ch.cur != 0 && start+size <= ch.end {
		ch.cur = start + size
		return MakeAddr(mn, start), nil
	}
	chunkBytes := uint64(c.pool.cfg.ChunkBytes)
	if size+align > chunkBytes/4 {
		// Large objects get their own RPC instead of wasting a chunk.
		var a Addr
		err := c.rpc(ctx, mn, func() (err error) {
			a, err = c.pool.mns[mn].allocRPC(size, align)
			return err
		})
		return a, err
	}
	var base Addr
	single := false
	err := c.rpc(ctx, mn, func() (err error) {
		m := c.pool.mns[mn]
		if base, err = m.allocRPC(chunkBytes, 64); errors.Is(err, ErrOutOfMemory) {
			// Not a whole chunk left: take just this object from the tail.
			single = true
			base, err = m.allocRPC(size, align)
		}
		return err
	})
	if err != nil || single {
		return base, err
	}
	ch.cur, ch.end = base.Offset(), base.Offset()+chunkBytes
	start = (ch.cur + align - 1) &^ (align - 1)
	ch.cur = start + size
	return MakeAddr(mn, start), nil
}

// Named returns the address of the zeroed region of size bytes registered
// under name on memory node 0, creating it on first use. Every client of the
// pool gets the same address for the same name: it is how compute nodes find
// a shared structure's root.
func (c *Client) Named(ctx context.Context, name string, size int) (Addr, error) {
	if size <= 0 || int64(size) > c.pool.cfg.NodeBytes {
		return 0, fmt.Errorf("%w: named region %q of %d bytes", ErrBadRequest, name, size)
	}
	var a Addr
	err := c.rpc(ctx, 0, func() (err error) {
		a, err = c.pool.mns[0].namedRPC(name, uint64(size))
		return err
	})
	return a, err
}

func (c *Client) rpc(ctx context.Context, mn int, fn func() error) error {
	if c.pool.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.stats.rpcs.Add(1)
	return c.pool.t.rpc(ctx, c, mn, fn)
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
