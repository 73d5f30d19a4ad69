// Package testseed gives the module's randomized tests a seed that is
// printed on every run and can be set from the command line to replay it.
package testseed

import (
	"flag"
	"testing"
	"time"
)

// Flag registers the command-line flag -name and returns the function the
// tests call for their seed: the flag's value if set, otherwise one derived
// from the clock; either way it is logged with the flag that replays it.
func Flag(name string) func(testing.TB) uint64 {
	f := flag.Uint64(name, 0, "seed of the randomized tests (0: derive one from the clock and log it)")
	return func(tb testing.TB) uint64 {
		tb.Helper()
		s := *f
		if s == 0 {
			s = uint64(time.Now().UnixNano())
		}
		tb.Logf("seed %d (rerun with -%s=%d)", s, name, s)
		return s
	}
}
