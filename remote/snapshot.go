package remote

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrBusy is returned by Pool.Snapshot while goroutines started by Pool.Go
// are still running.
var ErrBusy = errors.New("remote: pool is busy")

// A Snapshot is a copy of the memory nodes of an in-process pool (local or
// simulated) and of the pool's clock, taken by Pool.Snapshot. A pool created
// with Config.From starts from it: the same memory, allocator and named
// regions, a simulator's clock at the snapshot's time, no compute nodes.
// One snapshot may start any number of pools, one after the other or at
// once; it never changes. Its memory lives outside the Go heap and is
// released once the Snapshot is unreachable.
type Snapshot struct {
	cfg   Config     // the snapshotted pool's configuration
	nodes []*memNode // copies: main holds the allocated prefix only
	used  []uint64   // per node, the bytes of main in use
	clock int64      // the simulator's clock in picoseconds (0 for local)
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
		c := &memNode{geom: nodeGeom{main: used, onChip: m.geom.onChip}}
		var err error
		if c.main, err = newWords(c, int(used/8)); err != nil {
			return nil, fmt.Errorf("snapshot of memory node %d: %w", i, err)
		}
		if c.onChip, err = newWords(c, len(m.onChip)); err != nil {
			return nil, fmt.Errorf("snapshot of memory node %d: %w", i, err)
		}
		copyWords(c.main, m.main)
		copyWords(c.onChip, m.onChip)
		snap.nodes = append(snap.nodes, c)
		snap.used = append(snap.used, used)
	}
	return snap, nil
}

// MemoryNodes returns the number of memory nodes in the snapshot.
func (s *Snapshot) MemoryNodes() int { return len(s.nodes) }

// Bytes returns the memory the snapshot holds: the bytes in use of every
// memory node's main region and its on-chip region.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for i, m := range s.nodes {
		n += int64(s.used[i]) + int64(m.geom.onChip)
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
	for i, used := range s.used {
		if uint64(c.NodeBytes) < used {
			return fmt.Errorf("%w: NodeBytes %d is less than the %d bytes memory node %d of the snapshot uses", ErrBadRequest, c.NodeBytes, used, i)
		}
	}
	return nil
}

// restore copies snapshot s into the fresh memory nodes of p and records
// their own size in each header.
func (p *Pool) restore(s *Snapshot) {
	for i, m := range p.mns {
		src := s.nodes[i]
		copyWords(m.main, src.main)
		copyWords(m.onChip, src.onChip)
		atomic.StoreUint64(&m.main[hdrMain], m.geom.main)
	}
}
