package remote

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a set of memory nodes and the transport that reaches them. Create
// it with NewPool; compute nodes are created from it. All methods are safe for
// concurrent use.
type Pool struct {
	cfg    Config
	geom   []nodeGeom // per memory node, for every client-side check
	mns    []*memNode // in-process memory (local, sim, shm); nil for tcp and fabric
	t      transport
	opCPU  time.Duration // modelled client CPU time of one index operation
	closed atomic.Bool

	mu  sync.Mutex
	cns []*ComputeNode

	crash crashSchedule // InjectCrashes
	stall stallSchedule // InjectStalls
}

// NewPool creates or connects to the memory nodes of cfg: fresh in-process
// nodes (zeroed, or copies of cfg.From) behind the local transport (the
// default) or the simulator (cfg.Sim), files shared by processes
// (cfg.Shm), or memnode servers over TCP (cfg.TCP) or libfabric
// (cfg.Fabric). A bad
// configuration, a size the machine cannot map, or an unreachable or
// mismatched memory node is an error; nothing is left allocated or
// connected then.
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
	switch {
	case cfg.TCP != nil:
		err = p.dialTCP(*cfg.TCP)
	case cfg.Fabric != nil:
		err = p.dialFabric(*cfg.Fabric)
	case cfg.Shm != nil:
		err = p.openShm(*cfg.Shm)
	default:
		err = p.newInProcess()
	}
	if err != nil {
		return nil, err
	}
	if p.cfg.Sim != nil {
		p.opCPU = p.cfg.Sim.Profile.CPUPerOp
	}
	return p, nil
}

// newInProcess creates fresh anonymous memory nodes, or nodes started from
// cfg.From, behind the local or the simulated transport.
func (p *Pool) newInProcess() error {
	g := nodeGeom{main: uint64(p.cfg.NodeBytes), onChip: p.cfg.onChipRegion()}
	for i := range p.cfg.MemoryNodes {
		var m *memNode
		var err error
		if p.cfg.From != nil {
			m, err = newMemNodeFrom(g, &p.cfg.From.nodes[i])
		} else {
			m, err = newMemNode(g)
		}
		if err != nil {
			return fmt.Errorf("memory node %d of %d: %w", len(p.mns), p.cfg.MemoryNodes, err)
		}
		p.mns = append(p.mns, m)
		p.geom = append(p.geom, g)
	}
	if p.cfg.Sim != nil {
		p.t = newSimulator(p, *p.cfg.Sim)
	} else {
		p.t = newLocal(p)
	}
	return nil
}

// adoptGeometry settles the configuration of a pool whose memory nodes
// already exist from their geometry (p.geom).
func (p *Pool) adoptGeometry() error {
	c := &p.cfg
	c.MemoryNodes = len(p.geom)
	c.NodeBytes, c.OnChipBytes = int64(p.geom[0].main), int(p.geom[0].onChip)
	for _, g := range p.geom {
		c.NodeBytes, c.OnChipBytes = min(c.NodeBytes, int64(g.main)), min(c.OnChipBytes, int(g.onChip))
	}
	if c.OnChipBytes == 0 {
		c.OnChipBytes = -1 // no on-chip region (0 would ask for the default)
	}
	return c.checkChunk()
}

// Config returns the pool's configuration with defaults filled in: a
// disabled on-chip region is reported as OnChipBytes -1, so that
// NewPool(p.Config()) asks for the same pool. For pools whose memory nodes
// already exist (tcp, fabric, shm), MemoryNodes, NodeBytes and OnChipBytes
// are those of the nodes (NodeBytes and OnChipBytes of the smallest node,
// if they differ; such a configuration refuses the larger nodes, and one
// with NodeBytes and OnChipBytes 0 accepts them). The result is the
// caller's: its Sim, Shm, TCP and Fabric point to copies.
func (p *Pool) Config() Config {
	c := p.cfg
	if c.Sim != nil {
		s := *c.Sim
		c.Sim = &s
	}
	if c.Shm != nil {
		s := *c.Shm
		c.Shm = &s
	}
	if c.TCP != nil {
		t := *c.TCP
		t.MemoryNodes = slices.Clone(t.MemoryNodes)
		c.TCP = &t
	}
	if c.Fabric != nil {
		f := *c.Fabric
		f.MemoryNodes = slices.Clone(f.MemoryNodes)
		c.Fabric = &f
	}
	return c
}

