package remote

import "fmt"

// freeKey names one free list of a compute node: objects of one size on one
// memory node.
type freeKey struct {
	mn   int
	size uint64
}

// Free hands back an object of size bytes at a, allocated by Alloc or
// AllocOn of a client of any compute node, to this client's compute node:
// its later allocations of exactly size bytes on a's memory node reuse it
// (when the alignment asked for fits) before taking new memory. The caller
// guarantees that no client of any compute node can still reach the object,
// e.g. with the epochs of package internal/registry. A reused object holds
// what was last written to it, not zeros: its new owner writes every byte it
// relies on. Free takes no verb and does not change Pool.MemoryUsed, which
// counts what memory nodes handed out.
func (c *Client) Free(a Addr, size int) error {
	if a.IsNil() || a.IsOnChip() || size <= 0 {
		return fmt.Errorf("%w: free of %d bytes at %v", ErrBadRequest, size, a)
	}
	mn := a.MN()
	if mn >= len(c.pool.geom) {
		return fmt.Errorf("%w: free at %v (pool has %d)", ErrUnknownNode, a, len(c.pool.geom))
	}
	if err := checkVerb(c.pool.geom[mn], OpWrite, a, uint64(size)); err != nil {
		return fmt.Errorf("free: %w", err)
	}
	cn := c.cn
	cn.mu.Lock()
	if cn.free == nil {
		cn.free = make(map[freeKey][]Addr)
	}
	k := freeKey{mn, uint64(size)}
	cn.free[k] = append(cn.free[k], a)
	cn.mu.Unlock()
	c.stats.freedBytes.Add(uint64(size))
	return nil
}

// reuse pops an object of size bytes aligned to align from the compute
// node's free list of memory node mn, or returns nil.
func (cn *ComputeNode) reuse(mn int, size, align uint64) Addr {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	k := freeKey{mn, size}
	l := cn.free[k]
	for i := len(l) - 1; i >= 0; i-- {
		if a := l[i]; a.Offset()&(align-1) == 0 {
			l[i] = l[len(l)-1]
			cn.free[k] = l[:len(l)-1]
			return a
		}
	}
	return 0
}

// FreeBytes returns the bytes held in the compute node's free lists (see
// Client.Free).
func (cn *ComputeNode) FreeBytes() uint64 {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	var n uint64
	for k, l := range cn.free {
		n += k.size * uint64(len(l))
	}
	return n
}
