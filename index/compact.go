package index

import "context"

// Compacter is implemented by indexes that can lay out the remote memory of
// a key range again so that later scans of it read less (SMART: its leaves,
// one per pair, moved next to one another in key order, so that a scan
// reads many of them with one READ). Compaction changes no pair: it runs
// beside every other operation of any compute node, which see the same
// pairs as they would without it.
type Compacter interface {
	// Compact lays out the pairs with lo <= key < hi (nil hi: no upper
	// bound) and returns how many it moved. A pair written while it runs
	// may be left where it is. It fails only if the index fails (the
	// context, a closed index, no memory for the new layout); what it moved
	// until then stays moved.
	Compact(ctx context.Context, lo, hi []byte) (int, error)
}