// MemoryNodes returns the number of memory nodes.
func (p *Pool) MemoryNodes() int { return len(p.geom) }

// MaxAllocBytes returns the most bytes one allocation (Client.Alloc,
// AllocOn) can ever get: NodeBytes of Config (the smallest memory node's)
// less the bytes every memory node reserves at the start of its main
// region for its own state. A larger allocation never succeeds, however
// much is freed: it fails with ErrOutOfMemory (ErrBadRequest above
// NodeBytes). An index whose object would be larger can tell its caller so
// at once instead.
func (p *Pool) MaxAllocBytes() int64 { return p.cfg.NodeBytes - reservedBytes }

// Transport returns the name of the pool's transport: "local", "sim",
// "shm", "tcp" or "fabric".
func (p *Pool) Transport() string { return p.cfg.transportName() }

// NewComputeNode adds a compute node. Its clients share CN-local state of
// the indexes opened on it.
func (p *Pool) NewComputeNode() *ComputeNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	cn := &ComputeNode{pool: p, id: len(p.cns), used: make([]atomic.Uint64, len(p.geom))}
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
// started by Go take part in a deterministic run. Elsewhere it is a plain
// goroutine. Wait waits for all of them. A simulated pool may also be used
// from plain goroutines that never call Go (each call then takes the
// simulator's token in turn): results stay correct but the run is not
// deterministic. While goroutines started by Go run, use clients only from
// them.
func (p *Pool) Go(fn func()) { p.t.spawn(fn) }

// Wait waits until every goroutine started by Go has returned. In the
// simulator it drives virtual time; it returns ErrDeadlock if every remaining
// client is parked in Client.Wait with nothing left to wake it. Call it from
// outside the goroutines started by Go: one of them that calls it waits for
// itself and never returns.
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

// MemoryUsed returns the bytes handed out by each memory node's allocator,
// the reserved bytes at the start of each node included. With remote memory
// nodes (tcp, fabric) it asks each node and fails if one cannot answer.
func (p *Pool) MemoryUsed() ([]uint64, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]uint64, len(p.geom))
	for i := range out {
		u, err := p.t.used(context.Background(), i)
		if err != nil {
			return nil, fmt.Errorf("memory node %d: %w", i, err)
		}
		out[i] = u
	}
	return out, nil
}

// Close closes the pool: every later verb fails with ErrClosed, clients
// parked in Wait return ErrClosed, and connections to memory nodes are
// closed. The memory itself is released once no verb can reach it; shared
// files and memnode servers keep their contents. Close is idempotent.
func (p *Pool) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.t.close()
	return nil
}

// usedInProcess is the used method of the transports whose memory is in
// this process.
func (p *Pool) usedInProcess(mn int) (uint64, error) { return nodeUsed(p.mns[mn].main), nil }

// apply executes one validated verb on in-process memory.
func (p *Pool) apply(o *Op) { p.mns[o.Addr.MN()].apply(o) }

// touch loads the first word of each verb's target before a batch is
// applied: independent loads in a tight loop let the processor wait for
// their cache and TLB misses together, where applying the verbs one by one
// waits for each in turn (a scan's batch reads leaves all over the memory
// nodes).
func (p *Pool) touch(ops []Op) {
	for i := range ops {
		o := &ops[i]
		atomic.LoadUint64(&p.mns[o.Addr.MN()].region(o.Addr)[o.Addr.Offset()/8])
	}
}

// realBackoff is the backoff of every transport that runs in real time. A
// holder preempted in the middle of a WRITE or a critical section can keep a
// lock held or a record torn for milliseconds on a loaded machine, so the
// first retries only yield the processor and later ones sleep, doubling up
// to 100 µs: a budget of thousands of attempts then covers a second or more
// of waiting (the system's sleeps may be much longer than asked) rather
// than a burst of spins.
func realBackoff(attempt int) {
	if attempt < 8 {
		runtime.Gosched()
		return
	}
	time.Sleep(min(time.Microsecond<<min(attempt-8, 7), 100*time.Microsecond))
}
