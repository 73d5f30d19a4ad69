//go:build fabric

package fabric

// #include <rdma/fabric.h>
// #include <rdma/fi_errno.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// ibv_wc_status values that verbs reports as prov_errno (with err EIO) for
// operations the target rejected.
const (
	ibvWCRemInvReqErr = 9
	ibvWCRemAccessErr = 10
)

// Do runs the batch ops on the connection and returns when every operation
// has completed: READ data is in Buf and Old is set for CAS and FAA. The
// operations take effect at the target in posting order. A batch is posted
// and reaped in one cgo call per round of at most Window operations (and
// at most the staging buffer's bytes).
//
// Do returns the error of the first failed operation in posting order,
// wrapping ErrAccess or ErrUnavailable, and stops after the round that
// failed; results of operations that did not complete are unspecified. A
// malformed op fails the whole batch with ErrInvalid before anything is
// posted. After ErrUnavailable (and, with verbs, ErrAccess) the Conn is
// broken: a later Do posts nothing and returns an error wrapping ErrBroken
// and ErrUnavailable. Do on a closed Conn returns ErrClosed.
func (c *Conn) Do(ops []Op) error { return c.DoBy(ops, time.Time{}) }

// DoBy is Do that also gives up at deadline (the zero time: never), which
// bounds the batch as the watchdog (DialConfig.BatchTimeout) does, when it
// comes first: a batch that has not completed by then fails with an error
// wrapping ErrDeadline. If a round was outstanding then, the Conn is broken
// as by the watchdog (the operations may still take effect, and the
// staging buffer may still be written until Close); if the deadline had
// passed before the first round was posted, nothing of the batch was (the
// error wraps ErrNotPosted), and the Conn stays usable.
func (c *Conn) DoBy(ops []Op, deadline time.Time) error {
	return c.do(context.Background(), ops, batchDeadline{caller: deadline})
}

// DoContext is DoBy with ctx's deadline that also gives up when ctx is
// cancelled: the batch then fails with an error wrapping ErrCanceled, and
// a round outstanding breaks the Conn as the deadline does. A wait for
// completions notices the cancellation within about 20 ms.
func (c *Conn) DoContext(ctx context.Context, ops []Op) error {
	deadline, _ := ctx.Deadline()
	return c.do(ctx, ops, batchDeadline{caller: deadline})
}

// do runs a batch by deadline by (its watchdog is set here), or until ctx
// is cancelled.
func (c *Conn) do(ctx context.Context, ops []Op, by batchDeadline) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == nil {
		return fmt.Errorf("%w: Do on a closed Conn", ErrClosed)
	}
	if c.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, c.broken)
	}
	for i := range ops {
		if err := ops[i].check(i, c.maxMsg); err != nil {
			return err
		}
		if c.atomicsErr != nil && (ops[i].Kind == OpCAS || ops[i].Kind == OpFAA) {
			return fmt.Errorf("op %d: %w", i, c.atomicsErr)
		}
	}
	if ctx.Done() != nil {
		defer c.cancelOn(ctx)()
	}
	by.watchdog = time.Now().Add(c.batchTimeout)
	for start := 0; start < len(ops); {
		n, need := c.round(ops[start:])
		if n == 0 {
			if err := c.grow(need); err != nil {
				return err
			}
			continue
		}
		if err := c.run(ctx, ops[start:start+n], start, by); err != nil {
			return err
		}
		start += n
	}
	return nil
}

// cancelOn has the shim give up the round it runs when ctx is cancelled,
// and returns the function that ends that: it returns once nothing can
// set the shim's flag any more (the flag lives in C memory that Close
// frees), and clears it for the next batch.
func (c *Conn) cancelOn(ctx context.Context) (end func()) {
	flag := (*uint32)(unsafe.Pointer(&c.pub.cancel))
	set := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		atomic.StoreUint32(flag, 1)
		close(set)
	})
	return func() {
		if !stop() {
			<-set
		}
		atomic.StoreUint32(flag, 0)
	}
}

// batchDeadline is when a batch gives up: its watchdog, or its caller's
// deadline (DoBy; zero: none) if that comes first.
type batchDeadline struct{ watchdog, caller time.Time }

// at returns the earlier of the two, and whether it is the caller's.
func (b batchDeadline) at() (time.Time, bool) {
	if !b.caller.IsZero() && b.caller.Before(b.watchdog) {
		return b.caller, true
	}
	return b.watchdog, false
}

// Post runs ops like Do. It exists for callers that distinguish unsignaled
// batches: this engine always waits for the completions, which is also how
// it learns about remote errors.
func (c *Conn) Post(ops []Op) error { return c.Do(ops) }

// round returns how many leading operations of ops fit one round, or 0 and
// the staging bytes the first one needs if it alone exceeds the buffer.
func (c *Conn) round(ops []Op) (n int, need uint64) {
	var bytes uint64
	for n < len(ops) && n < c.window {
		s := ops[n].slotSize()
		if bytes+s > uint64(len(c.staging)) {
			break
		}
		bytes += s
		n++
	}
	if n == 0 {
		return 0, ops[0].slotSize()
	}
	return n, 0
}

