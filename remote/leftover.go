package remote

import "fmt"

// Extent is size bytes of a memory node's main region at Addr.
type Extent struct {
	Addr Addr
	Size uint64
}

// Leftovers removes and returns the unused rest of the client's chunks
// (see Client.Alloc), one extent per memory node that has one: memory a
// memory node handed out that no allocation of the client has used. The
// client's later allocations fetch new chunks. A structure whose compute
// node leaves hands them on (ComputeNode.Reuse), so that the memory is not
// lost with the process; nothing else reaches them. The client must not be
// in use by another goroutine.
func (c *Client) Leftovers() []Extent {
	var out []Extent
	for mn := range c.chunks {
		ch := &c.chunks[mn]
		if ch.cur != 0 && ch.cur < ch.end {
			out = append(out, Extent{MakeAddr(mn, ch.cur), ch.end - ch.cur})
		}
		*ch = chunk{}
	}
	return out
}

// Reuse gives the compute node an extent of unused memory, such as the
// Leftovers of a client of any compute node of the pool: when a client's
// chunk of e's memory node runs out, it takes the extent as its next chunk
// before asking the memory node for a new one, if the allocation fits in
// it. The caller guarantees that nobody else uses or reaches the memory.
// Reuse takes no verb and does not change Pool.MemoryUsed, which counts
// what memory nodes handed out.
func (cn *ComputeNode) Reuse(e Extent) error {
	if e.Addr.IsNil() || e.Addr.IsOnChip() || e.Size == 0 {
		return fmt.Errorf("%w: reuse of %d bytes at %v", ErrBadRequest, e.Size, e.Addr)
	}
	mn := e.Addr.MN()
	if mn >= len(cn.pool.geom) {
		return fmt.Errorf("%w: reuse at %v (pool has %d)", ErrUnknownNode, e.Addr, len(cn.pool.geom))
	}
	if err := checkVerb(cn.pool.geom[mn], OpWrite, e.Addr, e.Size); err != nil {
		return fmt.Errorf("reuse: %w", err)
	}
	cn.mu.Lock()
	cn.spare = append(cn.spare, e)
	cn.mu.Unlock()
	return nil
}

// Spares removes and returns the extents given to Reuse that no client has
// taken as a chunk yet, for a structure that leaves to hand on with its
// clients' Leftovers.
func (cn *ComputeNode) Spares() []Extent {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	es := cn.spare
	cn.spare = nil
	return es
}

// SpareBytes returns the bytes of the extents given to Reuse that no
// client has taken as a chunk yet.
func (cn *ComputeNode) SpareBytes() uint64 {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	var n uint64
	for _, e := range cn.spare {
		n += e.Size
	}
	return n
}

// takeSpare removes and returns an extent of memory node mn given to Reuse
// that holds size bytes aligned to align, or false if there is none.
func (cn *ComputeNode) takeSpare(mn int, size, align uint64) (chunk, bool) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for i, e := range cn.spare {
		if e.Addr.MN() != mn {
			continue
		}
		ch := chunk{cur: e.Addr.Offset(), end: e.Addr.Offset() + e.Size}
		if !ch.fits(size, align) {
			continue
		}
		cn.spare = append(cn.spare[:i], cn.spare[i+1:]...)
		return ch, true
	}
	return chunk{}, false
}
