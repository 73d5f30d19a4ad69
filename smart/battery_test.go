package smart_test

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// TestBattery runs the contract battery every index must pass.
func TestBattery(t *testing.T) {
	indextest.Run(t, indextest.Target{
		Name: "smart",
		Open: func(cn *remote.ComputeNode, name string) (smart.Index, error) {
			return smart.Open(cn, smart.Options{Name: name})
		},
		Verify: func(ctx context.Context, idx smart.Index) error {
			return idx.(*smart.Tree).Verify(ctx)
		},
		MaxKeyLen:   smart.MaxKeyLen,
		MaxValueLen: smart.MaxValueLen,
	})
}
