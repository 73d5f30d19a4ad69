package remote

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a set of memory nodes and the transport that reaches them. Create
// it with NewPool; compute nodes are created from it. All methods are safe for
// concurrent use.
type Pool struct {
	cfg    Config
	mns    []*memNode
	t      transport
	closed atomic.Bool

	mu  sync.Mutex
	cns []*ComputeNode
}

// NewPool creates the memory nodes of cfg, zeroed, behind the local
// transport, or behind the simulator if cfg.Sim is set.
//
//	pool, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30})
//	cn := pool.NewComputeNode()
//	c := cn.NewClient()
func NewPool(cfg Config) (*Pool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg}
	for i := range cfg.MemoryNodes {
		p.mns = append(p.mns, newMemNode(i, cfg))
	}
	if cfg.Sim != nil {
		p.t = newSimulator(p, *cfg.Sim)
	} else {
		p.t = newLocal(p)
	}
	return p, nil
}

// Config returns the pool's configuration with defaults filled in.
func (p *Pool) Config() Config { return p.cfg }

// MemoryNodes returns the number of memory nodes.
func (p *Pool) MemoryNodes() int { return len(p.mns) }

// Simulated reports whether the pool runs on the simulator.
func (p *Pool) Simulated() bool { return p.cfg.Sim != nil }

// NewComputeNode adds a compute node. Its clients share CN-local state of
// the indexes opened on it.
func (p *Pool) NewComputeNode() *ComputeNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := &ComputeNode{pool: p, id: len(p.cns)}
	p.cns = append(p.cns, cn)
	return cn
}

// ComputeNodes returns the compute nodes created so far.
func (p *Pool) ComputeNodes() []*ComputeNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*ComputeNode(nil), p.cns...)
}

// Go starts fn as a client goroutine. In the simulator, fn runs as a
// simulated thread: the scheduler runs one at a time and only goroutines
// started by Go take part in a deterministic run. In local mode it is a plain
// goroutine. Wait waits for all of them.
func (p *Pool) Go(fn func()) { p.t.spawn(fn) }

// Wait waits until every goroutine started by Go has returned. In the
// simulator it drives virtual time; it returns ErrDeadlock if every remaining
// client is parked in Client.Wait with nothing left to wake it.
func (p *Pool) Wait() error { return p.t.waitAll() }

// Now returns the pool's clock: virtual time in the simulator, wall time
// since NewPool otherwise.
func (p *Pool) Now() time.Duration { return p.t.now(nil) }

// Stats returns the I/O of every client of every compute node.
func (p *Pool) Stats() Stats {
	var s Stats
	for _, cn := range p.ComputeNodes() {
		s = s.Add(cn.Stats())
	}
	return s
}

// Report returns the transport's measurements (virtual time, NIC
// utilisation and per-client latencies in the simulator).
func (p *Pool) Report() Report { return p.t.report() }

// MemoryUsed returns the bytes handed out by each memory node's allocator.
func (p *Pool) MemoryUsed() []uint64 {
	out := make([]uint64, len(p.mns))
	for i, m := range p.mns {
		out[i] = m.used()
	}
	return out
}

// Close closes the pool: every later verb fails with ErrClosed and clients
// parked in Wait return ErrClosed. Close is idempotent.
func (p *Pool) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.t.close()
	return nil
}
