package sherman

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
)

// TestChurn: inserting and deleting the same keys, with values that change
// size, reuses Sherman's entry slots in place; memory stays flat.
func TestChurn(t *testing.T) {
	indextest.RunChurn(t, contractTarget("sherman", Options{KeySize: 32, ValueSize: 256}))
}

// TestRestarts: compute nodes that close the tree hand on the rest of
// their chunks to the next one that opens it.
func TestRestarts(t *testing.T) {
	indextest.RunRestarts(t, contractTarget("sherman", Options{KeySize: 32, ValueSize: 320}))
}
