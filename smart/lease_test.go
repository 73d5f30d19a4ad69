package smart

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestLeaseTooShort: with an Options.Lease far below a round trip every
// batch under a lock is past its deadline. Operations must still return,
// each done or failed with ErrContention, instead of checking the lock
// again for ever (a nanosecond's lease hung a Delete's batch under its leaf
// lock, and LockedInternal's node lock release, that way). The locks such
// operations abandon are repaired by another compute node's operations and
// Recover, after which the tree verifies and every acknowledged change
// reads back. (With Reclaim the lease must exceed ReclaimInterval, which
// Open checks.)
func TestLeaseTooShort(t *testing.T) {
	const limit = 2 * time.Minute
	seed := testseed.Seed(t)
	for _, opts := range []Options{{}, {LockedInternal: true}} {
		t.Run(fmt.Sprintf("locked=%v", opts.LockedInternal), func(t *testing.T) {
			ctx := t.Context()
			healthy := simTrees(t, 1, opts)[0]
			lateOpts := opts
			lateOpts.Lease = time.Nanosecond
			late, err := Open(healthy.cn.Pool().NewComputeNode(), lateOpts)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(seed, 0))
			known := map[string][]byte{} // nil: absent; missing: unknown
			var failed int
			done := make(chan error, 1)
			go func() {
				for i := range 300 {
					k := fmt.Sprintf("key%02d", r.IntN(40))
					var err error
					switch {
					case i%5 == 4:
						_, err = late.Delete(ctx, []byte(k))
						if err == nil {
							known[k] = nil
						}
					case i%5 == 3:
						for _, err = range late.Scan(ctx, []byte("key"), nil) {
							if err != nil {
								break
							}
						}
					default:
						v := fmt.Appendf(nil, "v%d", i)
						err = late.Put(ctx, []byte(k), v)
						if err == nil {
							known[k] = v
						}
					}
					if err != nil {
						if !errors.Is(err, ErrContention) {
							done <- fmt.Errorf("op %d on %s: %w", i, k, err)
							return
						}
						failed++
						delete(known, k)
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(limit):
				t.Fatalf("operations under a lease of 1ns did not return in %v", limit)
			}
			if failed == 0 {
				t.Fatal("no operation failed under a lease of 1ns: the test does not reach the late batches")
			}
			if _, err := healthy.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if err := healthy.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			for k, want := range known {
				got, ok, err := healthy.Get(ctx, []byte(k))
				if err != nil || ok != (want != nil) || !bytes.Equal(got, want) {
					t.Errorf("%s: Get = %q, %v, %v; want %q (acknowledged under the short lease)", k, got, ok, err, want)
				}
			}
			t.Logf("%d of 300 operations failed with ErrContention", failed)
		})
	}
}
