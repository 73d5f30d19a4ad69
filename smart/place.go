package smart

import (
	"context"
	"errors"

	"github.com/dmindex/dmindex/remote"
)

// Placement and publication of new objects (docs/smart-protocol.md, I3).
//
// A new object goes to the memory node of the slot that will link it while
// that node has room: its WRITE and the linking CAS then share one batch,
// and verbs to one memory node execute in posting order. When that node
// runs low (roomier) or is full, the object goes to another memory node
// with room (the roomiest, or round-robin skipping full ones), and its WRITE completes in a round trip
// of its own before the CAS is posted: verbs to different memory nodes are
// not ordered, neither by RDMA nor by the simulator's Skew mode. link makes
// that choice for every publish.

// allocNear allocates n bytes aligned to align (leafAlign or addrAlign) for
// an object that a slot on memory node mn will link: on mn if it has room, else on another memory
// node. It fails with remote.ErrOutOfMemory only when no memory node has
// room.
func (s *session) allocNear(ctx context.Context, mn, n, align int) (remote.Addr, error) {
	mn = s.roomier(mn)
	if s.full == nil {
		s.full = make([]noRoom, s.c.Pool().MemoryNodes())
	}
	h := &s.full[mn]
	if h.size == 0 || n < h.size || h.skips >= maxRoomSkips {
		a, err := s.allocOn(ctx, mn, n, align)
		switch {
		case err == nil:
			if h.skips >= maxRoomSkips {
				*h = noRoom{}
			}
			return a, nil
		case !errors.Is(err, remote.ErrOutOfMemory):
			return 0, err
		}
		*h = noRoom{size: n}
	} else {
		h.skips++
	}
	return s.allocOn(ctx, -1, n, align)
}

// allocOn is remote.Client.AllocOn, counting the bytes in Tree.placed.
func (s *session) allocOn(ctx context.Context, mn, n, align int) (remote.Addr, error) {
	a, err := s.c.AllocOn(ctx, mn, n, align)
	if err == nil {
		s.t.placed[a.MN()].Add(uint64(n))
	}
	return a, err
}

// lighter returns mn, the memory node of the slot a new chain will hang
// from, unless this compute node has placed more than 17/16 of its fair
// share of bytes there; then the memory node where it placed the fewest.
// A chain's subtree follows it (chainAlloc), and the subtrees under one
// slot are not alike in size when keys are not uniform (e-mail addresses
// share first letters): without the check one memory node took 55% of the
// verbs of YCSB-C over 1 M e-mail keys.
func (t *Tree) lighter(mn int) int {
	var total uint64
	best := mn
	for o := range t.placed {
		p := t.placed[o].Load()
		total += p
		if p < t.placed[best].Load() {
			best = o
		}
	}
	if t.placed[mn].Load()*uint64(len(t.placed))*16 <= total*17 {
		return mn
	}
	return best
}

// roomier returns the memory node a new object for a slot on memory node
// mn goes to: mn while it has more than a sixteenth of its bytes left
// (by the compute node's estimate, remote.ComputeNode.Room), otherwise
// the memory node with the most room if that is at least twice mn's. So a
// memory node that fills ahead of the others stops taking new objects
// while it still has room, instead of taking them until an allocation fails;
// an object away from its slot's node costs its publish one more round trip
// (link).
func (s *session) roomier(mn int) int {
	cn := s.c.ComputeNode()
	room := cn.Room(mn)
	if room >= uint64(s.t.nodeBytes)/16 {
		return mn
	}
	best := mn
	for o := range s.c.Pool().MemoryNodes() {
		if r := cn.Room(o); r >= 2*room && r > cn.Room(best) {
			best = o
		}
	}
	return best
}

// noRoom remembers the smallest allocation a memory node refused the
// session's client, so that objects of that size or larger skip the node
// instead of paying a failing allocation RPC each. Memory may come back
// (reuse), so the node is tried again after maxRoomSkips skips.
type noRoom struct{ size, skips int }

const maxRoomSkips = 64

// onNode reports whether every verb of ops goes to memory node mn.
func onNode(ops []remote.Op, mn int) bool {
	for i := range ops {
		if ops[i].Addr.MN() != mn {
			return false
		}
	}
	return true
}

// link executes ops, the writes (and marks) that pub publishes, then pub,
// whose verbs all go to one memory node: in one batch if every verb of ops
// goes to that node too (posting order), otherwise ops first, in a round
// trip of their own. It returns the batch that executed pub, pub's verbs
// last.
func (s *session) link(ctx context.Context, ops []remote.Op, pub ...remote.Op) ([]remote.Op, error) {
	return s.linkUnder(ctx, 0, ops, pub...)
}

// linkUnder is link for a change made under the lock whose word is at lock
// (a leaf's, the node lock of the locked-internal variant, or nil: none):
// each of its batches is posted by doUnder.
func (s *session) linkUnder(ctx context.Context, lock remote.Addr, ops []remote.Op, pub ...remote.Op) ([]remote.Op, error) {
	if !onNode(ops, pub[0].Addr.MN()) {
		if err := s.doUnder(ctx, lock, ops); err != nil {
			return ops, err
		}
		ops = s.batch()
	}
	ops = append(ops, pub...)
	return ops, s.doUnder(ctx, lock, ops)
}
