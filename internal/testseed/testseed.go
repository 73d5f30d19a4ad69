// Package testseed gives the module's randomized tests one seed flag,
// -seed, printed on every run so that a failure can be replayed: the same
// -seed reproduces every randomized test of a package (each test derives
// its own stream from it).
package testseed

import (
	"flag"
	"sync"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: derive one from the clock and log it)")

// Base returns the test binary's base seed: -seed if given, otherwise one
// derived from the clock once per binary.
var Base = sync.OnceValue(func() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return uint64(time.Now().UnixNano())&(1<<53-1) | 1
})

// Seed returns the base seed and logs the flag that replays the test.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	s := Base()
	tb.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}
