//go:build fabric

package fabric

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// checkFAAOlds checks that the old values returned by n fetch-and-adds of 1
// on a word that started at 0 are exactly 0..n-1.
func checkFAAOlds(t *testing.T, olds []uint64, n int) {
	t.Helper()
	if len(olds) != n {
		t.Fatalf("%d old values, want %d", len(olds), n)
	}
	slices.Sort(olds)
	for i, o := range olds {
		if o != uint64(i) {
			t.Fatalf("sorted old values: position %d holds %d (duplicate or gap)", i, o)
		}
	}
}

// TestConcurrentGoroutines runs FAA and CAS increments on one word from
// several goroutines, each with its own connection and all sharing one:
// the counts are exact and every FAA's old value is unique.
func TestConcurrentGoroutines(t *testing.T) {
	const goroutines, perG = 4, 150
	s, mem := startServer(t, 4096)
	r := s.Regions()[0]
	shared := dial(t, s.Addr())
	for _, mode := range []string{"own", "shared"} {
		t.Run(mode, func(t *testing.T) {
			conns := make([]*Conn, goroutines)
			for i := range conns {
				conns[i] = shared
				if mode == "own" {
					conns[i] = dial(t, s.Addr())
				}
			}
			faaOff, casOff := uint64(0), uint64(8)
			if mode == "shared" {
				faaOff, casOff = 16, 24
			}
			var mu sync.Mutex
			var olds []uint64
			var wg sync.WaitGroup
			errs := make(chan error, 2*goroutines)
			for _, c := range conns {
				wg.Go(func() {
					mine := make([]uint64, 0, perG)
					for range perG {
						op := []Op{{Kind: OpFAA, Region: r, Off: faaOff, Swap: 1}}
						if err := c.Do(op); err != nil {
							errs <- err
							return
						}
						mine = append(mine, op[0].Old)
					}
					mu.Lock()
					olds = append(olds, mine...)
					mu.Unlock()
				})
				wg.Go(func() {
					if _, err := casIncrements(c, r, casOff, perG); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			checkFAAOlds(t, olds, goroutines*perG)
			if got := word(mem[0], faaOff); got != goroutines*perG {
				t.Errorf("FAA counter %d, want %d", got, goroutines*perG)
			}
			if got := word(mem[0], casOff); got != goroutines*perG {
				t.Errorf("CAS counter %d, want %d", got, goroutines*perG)
			}
		})
	}
}

// TestConcurrentProcesses runs FAA and CAS increments on one word from
// several child processes at once, while this process increments too.
func TestConcurrentProcesses(t *testing.T) {
	const procs, perProc = 3, 200
	s, mem := startServer(t, 4096)
	r := s.Regions()[0]
	c := dial(t, s.Addr())
	for _, kind := range []string{"faa", "cas"} {
		t.Run(kind, func(t *testing.T) {
			off := uint64(0)
			if kind == "cas" {
				off = 8
			}
			children := make([]*child, procs)
			for i := range children {
				children[i] = startChild(t, kind, childArgs{addr: s.Addr(), region: r, off: off, n: perProc})
			}
			var own []uint64
			if kind == "faa" {
				for range perProc {
					op := []Op{{Kind: OpFAA, Region: r, Off: off, Swap: 1}}
					if err := c.Do(op); err != nil {
						t.Fatal(err)
					}
					own = append(own, op[0].Old)
				}
			} else if _, err := casIncrements(c, r, off, perProc); err != nil {
				t.Fatal(err)
			}
			olds := own
			for _, ch := range children {
				out := ch.wait(t)
				if kind == "cas" {
					continue
				}
				for _, f := range strings.Fields(out) {
					v, err := strconv.ParseUint(f, 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					olds = append(olds, v)
				}
			}
			total := (procs + 1) * perProc
			if kind == "faa" {
				checkFAAOlds(t, olds, total)
			}
			if got := word(mem[0], off); got != uint64(total) {
				t.Errorf("%s counter %d, want %d", kind, got, total)
			}
		})
	}
}
