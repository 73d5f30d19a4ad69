package smart_test

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// TestBatteryTransports runs the transport battery with the memory nodes in
// shared files (shm) and in memnode processes (tcp, and fabric in the fabric build).
func TestBatteryTransports(t *testing.T) {
	for _, tr := range indextest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			tr.Run(t, indextest.Target{
				Name: "smart-" + tr.Name,
				Open: func(cn *remote.ComputeNode, name string) (smart.Index, error) {
					return smart.Open(cn, smart.Options{Name: name})
				},
				Verify: func(ctx context.Context, idx smart.Index) error {
					return idx.(*smart.Tree).Verify(ctx)
				},
				MaxKeyLen:   smart.MaxKeyLen,
				MaxValueLen: smart.MaxValueLen,
			})
		})
	}
}
