package smart_test

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// TestBatteryTransports runs the transport battery with the memory nodes in
// shared files (shm) and in memnode processes (tcp).
func TestBatteryTransports(t *testing.T) {
	for _, tr := range []struct {
		name string
		cfg  func(testing.TB) *remote.Config
	}{{"shm", indextest.ShmConfig}, {"tcp", indextest.TCPConfig}} {
		t.Run(tr.name, func(t *testing.T) {
			indextest.RunTransport(t, indextest.Target{
				Name: "smart-" + tr.name,
				Open: func(cn *remote.ComputeNode, name string) (smart.Index, error) {
					return smart.Open(cn, smart.Options{Name: name})
				},
				Verify: func(ctx context.Context, idx smart.Index) error {
					return idx.(*smart.Tree).Verify(ctx)
				},
				MaxKeyLen:   smart.MaxKeyLen,
				MaxValueLen: smart.MaxValueLen,
				Config:      tr.cfg(t),
			})
		})
	}
}
