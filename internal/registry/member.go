package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// Member is one registered client: its slot, incarnation and lock tag, and
// its epoch pin. A Member is used by one goroutine at a time, like the
// remote.Client it stands for.
type Member struct {
	n    *Node
	blk  *block
	k    int
	inc  uint64
	tag  uint64
	pin  atomic.Uint64 // pinned epoch + 1; 0 when not pinned
	redo []redoSlot    // per memory node (redo.go)
	born time.Duration // when tag was created, on the creating client's clock (LockedAt)
}

// Register gives c a client slot of the node (claiming another block if
// every slot is taken) in a new incarnation, and marks it live.
func (n *Node) Register(ctx context.Context, c *remote.Client) (*Member, error) {
	born := c.Now()
	for attempt := 0; ; attempt++ {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, ErrClosed
		}
		blk, k := n.freeSlot()
		if blk == nil {
			// One member claims the next block; the others wait for its
			// slots rather than claim a block each (a compute node whose
			// clients all start at once would take the whole registry).
			claiming := n.claiming
			n.claiming = true
			n.mu.Unlock()
			if claiming {
				// Wait with a verb: a simulated client that only backs
				// off never hands the claimer the token.
				c.Backoff(attempt)
				if err := c.Read(ctx, n.region, make([]byte, 8)); err != nil {
					return nil, fmt.Errorf("registry: %w", err)
				}
				continue
			}
			_, err := n.claim(ctx, c)
			n.mu.Lock()
			n.claiming = false
			n.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		}
		blk.used[k] = true
		blk.incs[k]++
		m := &Member{n: n, blk: blk, k: k, inc: blk.incs[k], born: born}
		m.tag = tag(blk.idx, k, m.inc)
		n.mu.Unlock()
		if err := m.writeState(ctx, c, stateLive); err != nil {
			n.mu.Lock()
			blk.used[k] = false
			n.mu.Unlock()
			return nil, err
		}
		n.mu.Lock()
		n.members = append(n.members, m)
		n.mu.Unlock()
		return m, nil
	}
}

// freeSlot returns a block and slot not in use, or nil. Called with mu held.
func (n *Node) freeSlot() (*block, int) {
	for _, b := range n.blocks {
		for k, used := range b.used {
			if !used {
				return b, k
			}
		}
	}
	return nil, 0
}

// Tag returns the member's lock tag: bit 62 set, and the block, slot and
// incarnation that Node.Dead reads to judge the holder of a lock.
func (m *Member) Tag() uint64 { return m.tag }

// Renew gives the member a new incarnation of its client slot, and so a new
// Tag, and marks it live: a waiter that judged the old tag dead (this node
// was silent for a lease) now also finds it replaced, and a lock word the
// member moves from its old tag to the new one with a CAS proves that no
// waiter took the lock over meanwhile (docs/recovery.md, "Stale writers").
func (m *Member) Renew(ctx context.Context, c *remote.Client) (old uint64, err error) {
	n := m.n
	n.mu.Lock()
	m.blk.incs[m.k]++
	inc := m.blk.incs[m.k]
	n.mu.Unlock()
	old = m.tag
	m.inc, m.tag, m.born = inc, tag(m.blk.idx, m.k, inc), c.Now()
	return old, m.writeState(ctx, c, stateLive)
}

// Close marks the member's slot free; its tag names nobody afterwards. A
// lock still holding the tag is judged dead at once.
func (m *Member) Close(ctx context.Context, c *remote.Client) error {
	return m.leave(ctx, c, stateFree)
}

// MarkDead records that the member's client was stopped in the middle of
// its work (an injected fault, or a batch of it that failed:
// remote.Client.Crashed): its state word says dead,
// so a waiter judges a lock holding its tag dead at once instead of after a
// lease, and its pin no longer holds reclamation back. c is another client
// of the node, since the member's own no longer works. If it fails (c was
// stopped too), the member keeps its slot and MarkDead may be called again.
func (m *Member) MarkDead(ctx context.Context, c *remote.Client) error {
	return m.leave(ctx, c, stateDead)
}

// leave writes the member's final state and frees its slot for a new
// incarnation. If the write fails (c crashed, say), the slot stays the
// member's, so that the call can be repeated with another client: freeing
// it would let a new incarnation register there, whose live state a
// repeated call would then overwrite.
func (m *Member) leave(ctx context.Context, c *remote.Client, state uint64) error {
	err := m.writeState(ctx, c, state)
	if err != nil {
		return err
	}
	n := m.n
	n.mu.Lock()
	m.blk.used[m.k] = false
	for i, o := range n.members {
		if o == m {
			n.members = append(n.members[:i], n.members[i+1:]...)
			break
		}
	}
	n.mu.Unlock()
	return nil
}

func (m *Member) writeState(ctx context.Context, c *remote.Client, state uint64) error {
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], m.inc<<2|state)
	if err := c.Write(ctx, m.n.clientAddr(m.blk.idx, m.k), w[:]); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// Touch advances the node's heartbeat if Interval has passed since the last
