package remote_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestConfigRoundTrip checks that Pool.Config asks for the pool it
// describes: NewPool(p.Config()).Config() equals p.Config(), for pools built
// from zero, default and other configurations behind every transport a test
// can run. A disabled on-chip region is reported as -1, not as 0 (which
// asks for the default region).
func TestConfigRoundTrip(t *testing.T) {
	withChip := startServer(t, remote.ServerConfig{Bytes: 1 << 20, OnChipBytes: 4096})
	noChip := startServer(t, remote.ServerConfig{Bytes: 1 << 20, OnChipBytes: -1})
	odd := startServer(t, remote.ServerConfig{Bytes: 1<<20 + 8, OnChipBytes: 1000})
	tcp := func(servers ...*testServer) *remote.TCPConfig {
		c := &remote.TCPConfig{Token: testToken}
		for _, s := range servers {
			c.MemoryNodes = append(c.MemoryNodes, s.addr)
		}
		return c
	}
	snapPool, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, OnChipBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer snapPool.Close()
	snap, err := snapPool.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	const disabled = -1
	cases := []struct {
		name   string
		cfg    func(t *testing.T) remote.Config
		onChip int // the OnChipBytes Config must report
	}{
		{"local/zero", func(*testing.T) remote.Config { return remote.Config{} }, remote.DefaultOnChipBytes},
		{"local/defaults", func(*testing.T) remote.Config {
			return remote.Config{MemoryNodes: 1, NodeBytes: remote.DefaultNodeBytes, OnChipBytes: remote.DefaultOnChipBytes}
		}, remote.DefaultOnChipBytes},
		{"local/other", func(*testing.T) remote.Config {
			return remote.Config{MemoryNodes: 3, NodeBytes: 1<<20 + 3, OnChipBytes: 1001, ChunkBytes: 100}
		}, 1008},
		{"local/no-on-chip", func(*testing.T) remote.Config { return remote.Config{NodeBytes: 1 << 20, OnChipBytes: -1} }, disabled},
		{"local/no-on-chip-other", func(*testing.T) remote.Config { return remote.Config{NodeBytes: 1 << 20, OnChipBytes: -4096} }, disabled},
		{"local/from-snapshot", func(*testing.T) remote.Config { return remote.Config{From: snap} }, disabled},
		{"sim/zero", func(*testing.T) remote.Config { return remote.Config{Sim: &remote.SimConfig{}} }, remote.DefaultOnChipBytes},
		{"sim/other", func(*testing.T) remote.Config {
			return remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, OnChipBytes: 512, ChunkBytes: 64 << 10,
				Sim: &remote.SimConfig{Ordering: remote.Strict, Seed: 7}}
		}, 512},
		{"sim/no-on-chip", func(*testing.T) remote.Config {
			return remote.Config{NodeBytes: 1 << 20, OnChipBytes: -1, Sim: &remote.SimConfig{Seed: 1}}
		}, disabled},
		{"shm/zero", func(t *testing.T) remote.Config { return remote.Config{Shm: &remote.ShmConfig{Dir: t.TempDir()}} }, remote.DefaultOnChipBytes},
		{"shm/other", func(t *testing.T) remote.Config {
			return remote.Config{MemoryNodes: 2, NodeBytes: 1<<20 + 5, OnChipBytes: 100, ChunkBytes: 1000, Shm: &remote.ShmConfig{Dir: t.TempDir()}}
		}, 104},
		{"shm/no-on-chip", func(t *testing.T) remote.Config {
			return remote.Config{NodeBytes: 1 << 20, OnChipBytes: -1, Shm: &remote.ShmConfig{Dir: t.TempDir()}}
		}, disabled},
		{"tcp/zero", func(*testing.T) remote.Config { return remote.Config{TCP: tcp(withChip)} }, 4096},
		{"tcp/other", func(*testing.T) remote.Config {
			return remote.Config{MemoryNodes: 1, NodeBytes: 1<<20 + 8, OnChipBytes: 1000, ChunkBytes: 4096, TCP: tcp(odd)}
		}, 1000},
		{"tcp/no-on-chip", func(*testing.T) remote.Config { return remote.Config{TCP: tcp(noChip)} }, disabled},
		{"tcp/no-on-chip-asked", func(*testing.T) remote.Config {
			return remote.Config{OnChipBytes: -1, TCP: tcp(noChip)}
		}, disabled},
		{"tcp/mixed", func(t *testing.T) remote.Config {
			return remote.Config{TCP: tcp(startServer(t, remote.ServerConfig{OnChipBytes: 4096}), startServer(t, remote.ServerConfig{OnChipBytes: -1}))}
		}, disabled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := remote.NewPool(tc.cfg(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c1 := p.Config()
			if c1.OnChipBytes != tc.onChip {
				t.Errorf("Config().OnChipBytes = %d, want %d", c1.OnChipBytes, tc.onChip)
			}
			if c1.MemoryNodes == 0 || c1.NodeBytes == 0 || c1.OnChipBytes == 0 || c1.ChunkBytes == 0 {
				t.Errorf("Config() leaves a default unfilled: %+v", c1)
			}
			p2, err := remote.NewPool(c1)
			if tc.name == "tcp/mixed" {
				// The nodes differ: the configuration of the smallest
				// refuses the other (Config's documentation).
				if !errors.Is(err, remote.ErrBadNode) {
					t.Errorf("NewPool(p.Config()) of mixed nodes: %v, want ErrBadNode", err)
				}
				if err == nil {
					p2.Close()
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPool(p.Config()): %v (config %+v)", err, c1)
			}
			defer p2.Close()
			if c2 := p2.Config(); !reflect.DeepEqual(c1, c2) {
				t.Errorf("NewPool(p.Config()).Config() differs:\n%+v\n%+v", c2, c1)
			}
		})
	}
}

// TestConfigIsACopy checks that changing what Config returns leaves the
// pool's configuration alone.
func TestConfigIsACopy(t *testing.T) {
	s := startServer(t, remote.ServerConfig{})
	for _, cfg := range []remote.Config{
		{NodeBytes: 1 << 20, Sim: &remote.SimConfig{Seed: 3}},
		{NodeBytes: 1 << 20, Shm: &remote.ShmConfig{Dir: t.TempDir()}},
		{TCP: &remote.TCPConfig{MemoryNodes: []string{s.addr}, Token: testToken}},
	} {
		p, err := remote.NewPool(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := describe(p.Config())
		c := p.Config()
		switch {
		case c.Sim != nil:
			c.Sim.Seed, c.Sim.Profile.RTT = 99, 1
		case c.Shm != nil:
			c.Shm.Dir = "elsewhere"
		case c.TCP != nil:
			c.TCP.MemoryNodes[0], c.TCP.Timeout = "elsewhere:1", 1
		}
		if after := describe(p.Config()); after != before {
			t.Errorf("%s: changing Config's result changed the pool's:\n%s\n%s", p.Transport(), after, before)
		}
		p.Close()
	}
}

// TestDisabledOnChipRefusesRegion checks that OnChipBytes -1 asks for memory
// nodes without an on-chip region over TCP, as over shm: a node that has
// one is refused, not adopted.
func TestDisabledOnChipRefusesRegion(t *testing.T) {
	s := startServer(t, remote.ServerConfig{OnChipBytes: 4096})
	p, err := remote.NewPool(remote.Config{OnChipBytes: -1, TCP: &remote.TCPConfig{MemoryNodes: []string{s.addr}, Token: testToken}})
	if err == nil {
		p.Close()
	}
	if !errors.Is(err, remote.ErrBadNode) {
		t.Fatalf("NewPool(OnChipBytes -1) of a node with an on-chip region: %v, want ErrBadNode", err)
	}
}

// describe prints c with what its pointers point to.
func describe(c remote.Config) string {
	bare := c
	bare.Sim, bare.Shm, bare.TCP, bare.Fabric, bare.From = nil, nil, nil, nil, nil
	s := fmt.Sprintf("%+v", bare)
	if c.Sim != nil {
		s += fmt.Sprintf(" Sim %+v", *c.Sim)
	}
	if c.Shm != nil {
		s += fmt.Sprintf(" Shm %+v", *c.Shm)
	}
	if c.TCP != nil {
		s += fmt.Sprintf(" TCP %+v", *c.TCP)
	}
	return s
}
