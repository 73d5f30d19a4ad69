package remote

import (
	"context"
	"testing"
)

// TestRoom checks the compute node's estimate of a memory node's free
// bytes: the whole node before any allocation there, then what the
// allocator reported at the last chunk this compute node took, behind every
// transport that serves allocations.
func TestRoom(t *testing.T) {
	ctx := context.Background()
	for _, tc := range allTransports {
		if testing.Short() && tc.name == "tcp" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: 1 << 20, ChunkBytes: 64 << 10})
			cn := p.NewComputeNode()
			if got := cn.Room(1); got != 1<<20 {
				t.Fatalf("Room(1) before any allocation = %d, want the node's %d bytes", got, 1<<20)
			}
			c := cn.NewClient()
			if _, err := c.AllocOn(ctx, 1, 100, 8); err != nil {
				t.Fatal(err)
			}
			used, err := p.MemoryUsed()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cn.Room(1), uint64(1<<20)-used[1]; got != want {
				t.Fatalf("Room(1) after a chunk = %d, want %d (used %v)", got, want, used)
			}
			if got := cn.Room(0); got != 1<<20 {
				t.Fatalf("Room(0), never allocated there by this node = %d", got)
			}
		})
	}
}

// TestMaxAllocBytes checks Pool.MaxAllocBytes behind every transport that
// serves allocations: a fresh memory node gives one allocation of exactly
// that many bytes, and never more.
func TestMaxAllocBytes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range allTransports {
		if testing.Short() && tc.name == "tcp" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			const nodeBytes = 64 << 10
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: nodeBytes})
			max := p.MaxAllocBytes()
			if max <= 0 || max >= nodeBytes {
				t.Fatalf("MaxAllocBytes = %d of a %d-byte node", max, nodeBytes)
			}
			c := p.NewComputeNode().NewClient()
			if _, err := c.AllocOn(ctx, 0, int(max)+8, 8); err == nil {
				t.Fatalf("an allocation of MaxAllocBytes+8 = %d bytes succeeded", max+8)
			}
			if _, err := c.AllocOn(ctx, 0, int(max), 8); err != nil {
				t.Fatalf("an allocation of MaxAllocBytes = %d bytes on a fresh node: %v", max, err)
			}
		})
	}
}
