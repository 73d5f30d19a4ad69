package smart_test

import (
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/smart"
)

// TestChurn: with Options.Reclaim, inserting and deleting the same keys,
// with values alternating between size classes, reuses the retired leaves:
// memory stays flat (without Reclaim the same run fills the pool).
func TestChurn(t *testing.T) {
	for _, opts := range []smart.Options{
		{Reclaim: true, ReclaimInterval: time.Millisecond},
		{Reclaim: true, ReclaimInterval: time.Millisecond, OutOfPlaceLeaves: true},
	} {
		name := "in-place"
		if opts.OutOfPlaceLeaves {
			name = "out-of-place"
		}
		t.Run(name, func(t *testing.T) {
			indextest.RunChurn(t, target("smart-reclaim", opts))
		})
	}
}

// TestRestarts: compute nodes that close the tree hand on the leaves they
// retired and the rest of their chunks to the next one that opens it.
func TestRestarts(t *testing.T) {
	indextest.RunRestarts(t, target("smart-reclaim", smart.Options{Reclaim: true, ReclaimInterval: time.Millisecond}))
}
