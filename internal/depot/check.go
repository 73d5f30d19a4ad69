package depot

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/dmindex/dmindex/remote"
)

// Check reads the depot whose head word is at head, with c, without
// taking it, and returns an error wrapping ErrCorrupt if a record does not
// decode, if the memory of two entries or records overlaps, or if one of
// inUse (the addresses of the structure's linked objects, say, or of those
// a compute node holds for reuse) lies inside an entry's or a record's
// memory: memory handed on is then also in use. No
// operation on the structure may run meanwhile (a Take frees the records
// as it reads them). It is for consistency checks such as an index's
// Verify.
func Check(ctx context.Context, c *remote.Client, head remote.Addr, inUse []remote.Addr) error {
	first, err := readHead(ctx, c, head)
	if err != nil {
		return fmt.Errorf("depot: %w", err)
	}
	es, recs, err := readRecords(ctx, c, first)
	if err != nil {
		return err
	}
	type span struct {
		remote.Extent
		what string
	}
	spans := make([]span, 0, len(es)+len(recs))
	for _, e := range es {
		spans = append(spans, span{remote.Extent{Addr: e.Addr, Size: e.Size}, e.Kind.String() + " entry"})
	}
	for _, r := range recs {
		spans = append(spans, span{r, "record"})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.Addr, b.Addr) })
	for i := 1; i < len(spans); i++ {
		if p, q := spans[i-1], spans[i]; p.Addr.MN() == q.Addr.MN() && p.Addr.Offset()+p.Size > q.Addr.Offset() {
			return fmt.Errorf("depot: %w: %s of %d bytes at %v overlaps %s of %d bytes at %v", ErrCorrupt, p.what, p.Size, p.Addr, q.what, q.Size, q.Addr)
		}
	}
	for _, a := range inUse {
		i, _ := slices.BinarySearchFunc(spans, a, func(s span, a remote.Addr) int { return cmp.Compare(s.Addr, a) })
		// The span starting at or before a, if it starts on a's node.
		if i < len(spans) && spans[i].Addr == a {
			return fmt.Errorf("depot: %w: %s of %d bytes at %v is in use", ErrCorrupt, spans[i].what, spans[i].Size, a)
		}
		if i > 0 {
			if s := spans[i-1]; s.Addr.MN() == a.MN() && s.Addr.Offset()+s.Size > a.Offset() {
				return fmt.Errorf("depot: %w: %s of %d bytes at %v holds %v, which is in use", ErrCorrupt, s.what, s.Size, s.Addr, a)
			}
		}
	}
	return nil
}
