package smart

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/dmindex/dmindex/internal/depot"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// depotOff is the offset in the tree's region of the head word of its
// depot (internal/depot): what compute nodes that closed the tree left for
// the next one to open it.
const depotOff = 16

// handOn publishes in the tree's depot what the compute node holds in its
// process and would lose when it closes the tree: the unused rest of the
// chunks of the idle sessions' clients, the unused memory an earlier node
// handed on that no client took yet, and, with Options.Reclaim, the leaves
// it retired and has not freed and those it freed and has not reused. It
// pushes with one of those clients that has not crashed. A failure loses
// that memory, as a killed process does. The leaves freed go with the
// epoch before the node's: each was freed when every live node's published
// epoch was past its retirement tag, and a node publishes at most its
// epoch, so the tag is below that epoch.
func (t *Tree) handOn(ctx context.Context, idle []*session) {
	cs := make([]*remote.Client, len(idle))
	for i, s := range idle {
		cs[i] = s.c
	}
	var es []depot.Entry
	if c := depot.Poster(cs); c != nil && t.opts.Reclaim {
		// A last Reclaim moves the epoch on, which a node that lives for
		// less than a ReclaimInterval would otherwise never do, and frees
		// what it can.
		_, _ = t.reg.Reclaim(ctx, c)
		for _, r := range t.reg.Drain() {
			es = append(es, depot.Entry{Kind: depot.Retired, Addr: r.Addr, Size: uint64(r.Size), Tau: r.Tau})
		}
		tau := max(t.reg.Epoch(), 1) - 1
		for _, x := range t.leaves.Drain() {
			es = append(es, depot.Entry{Kind: depot.Free, Addr: x.Addr, Size: x.Size, Tau: tau})
		}
	}
	_ = depot.HandOn(ctx, t.cn, cs, t.rootSlot.Add(depotOff), es)
}

// adopt takes what compute nodes that closed the tree left in its depot,
// gives the unused memory to the compute node's clients to allocate from,
// and returns the rest, leaves for settle. A failure loses what the depot
// held (a READ that failed after the take) or leaves it for the next node.
func (t *Tree) adopt(ctx context.Context, c *remote.Client) []depot.Entry {
	es, _ := depot.Take(ctx, c, t.rootSlot.Add(depotOff))
	return depot.Reuse(t.cn, es)
}

// giveBack returns to the tree's depot what adopt took, for an Open that
// failed after it: the leaves it returned, and the unused memory it gave
// the compute node, with the rest of c's chunks.
func (t *Tree) giveBack(ctx context.Context, c *remote.Client, leaves []depot.Entry) {
	_ = depot.HandOn(ctx, t.cn, []*remote.Client{c}, t.rootSlot.Add(depotOff), leaves)
}

// settle hands the leaves adopt returned to reclamation, once the node
// joined the registry: a leaf that was free goes to the tree's leaf pool
// if the node's epoch is past its tag (I8: its next life's birth epoch is
// then later than any cache entry that names its last), every other one to
// the registry's limbo (registry.Node.Adopt), which frees it once every
// live node's published epoch is past its tag. Without Options.Reclaim, or
// for entries that cannot be this tree's leaves, nothing.
func (t *Tree) settle(es []depot.Entry) {
	if !t.opts.Reclaim {
		return
	}
	var rs []registry.Retired
	for _, e := range es {
		switch {
		case !t.mayBeLeaf(e.Addr, e.Size):
		case e.Kind == depot.Free && e.Tau < t.reg.Epoch():
			t.leaves.Put(e.Addr, e.Size)
		default:
			rs = append(rs, registry.Retired{Addr: e.Addr, Size: int(e.Size), Tau: e.Tau})
		}
	}
	t.reg.Adopt(rs)
}

// mayBeLeaf reports whether size bytes at a could be a leaf of the tree:
// leaf-aligned, inside one of the pool's memory nodes, of a leaf class's
// size.
func (t *Tree) mayBeLeaf(a remote.Addr, size uint64) bool {
	if a.IsNil() || a.IsOnChip() || a.MN() >= t.cn.Pool().MemoryNodes() || a.Offset()%leafAlign != 0 ||
		size > uint64(t.nodeBytes) || a.Offset()+size > uint64(t.nodeBytes) {
		return false
	}
	c := classFor(int(size))
	return c >= 0 && classBytes(c) == int(size)
}

// checkDepot returns an error wrapping ErrCorrupt if the tree's depot does
// not decode or holds memory that is linked (a Verify walk reached it) or
// that the node holds for reuse as a leaf.
func (t *Tree) checkDepot(ctx context.Context, c *remote.Client, linked map[remote.Addr]bool) error {
	inUse := slices.Collect(maps.Keys(linked))
	for a := range t.leaves.All() {
		inUse = append(inUse, a)
	}
	err := depot.Check(ctx, c, t.rootSlot.Add(depotOff), inUse)
	if errors.Is(err, depot.ErrCorrupt) {
		return corruptf("%v", err)
	}
	return wrapRemote(err)
}
