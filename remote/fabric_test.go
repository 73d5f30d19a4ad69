//go:build fabric

package remote

import (
	"testing"

	"github.com/dmindex/dmindex/internal/memnodetest"
)

// The fabric build runs every transport test on memnode processes serving
// the sockets provider too.
func init() { allTransports = append(allTransports, transportCase{name: "fabric"}) }

// fabricPool creates a pool of cfg on memnode processes built with the
// fabric tag, reached through the sockets provider.
func fabricPool(t testing.TB, cfg Config) *Pool {
	nodes := memnodetest.Start(t, max(cfg.MemoryNodes, 1), memnodetest.Options{Bytes: cfg.NodeBytes,
		OnChipBytes: int64(cfg.OnChipBytes), Tags: "fabric", Args: []string{"--provider", "sockets"}})
	cfg.Fabric = &FabricConfig{MemoryNodes: memnodetest.Addrs(nodes), Token: memnodetest.Token, Provider: "sockets"}
	return newTestPool(t, cfg)
}
