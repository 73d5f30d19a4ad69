package remote

import (
	"flag"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: derive one from the clock and print it)")

// testSeed returns the seed of a randomized test and logs how to rerun it.
func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

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
