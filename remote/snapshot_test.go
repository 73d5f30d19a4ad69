package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
)

// TestSnapshot checks that pools started from a snapshot see its memory,
// allocator, named regions and clock, and that they and the snapshot are
// independent of each other and of the original pool.
func TestSnapshot(t *testing.T) {
	for _, tc := range []transportCase{{"local", nil}, {"sim", &SimConfig{Seed: 1}}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			src := newTestPool(t, Config{MemoryNodes: 2, Sim: tc.sim})
			c := src.NewComputeNode().NewClient()
			named, err := c.Named(ctx, "region", 64)
			if err != nil {
				t.Fatal(err)
			}
			var addrs []Addr
			for i := range 2 {
				a, err := c.AllocOn(ctx, i, 64, 8)
				if err != nil {
					t.Fatal(err)
				}
				addrs = append(addrs, a)
			}
			write := func(c *Client, a Addr, v uint64) {
				t.Helper()
				if err := c.Write(ctx, a, binary.LittleEndian.AppendUint64(nil, v)); err != nil {
					t.Fatal(err)
				}
			}
			read := func(c *Client, a Addr) uint64 {
				t.Helper()
				buf := make([]byte, 8)
				if err := c.Read(ctx, a, buf); err != nil {
					t.Fatal(err)
				}
				return binary.LittleEndian.Uint64(buf)
			}
			write(c, named, 7)
			for i, a := range addrs {
				write(c, a, uint64(100+i))
			}
			onChip := OnChip(1, 8)
			if _, err := c.FAA(ctx, onChip, 5); err != nil {
				t.Fatal(err)
			}
			snap, err := src.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if tc.sim != nil && (snap.Clock() == 0 || snap.Clock() != src.Now()) {
				t.Fatalf("snapshot clock %v, pool clock %v", snap.Clock(), src.Now())
			}
			used, _ := src.MemoryUsed()
			if want := int64(used[0]+used[1]) + 2*int64(src.Config().OnChipBytes); snap.Bytes() != want {
				t.Fatalf("snapshot holds %d bytes, want %d", snap.Bytes(), want)
			}
			write(c, addrs[0], 999) // after the snapshot: not in it

			var pools []*Pool
			for range 2 {
				p := newTestPool(t, Config{Sim: tc.sim, NodeBytes: 2 << 20, From: snap})
				if p.MemoryNodes() != 2 || p.Config().NodeBytes != 2<<20 {
					t.Fatalf("pool from snapshot: %d memory nodes of %d bytes", p.MemoryNodes(), p.Config().NodeBytes)
				}
				if tc.sim != nil && p.Now() != snap.Clock() {
					t.Fatalf("pool from snapshot starts at %v, want %v", p.Now(), snap.Clock())
				}
				pools = append(pools, p)
			}
			c0, c1 := pools[0].NewComputeNode().NewClient(), pools[1].NewComputeNode().NewClient()
			for _, c := range []*Client{c0, c1} {
				if got, err := c.Named(ctx, "region", 64); err != nil || got != named {
					t.Fatalf("named region after restore: %v, %v; want %v", got, err, named)
				}
				for i, a := range addrs {
					if got := read(c, a); got != uint64(100+i) {
						t.Fatalf("word %d after restore: %d, want %d", i, got, 100+i)
					}
				}
				if got := read(c, onChip); got != 5 {
					t.Fatalf("on-chip word after restore: %d, want 5", got)
				}
				// The allocator continues after the snapshot's allocations.
				a, err := c.AllocOn(ctx, 0, 64, 8)
				if err != nil {
					t.Fatal(err)
				}
				if a == addrs[0] || a == named {
					t.Fatalf("allocation %v after restore hands out memory in use", a)
				}
			}
			write(c0, addrs[1], 1)
			if got := read(c1, addrs[1]); got != 101 {
				t.Fatalf("a write to one restored pool reached another: %d", got)
			}
			if got := read(c, addrs[1]); got != 101 {
				t.Fatalf("a write to a restored pool reached the original: %d", got)
			}
			// The restored pools grew to their own size.
			if _, err := c0.AllocOn(ctx, 0, 1<<20, 64); err != nil {
				t.Fatalf("allocation beyond the snapshot's node size: %v", err)
			}
		})
	}
}

// TestSnapshotErrors checks what Snapshot and Config.From refuse.
func TestSnapshotErrors(t *testing.T) {
	src := newTestPool(t, Config{MemoryNodes: 2, Sim: &SimConfig{}})
	c := src.NewComputeNode().NewClient()
	if _, err := c.AllocOn(context.Background(), 0, 256<<10, 64); err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"fewer memory nodes", Config{MemoryNodes: 1, From: snap}},
		{"smaller than in use", Config{NodeBytes: 64 << 10, From: snap}},
		{"other on-chip size", Config{OnChipBytes: 4096, From: snap}},
		{"shm pool", Config{Shm: &ShmConfig{Dir: t.TempDir()}, From: snap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := NewPool(tc.cfg); !errors.Is(err, ErrBadRequest) {
				if p != nil {
					p.Close()
				}
				t.Fatalf("NewPool: %v, want ErrBadRequest", err)
			}
		})
	}

	t.Run("busy", func(t *testing.T) {
		started := make(chan struct{})
		busy := newTestPool(t, Config{Sim: &SimConfig{}})
		cl := busy.NewComputeNode().NewClient()
		busy.Go(func() {
			close(started)
			cl.Wait(context.Background())
		})
		go busy.Wait()
		<-started
		if _, err := busy.Snapshot(); !errors.Is(err, ErrBusy) {
			t.Fatalf("Snapshot of a running pool: %v, want ErrBusy", err)
		}
		busy.Close()
	})
	t.Run("closed", func(t *testing.T) {
		closed := newTestPool(t, Config{Sim: &SimConfig{}})
		closed.Close()
		if _, err := closed.Snapshot(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Snapshot of a closed pool: %v, want ErrClosed", err)
		}
	})
	t.Run("shm", func(t *testing.T) {
		shm := newTestPool(t, Config{Shm: &ShmConfig{Dir: t.TempDir()}})
		if _, err := shm.Snapshot(); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("Snapshot of a shm pool: %v, want ErrBadRequest", err)
		}
	})
}
