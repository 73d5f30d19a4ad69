package sherman

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/index"

	"github.com/dmindex/dmindex/remote"
)

// newPool returns a pool closed at the end of the test.
func newPool(t testing.TB, cfg remote.Config) *remote.Pool {
	t.Helper()
	if cfg.NodeBytes == 0 {
		cfg.NodeBytes = 64 << 20
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = 128 << 10
	}
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// openTree opens a tree on a new compute node of p.
func openTree(t testing.TB, p *remote.Pool, opts Options) *Tree {
	t.Helper()
	tr, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// verify runs the strict Verify and fails the test on error.
func verify(t testing.TB, tr *Tree) treeInfo {
	t.Helper()
	s, err := tr.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	info, err := s.verify(context.Background(), true)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return info
}

// ikey returns the 8-byte big-endian key of i.
func ikey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// sumStats adds up the counters of every tree.
func sumStats(trees []*Tree) index.Stats {
	var st index.Stats
	for _, tr := range trees {
		st = st.Add(tr.Stats())
	}
	return st
}
