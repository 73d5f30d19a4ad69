package indextest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
)

// RunExpiring checks that an operation whose context ends at any point of
// its course either completes and returns nil, or returns the context's
// error having changed nothing, and that either way it leaves no lock
// behind (Verify, and a later write of the same key that succeeds at
// once). The context ends at the n-th time the operation consults it, for
// n = 1, 2, ... until the operation completes without ending it; at the
// consultation before, the call pauses for a fifth of tg.Lease, so that a
// heartbeat falls due (every Lease/10) wherever the operation is.
// Updates, growing updates, inserts of new keys next to existing ones and
// deletes, on the local transport. It skips when tg.Lease is zero.
func RunExpiring(t *testing.T, tg Target) {
	checkTarget(t, tg)
	if tg.Lease == 0 {
		t.Skip("Target.Lease is zero: heartbeats would fall due only every 100 ms")
	}
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := newOracle()
	const keys = 400
	key := func(i int) []byte { return tg.fitKey(fmt.Appendf(nil, "expiring/key%05d", i)) }
	for i := range keys {
		k, v := key(i), makeValue(uint64(i), tg.vlen(8))
		if err := idx.Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
	}
	next := 0
	for _, kind := range []string{"update", "grow", "insert", "delete"} {
		ok := t.Run(kind, func(t *testing.T) {
			for n := 1; ; n++ {
				if n > 200 || next == keys {
					t.Fatalf("%s: still ending the context at its consultation %d", kind, n)
				}
				k := key(next)
				next++
				v := makeValue(uint64(keys+next), tg.vlen(8))
				switch kind {
				case "grow":
					v = makeValue(uint64(keys+next), tg.vlen(300))
				case "insert":
					k = tg.fitKey(append(k, 'x'))
				}
				c := newEndingCtx(ctx, n, tg.Lease/5)
				var err error
				if kind == "delete" {
					_, err = idx.Delete(c, k)
				} else {
					err = idx.Put(c, k, v)
				}
				switch {
				case err == nil && kind == "delete":
					o.del(k)
				case err == nil:
					o.put(k, v)
				case !errors.Is(err, context.DeadlineExceeded):
					t.Fatalf("%s of %s, the context ending at its consultation %d: %v, want the context's error", kind, fmtKey(k), n, err)
				}
				if p := checkGet(ctx, idx, o, k); p != "" {
					t.Fatalf("after a %s ending its context at its consultation %d (%v): %s", kind, n, err, p)
				}
				if verr := tg.verifyErr(ctx, idx); verr != nil {
					t.Fatalf("Verify after a %s ending its context at its consultation %d (%v): %v", kind, n, err, verr)
				}
				if err := writeSoon(ctx, idx, k, v); err != nil {
					t.Fatalf("after a %s ending its context at its consultation %d: %v", kind, n, err)
				}
				o.put(k, v)
				if !c.ended() {
					t.Logf("%s: completed within %d consultations of its context", kind, n-1)
					return
				}
			}
		})
		if !ok {
			return // the next kinds would meet what this one left
		}
	}
}

// writeSoon puts k again within a second: a lock left behind makes it fail
// (or wait for the lease of its holder's compute node, which goes on
// beating).
func writeSoon(ctx context.Context, idx index.Index, k, v []byte) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := idx.Put(ctx, k, v); err != nil {
		return fmt.Errorf("a later Put(%s): %w", fmtKey(k), err)
	}
	return nil
}

// endingCtx is a context that ends (with context.DeadlineExceeded) at the
// n-th call of its Err or Done, and pauses at the call before: a heartbeat
// is then due, and its post consults the context (the first time, for an
// operation that has taken a lock, since its first batch).
type endingCtx struct {
	context.Context
	mu    sync.Mutex
	left  int
	pause time.Duration
	done  chan struct{}
}

func newEndingCtx(parent context.Context, n int, pause time.Duration) *endingCtx {
	return &endingCtx{Context: parent, left: n, pause: pause, done: make(chan struct{})}
}

// consult counts a consultation and reports whether the context has ended.
func (c *endingCtx) consult() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.left {
	case 0:
		return true
	case 1:
		close(c.done)
	case 2:
		time.Sleep(c.pause) // so that a heartbeat is due at the next one
	}
	c.left--
	return c.left == 0
}

// ended reports whether the context has ended.
func (c *endingCtx) ended() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.left == 0
}

func (c *endingCtx) Done() <-chan struct{} {
	c.consult()
	return c.done
}

func (c *endingCtx) Err() error {
	if c.consult() {
		return context.DeadlineExceeded
	}
	return nil
}

// Deadline reports none: the end comes by count, not by time.
func (c *endingCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
