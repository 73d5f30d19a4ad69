package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// Retired is an unlinked object waiting for every reader to be done: it is
// freed once every live node published an epoch greater than Tau.
type Retired struct {
	Addr remote.Addr
	Size int
	Tau  uint64
}

// observation is what Reclaim last saw of another node's block.
type observation struct {
	owner, hb uint64
	since     time.Duration // when owner or hb last changed, on our clock
}

// Pin pins the node's current epoch for an operation that may hold
// addresses read from the structure: objects unlinked from now on are not
// freed until Unpin. Pins do not nest.
func (m *Member) Pin() { m.pin.Store(m.n.e.Load() + 1) }

// Unpin ends the member's pin.
func (m *Member) Unpin() { m.pin.Store(0) }

// published is the epoch the node publishes: the least epoch its members
// pinned, or its epoch if none is pinned. Called with mu held.
func (n *Node) published() uint64 {
	p := n.e.Load()
	for _, m := range n.members {
		if v := m.pin.Load(); v != 0 {
			p = min(p, v-1)
		}
	}
	return p
}

// raiseEpoch sets the node's epoch to e if that is later.
func (n *Node) raiseEpoch(e uint64) {
	for {
		old := n.e.Load()
		if e <= old || n.e.CompareAndSwap(old, e) {
			return
		}
	}
}

// Retire hands an object of size bytes that the member's operation just
// unlinked to reclamation: Reclaim frees it once no node can still be
// reading it. The member calls Touch before the unlink (so the node's epoch
// is current).
func (m *Member) Retire(a remote.Addr, size int) {
	n := m.n
	n.mu.Lock()
	n.limbo = append(n.limbo, Retired{Addr: a, Size: size, Tau: n.e.Load() + 1})
	n.mu.Unlock()
}

// Drain removes and returns the objects the node retired and has not freed
// yet, in the order they were retired, for a node that leaves to hand on
// to another (Adopt): its own limbo would be lost with it.
func (n *Node) Drain() []Retired {
	n.mu.Lock()
	defer n.mu.Unlock()
	rs := n.limbo
	n.limbo = nil
	return rs
}

// Adopt adds objects that another node of the pool's registry retired (its
// Drain) to this node's: Reclaim frees them by their Tau like its own. An
// object that was already free may come with any Tau below the global
// epoch: its reuse must then wait for the epoch to pass Tau, so that a new
// life's birth epoch is later than any reference to its old one.
func (n *Node) Adopt(rs []Retired) {
	n.mu.Lock()
	n.limbo = append(n.limbo, rs...)
	n.mu.Unlock()
}

// Reclaim reads every block's heartbeat and published epoch and the global
// epoch (one round trip),
// advances the global epoch if every live node has published it, and frees
// (Options.Free, by default remote.Client.Free) the node's retired objects that no live node can
// still be reading. A node whose block's heartbeat has not moved for a
// Lease on c's clock is not live. It returns the number of objects freed.
func (n *Node) Reclaim(ctx context.Context, c *remote.Client) (int, error) {
	var e [8]byte
	buf := make([]byte, blockBytes*n.opts.Blocks)
	if err := c.Do(ctx, []remote.Op{remote.Read(n.region.Add(epochOff), e[:]), remote.Read(n.body, buf)}); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	global := binary.LittleEndian.Uint64(e[:])
	now := c.Now()
	n.mu.Lock()
	low := n.published()
	for b := range n.opts.Blocks {
		if n.owns(b) {
			continue
		}
		h := buf[blockBytes*b:]
		owner := binary.LittleEndian.Uint64(h)
		if owner&1 == 0 {
			delete(n.seen, b)
			continue
		}
		hb, pub := binary.LittleEndian.Uint64(h[hbOff:]), binary.LittleEndian.Uint64(h[pubOff:])
		o, ok := n.seen[b]
		if !ok || o.owner != owner || o.hb != hb {
			n.seen[b] = observation{owner: owner, hb: hb, since: now}
		} else if now-o.since >= n.opts.Lease {
			continue // dead: left out
		}
		low = min(low, pub)
	}
	n.mu.Unlock()
	if low >= global {
		old, err := c.CAS(ctx, n.region.Add(epochOff), global, global+1)
		if err != nil {
			return 0, fmt.Errorf("registry: %w", err)
		}
		if old == global {
			global++
		} else {
			global = max(global, old)
		}
	}
	n.raiseEpoch(global)
	n.mu.Lock()
	var free []Retired
	kept := n.limbo[:0]
	for _, r := range n.limbo {
		if r.Tau < low {
			free = append(free, r)
		} else {
			kept = append(kept, r)
		}
	}
	clear(n.limbo[len(kept):])
	n.limbo = kept
	n.mu.Unlock()
	release := n.opts.Free
	if release == nil {
		release = c.Free
	}
	for i, r := range free {
		if err := release(r.Addr, r.Size); err != nil {
			n.mu.Lock()
			n.limbo = append(n.limbo, free[i:]...)
			n.mu.Unlock()
			return i, fmt.Errorf("registry: %w", err)
		}
	}
	return len(free), nil
}

// owns reports whether block b is one of the node's. Called with mu held.
func (n *Node) owns(b int) bool {
	for _, blk := range n.blocks {
		if blk.idx == b {
			return true
		}
	}
	return false
}
