package sherman

import (
	"context"
	"errors"

	"github.com/dmindex/dmindex/internal/depot"
	"github.com/dmindex/dmindex/remote"
)

// The word at offMetaDepot of the tree's meta region is the head of its
// depot (internal/depot): the memory compute nodes that closed the tree
// left for the next one to open it. Pages are never freed, so all of it is
// memory never handed out.

// handOn publishes in the tree's depot the unused rest of the chunks of
// the idle sessions' clients and the unused memory an earlier node handed
// on that no client took yet: what the compute node would lose when it
// closes the tree. It pushes with one of those clients that has not
// crashed. A failure loses that memory, as a killed process does.
func (t *Tree) handOn(ctx context.Context, idle []*session) {
	cs := make([]*remote.Client, len(idle))
	for i, s := range idle {
		cs[i] = s.c
	}
	_ = depot.HandOn(ctx, t.cn, cs, t.meta.Add(offMetaDepot), nil)
}

// adopt gives the memory that compute nodes which closed the tree left in
// its depot to this one's clients. A failure loses what the depot held (a
// READ that failed after the take) or leaves it for the next node.
func (s *session) adopt(ctx context.Context) {
	es, _ := depot.Take(ctx, s.c, s.t.meta.Add(offMetaDepot))
	depot.Reuse(s.t.cn, es) // nothing but Unused memory is ever pushed
}

// giveBack returns to the tree's depot, for an Open that failed, the
// memory adopt gave the compute node and the rest of s's chunks.
func (s *session) giveBack(ctx context.Context) {
	if !s.t.meta.IsNil() {
		_ = depot.HandOn(ctx, s.t.cn, []*remote.Client{s.c}, s.t.meta.Add(offMetaDepot), nil)
	}
}

// checkDepot returns an error wrapping ErrCorrupt if the tree's depot does
// not decode or holds memory where one of pages (the linked pages) starts.
func (s *session) checkDepot(ctx context.Context, pages []remote.Addr) error {
	err := depot.Check(ctx, s.c, s.t.meta.Add(offMetaDepot), pages)
	if errors.Is(err, depot.ErrCorrupt) {
		return corrupt("S7: %v", err)
	}
	return err
}
