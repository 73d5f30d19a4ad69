package remote

import (
	"fmt"
	"sync/atomic"
	"time"
)

// A Snapshot is a copy of the memory nodes of an in-process pool (local or
// simulated) and of the pool's clock, taken by Pool.Snapshot. A pool created
// with Config.From starts from it: the same memory, allocator and named
// regions, a simulator's clock at the snapshot's time, no compute nodes.
// One snapshot may start any number of pools, one after the other or at
// once; it never changes. On Linux its memory is a memory file outside the
// Go heap, which the pools started from it share until they write a page
// (copy on write); it is released once the Snapshot and those pools are
// unreachable.
type Snapshot struct {
	cfg   Config // the snapshotted pool's configuration
	nodes []frozenNode
	clock int64 // the simulator's clock in picoseconds (0 for local)
}

// frozenNode is one memory node of a snapshot.
type frozenNode struct {
	used   uint64   // bytes of the main region in use
	main   *frozen  // those bytes
	onChip []uint64 // the on-chip region
}

// Snapshot copies the pool's memory nodes (the bytes their allocators have
// handed out, and the on-chip regions) and its clock. The pool must be
// in-process (local or sim; ErrBadRequest otherwise) and idle: no goroutine
// started by Go running (ErrBusy) and no client in a call. Compute nodes,
// clients and their caches are not part of a snapshot: a pool started from
// it looks like the memory nodes after every client has gone.
func (p *Pool) Snapshot() (*Snapshot, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if p.mns == nil || p.cfg.Shm != nil {
		return nil, fmt.Errorf("%w: only in-process pools (local, sim) can be snapshotted, not %s", ErrBadRequest, p.Transport())
	}
	snap := &Snapshot{cfg: p.cfg}
	if s, ok := p.t.(*sim); ok {
		s.mu.Lock()
		live := s.live
		snap.clock = s.clock
		s.mu.Unlock()
		if live > 0 {
			return nil, fmt.Errorf("%w: %d goroutine(s) started by Go still running", ErrBusy, live)
		}
	}
	for i, m := range p.mns {
		used := nodeUsed(m.main)
		f, err := freeze(m.main[:used/8])
		if err != nil {
			return nil, fmt.Errorf("snapshot of memory node %d: %w", i, err)
		}
		onChip := make([]uint64, len(m.onChip))
		copyWords(onChip, m.onChip)
		snap.nodes = append(snap.nodes, frozenNode{used: used, main: f, onChip: onChip})
	}
	return snap, nil
}

// MemoryNodes returns the number of memory nodes in the snapshot.
func (s *Snapshot) MemoryNodes() int { return len(s.nodes) }

// Bytes returns the memory the snapshot holds: the bytes in use of every
// memory node's main region and its on-chip region.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for _, f := range s.nodes {
		n += int64(f.used) + 8*int64(len(f.onChip))
	}
	return n
}

// Clock returns the simulator's virtual time when the snapshot was taken
// (zero for a pool of the local transport).
func (s *Snapshot) Clock() time.Duration { return psDur(s.clock) }

// copyWords copies src into the zeroed dst word by word with atomic loads
// (a verb of a plain goroutine still in flight is never a data race),
// leaving zero words unwritten: pages of src never written read as the
// kernel's zero page, and the pages of dst that receive only zeros are
// never touched, so memory a node reserved but never used costs nothing
// in the copy.
func copyWords(dst, src []uint64) {
	for i := range min(len(dst), len(src)) {
		if v := atomic.LoadUint64(&src[i]); v != 0 {
			dst[i] = v
		}
	}
}

// fromSnapshot checks c against its snapshot and fills in what c leaves to
// it: the number of memory nodes, their size and their on-chip size.
func (c *Config) fromSnapshot() error {
	s := c.From
	if c.Shm != nil || c.TCP != nil || c.Fabric != nil {
		return fmt.Errorf("%w: From needs in-process memory nodes (local or sim)", ErrBadRequest)
	}
	if c.MemoryNodes == 0 {
		c.MemoryNodes = len(s.nodes)
	}
	if c.NodeBytes == 0 {
		c.NodeBytes = s.cfg.NodeBytes
	}
	if c.OnChipBytes == 0 {
		c.OnChipBytes = s.cfg.OnChipBytes
	}
	if c.MemoryNodes != len(s.nodes) {
		return fmt.Errorf("%w: %d memory nodes from a snapshot of %d", ErrBadRequest, c.MemoryNodes, len(s.nodes))
	}
	if c.OnChipBytes != s.cfg.OnChipBytes {
		return fmt.Errorf("%w: OnChipBytes %d from a snapshot with %d", ErrBadRequest, c.OnChipBytes, s.cfg.OnChipBytes)
	}
	for i, f := range s.nodes {
		if uint64(c.NodeBytes) < f.used {
			return fmt.Errorf("%w: NodeBytes %d is less than the %d bytes memory node %d of the snapshot uses", ErrBadRequest, c.NodeBytes, f.used, i)
		}
	}
	return nil
}

// newMemNodeFrom returns a node of geometry g that starts as f, with its own
// size in its header.
func newMemNodeFrom(g nodeGeom, f *frozenNode) (*memNode, error) {
	m := &memNode{geom: g}
	var err error
	if m.main, err = thaw(m, f.main, int(g.main/8)); err != nil {
		return nil, err
	}
	if m.onChip, err = newWords(m, int(g.onChip/8)); err != nil {
		return nil, err
	}
	copyWords(m.onChip, f.onChip)
	atomic.StoreUint64(&m.main[hdrMain], g.main)
	return m, nil
}
