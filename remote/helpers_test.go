package remote

import (
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

var testSeed = testseed.Flag("seed")

// transportCase is one way to run a pool.
type transportCase struct {
	name string
	sim  *SimConfig
}

// allTransports runs the same memory behind every transport and ordering.
var allTransports = []transportCase{
	{"local", nil},
	{"sim-inorder", &SimConfig{Ordering: InOrder, Seed: 1}},
	{"sim-strict", &SimConfig{Ordering: Strict, Seed: 1}},
}

// newTestPool creates a pool closed at the end of the test. NodeBytes
// defaults to 1 MiB: re-zeroing the default 256 MiB per pool would dominate
// the package's test time.
func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.NodeBytes == 0 {
		cfg.NodeBytes = 1 << 20
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// simConfig returns a copy of sc with the given ordering and seed.
func simConfig(o Ordering, seed uint64) *SimConfig {
	return &SimConfig{Profile: CX6(), Ordering: o, Seed: seed}
}
