package sherman

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"

	"github.com/dmindex/dmindex/remote"
)

var testSeed = testseed.Flag("seed")

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
	info, err := s.verify(true)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return info
}

// ikey returns the 8-byte big-endian key of i.
func ikey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// sumStats adds up the protocol counters of every tree.
func sumStats(trees []*Tree) Stats {
	var st Stats
	for _, tr := range trees {
		s := tr.Stats()
		st.CacheHits += s.CacheHits
		st.CacheMisses += s.CacheMisses
		st.CacheInvalidations += s.CacheInvalidations
		st.GlobalLocks += s.GlobalLocks
		st.HandOvers += s.HandOvers
		st.LockCASFailures += s.LockCASFailures
		st.TornReads += s.TornReads
		st.Retries += s.Retries
		st.LeafSplits += s.LeafSplits
		st.InnerSplits += s.InnerSplits
		st.RootGrowths += s.RootGrowths
		st.UnlinkedSplits += s.UnlinkedSplits
		st.Delegated += s.Delegated
		st.Combined += s.Combined
	}
	return st
}
