package remote

import (
	"sync"
	"sync/atomic"
)

// ComputeNode groups the clients of one compute node. Indexes keep their
// CN-local state (caches, local lock tables) per ComputeNode. Safe for
// concurrent use.
type ComputeNode struct {
	pool *Pool
	id   int

	mu      sync.Mutex
	clients []*Client
	free    FreeList // see Client.Free
	spare   []Extent // see Reuse
	pending []Fault  // faults for the next clients to post (Crash)
	armed   atomic.Bool
	used    []atomic.Uint64 // per memory node: bytes handed out, as of the last allocation (Room)
	crashes atomic.Uint64   // clients that crashed (Crashes)
}

// Crashes returns how many of the compute node's clients have crashed
// (Client.Crashed): stopped by an injected fault, or by a batch that
// failed. A client may crash while nobody uses it, when a connection that
// carried verbs it posted unsignaled breaks; an index that keeps idle
// clients looks for crashed ones among them when the count changes.
func (cn *ComputeNode) Crashes() uint64 { return cn.crashes.Load() }

// Room estimates the bytes memory node mn can still hand out, as its
// allocator reported them to this compute node's last allocation there
// (the node's whole size if it has not allocated there yet). Other compute
// nodes' allocations since are not counted, and the bytes of chunks that
// clients hold unused count as taken. It costs nothing: placement policies
// use it to spread objects before a memory node fills.
func (cn *ComputeNode) Room(mn int) uint64 {
	size := cn.pool.geom[mn].main
	return size - min(cn.used[mn].Load(), size)
}

// ID returns the compute node's index in its pool, from 0.
func (cn *ComputeNode) ID() int { return cn.id }

// Pool returns the pool the compute node belongs to.
func (cn *ComputeNode) Pool() *Pool { return cn.pool }

// NewClient returns a new client of this compute node. A client is used by
// one goroutine at a time.
func (cn *ComputeNode) NewClient() *Client {
	cn.mu.Lock()
	c := &Client{cn: cn, pool: cn.pool, id: len(cn.clients)}
	c.chunks = make([]chunk, len(cn.pool.geom))
	c.rr = c.id % len(cn.pool.geom)
	cn.clients = append(cn.clients, c)
	cn.mu.Unlock()
	cn.pool.t.newClient(c)
	return c
}

// Clients returns the clients created so far.
func (cn *ComputeNode) Clients() []*Client {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return append([]*Client(nil), cn.clients...)
}

// Stats returns the I/O of all of the compute node's clients.
func (cn *ComputeNode) Stats() Stats {
	var s Stats
	for _, c := range cn.Clients() {
		s = s.Add(c.Stats())
	}
	return s
}