// one, with an unsignaled WRITE of each of its blocks' heartbeat and
// published epoch (no round trip). A member calls it when an operation
// starts and at least every Interval while it waits holding a lock.
//
// If more than Lease/2 passed since the last heartbeat, other nodes may
// have judged this node dead (on their clocks, after a Lease) and taken its
// locks over; Touch then sends the heartbeat signaled, refreshes the node's
// epoch from the global one in the same batch, and returns stale = true:
// the caller must not write under a lock it took before without checking
// that it still holds it.
func (m *Member) Touch(ctx context.Context, c *remote.Client) (stale bool, err error) {
	n := m.n
	now := c.Now()
	if now-time.Duration(n.lastBeat.Load()) < n.opts.Interval {
		return false, nil
	}
	n.mu.Lock()
	since := now - time.Duration(n.lastBeat.Load())
	if since < n.opts.Interval {
		n.mu.Unlock()
		return false, nil
	}
	if since >= n.opts.Lease/2 {
		n.gaps.Add(1)
		n.gapEnd.Store(int64(now))
	}
	n.lastBeat.Store(int64(now))
	n.beats++
	beat := n.beatBytes()
	ops := make([]remote.Op, 0, len(n.blocks)+1)
	for _, b := range n.blocks {
		ops = append(ops, remote.Write(n.blockAddr(b.idx).Add(hbOff), beat))
	}
	n.mu.Unlock()
	if since < n.opts.Lease/2 {
		if err := c.Post(ctx, ops); err != nil {
			return false, fmt.Errorf("registry: %w", err)
		}
		return false, nil
	}
	var e [8]byte
	ops = append(ops, remote.Read(n.region.Add(epochOff), e[:]))
	if err := c.Do(ctx, ops); err != nil {
		return true, fmt.Errorf("registry: %w", err)
	}
	n.raiseEpoch(binary.LittleEndian.Uint64(e[:]))
	return true, nil
}

// Gen returns the node's heartbeat generation: it changes when a heartbeat
// leaves after a gap in which other nodes may have judged this one dead.
// An operation records it when it pins (after Touch) and asks Lost before
// it uses what it read.
func (n *Node) Gen() uint64 { return n.gaps.Load() }

// Lost reports whether other nodes may have judged this node dead since
// Gen returned gen, at time now on the caller's clock: a heartbeat left
// after a gap of Lease/2 or more, or the last one is that old by now. Such
// a node's pins may have been ignored and the objects they protected
// reused: an operation that finds itself lost must not use an address it
// read before, and starts again (Touch, then Pin). Lease/2 leaves the
// other half of the lease for the observers' clocks and the network.
func (n *Node) Lost(now time.Duration, gen uint64) bool {
	return gen != n.gaps.Load() || now-time.Duration(n.lastBeat.Load()) >= n.opts.Lease/2
}

// Judged reports whether another node may have judged this one dead and
// taken over a lock word holding a member's tag after from, at time now on
// the caller's clock (docs/recovery.md, "Stale writers"): a heartbeat that
// ended a gap of Lease/2 or more left after from, or the last one is Lease/2
// old by now. A member holding a lock calls Touch, then Judged, before each
// write under it, with from as returned by Member.LockedAt when it set the
// word, or the time it posted the CAS that moved the word to its renewed
// tag (a waiter can only judge a word it has watched for a Lease, and
// nobody saw a new tag before). Unlike the stale result of Touch, which
// only the member whose call sent the heartbeat sees, Judged sees every
// member's.
func (n *Node) Judged(from, now time.Duration) bool {
	return n.gapEnd.Load() > int64(from) || now-time.Duration(n.lastBeat.Load()) >= n.opts.Lease/2
}

// WriteBy returns the deadline of a batch written under a lock
// (remote.Client.DoBy), as of the heartbeats sent so far: half a lease after
// the last one. A batch that leaves by then leaves before the node has been
// silent for half a lease, so before any waiter can have watched its tag
// stand still for a lease. Read it before Judged: a heartbeat that ends a
// gap after the check comes at WriteBy or later.
func (n *Node) WriteBy() time.Duration {
	return time.Duration(n.lastBeat.Load()) + n.opts.Lease/2
}

// LockedAt returns the from of Node.Judged for a lock word the member set
// to its tag at time t: a waiter whose judgement of the tag came from a
// read before t (of an earlier word holding it) acts on it, and may take
// the new word over, up to Lease/2 later; but nobody can have judged the
// tag before it was created (Register, Renew). So after a gap in the
// heartbeats each member renews at most once (its first lock within Lease/2
// of the gap), not every lock it takes in that time.
func (m *Member) LockedAt(t time.Duration) time.Duration {
	return max(t-m.n.opts.Lease/2, m.born)
}

// beatBytes returns the next heartbeat record: the counter and the epoch
// the node publishes. Called with mu held.
func (n *Node) beatBytes() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, n.beats)
	binary.LittleEndian.PutUint64(b[8:], n.published())
	return b
}