// grow replaces the staging buffer by one of at least need bytes.
func (c *Conn) grow(need uint64) error {
	size := 2 * uint64(len(c.staging))
	for size < need {
		size *= 2
	}
	if rc := C.fs_conn_grow(c.h, C.uint64_t(size)); rc != C.FS_OK {
		c.broken = shimError(rc, C.GoString(&c.pub.err[0]))
		return c.broken
	}
	c.viewStaging()
	return nil
}

// run posts and reaps one round by deadline by, or until ctx is cancelled;
// base is the index of ops[0] in the batch.
func (c *Conn) run(ctx context.Context, ops []Op, base int, by batchDeadline) error {
	var off uint64
	for i := range ops {
		o := &ops[i]
		co := &c.ops[i]
		co.kind = C.int32_t(o.Kind)
		co.raddr = C.uint64_t(o.Region.Base + o.Off)
		co.key = C.uint64_t(o.Region.Key)
		co.len = C.uint64_t(len(o.Buf))
		co.soff = C.uint64_t(off)
		co.compare = C.uint64_t(o.Compare)
		co.operand = C.uint64_t(o.Swap)
		if o.Kind == OpWrite {
			copy(c.staging[off:], o.Buf)
		}
		off += o.slotSize()
	}
	deadline, caller := by.at()
	left := time.Until(deadline)
	switch {
	case left <= 0 && caller:
		return unposted(ErrDeadline, base, len(ops))
	case left <= 0:
		c.broken = fmt.Errorf("%w: watchdog: batch not completed in %v", ErrUnavailable, c.batchTimeout)
		return c.broken
	case ctx.Err() != nil:
		return unposted(ended(ctx), base, len(ops))
	}
	if rc := C.fs_conn_run(c.h, C.int(len(ops)), millis(left)); rc != C.FS_OK {
		switch {
		case rc == C.FS_ETIMEOUT && caller:
			c.broken = fmt.Errorf("%w: a batch's deadline passed with operations outstanding", ErrUnavailable)
			return fmt.Errorf("%w: operations %d to %d outstanding", ErrDeadline, base, base+len(ops)-1)
		case rc == C.FS_ECANCEL:
			c.broken = fmt.Errorf("%w: a batch's context ended with operations outstanding", ErrUnavailable)
			return fmt.Errorf("%w: operations %d to %d outstanding", ended(ctx), base, base+len(ops)-1)
		}
		c.broken = shimError(rc, C.GoString(&c.pub.err[0]))
		return c.broken
	}
	var first error
	for i := range ops {
		o := &ops[i]
		co := &c.ops[i]
		if co.err != 0 {
			if first == nil {
				first = c.opError(o, base+i, int(co.err), int(co.prov_errno))
			}
			continue
		}
		switch o.Kind {
		case OpRead:
			copy(o.Buf, c.staging[co.soff:])
		case OpCAS, OpFAA:
			o.Old = uint64(co.old)
		}
	}
	return first
}

// ended is the sentinel of a batch whose context ended: ErrDeadline if its
// deadline passed (its timer may fire before the shim's own deadline
// does), ErrCanceled otherwise.
func ended(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrDeadline
	}
	return ErrCanceled
}

// unposted is the error of a batch given up (why: ErrDeadline or
// ErrCanceled) before its round of n operations from base was posted: it
// wraps ErrNotPosted too if that round was the batch's first.
func unposted(why error, base, n int) error {
	if base == 0 {
		return fmt.Errorf("%w (%w): operations %d to %d", why, ErrNotPosted, base, base+n-1)
	}
	return fmt.Errorf("%w: operations %d to %d not posted", why, base, base+n-1)
}

// opError describes the failed completion of o, operation i of its batch,
// and breaks the Conn unless the provider keeps the connection usable
// (sockets after a remote access error).
func (c *Conn) opError(o *Op, i, errno, provErrno int) error {
	sentinel, keep := ErrUnavailable, false
	switch {
	case errno == C.FI_EACCES:
		sentinel, keep = ErrAccess, c.prov != "verbs"
	case c.prov == "verbs" && errno == int(syscall.EIO) &&
		(provErrno == ibvWCRemAccessErr || provErrno == ibvWCRemInvReqErr):
		sentinel = ErrAccess
	}
	size := uint64(len(o.Buf))
	if o.Kind == OpCAS || o.Kind == OpFAA {
		size = 8
	}
	err := fmt.Errorf("%w: op %d: %v of %d bytes at %#x (key %#x): %s (provider error %d)",
		sentinel, i, o.Kind, size, o.Region.Base+o.Off, o.Region.Key, fiError(errno), provErrno)
	if !keep {
		c.broken = fmt.Errorf("%w: connection broken by an earlier error (%v)", ErrUnavailable, err)
	}
	return err
}

// The msg_order bits that decide fences (see fs_fences in shim.c).
const (
	orderRAW = uint64(C.FI_ORDER_RAW)
	orderWAR = uint64(C.FI_ORDER_WAR)
	orderWAW = uint64(C.FI_ORDER_WAW)
)

// setOrdering overrides the ordering the provider advertised: msg_order
// bits and max_order_raw_size (0 keeps it). Tests use it to exercise fences
// on sockets, which orders everything.
func (c *Conn) setOrdering(msgOrder, rawSize uint64) {
	c.pub.msg_order = C.uint64_t(msgOrder)
	if rawSize != 0 {
		c.pub.order_raw_size = C.uint64_t(rawSize)
	}
}
