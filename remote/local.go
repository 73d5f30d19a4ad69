package remote

import (
	"context"
	"sync"
	"time"
)

// local is the in-process transport: verbs execute at once on the calling
// goroutine, with real concurrency and wall-clock time.
type local struct {
	p      *Pool
	start  time.Time
	wg     sync.WaitGroup
	closed chan struct{}
}

func newLocal(p *Pool) *local {
	return &local{p: p, start: time.Now(), closed: make(chan struct{})}
}

// exec runs a batch at once. A batch that changes memory holds the stripes
// of what it changes while it runs and checks its deadline (DoBy) under
// them, so that it lands as a whole before any later changing batch that
// overlaps it, as a NIC applies a posted batch (stripes.go).
func (l *local) exec(_ context.Context, c *Client, ops []Op, _ bool) error {
	var held stripeSet
	for i := range ops {
		if o := &ops[i]; o.Kind != OpRead {
			held.add(o.Addr, uint64(o.size()))
		}
	}
	if !held.empty() {
		held.lock()
		defer held.unlock()
		if c.by != 0 && c.Now() > c.by {
			return ErrLate
		}
	}
	if len(ops) > 1 {
		l.p.touch(ops)
	}
	for i := range ops {
		l.p.apply(&ops[i])
	}
	return nil
}

func (l *local) rpc(_ context.Context, _ *Client, mn int, req *rpcRequest) (rpcReply, error) {
	return l.p.mns[mn].serve(req)
}

func (l *local) used(_ context.Context, mn int) (uint64, error) { return l.p.usedInProcess(mn) }

func (l *local) newClient(c *Client) { c.permit = make(chan struct{}, 1) }

func (l *local) wait(ctx context.Context, c *Client) error {
	select {
	case <-c.permit:
		return nil
	default:
	}
	select {
	case <-c.permit:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.closed:
		return ErrClosed
	}
}

func (l *local) signal(c *Client) {
	select {
	case c.permit <- struct{}{}:
	default: // a permit is already pending
	}
}

func (l *local) compute(*Client, time.Duration) {}

func (l *local) backoff(_ *Client, attempt int) { realBackoff(attempt) }

func (l *local) now(*Client) time.Duration { return time.Since(l.start) }

func (l *local) spawn(fn func()) {
	l.wg.Go(fn)
}

func (l *local) waitAll() error {
	l.wg.Wait()
	return nil
}

func (l *local) report() Report {
	return Report{Transport: "local", Elapsed: time.Since(l.start)}
}

func (l *local) close() { close(l.closed) }
