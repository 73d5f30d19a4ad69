package sherman

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestLeaseTooShort: with an Options.Lease far below a round trip every
// write under a global lock is past its deadline. Puts and Deletes must
// still return, each done or failed with index.ErrContention, instead of
// checking the lock again for ever (a lease of a nanosecond hung them that
// way); a write that gives up gives its lock back, so that another compute
// node's tree then verifies and reads back every acknowledged change.
func TestLeaseTooShort(t *testing.T) {
	const limit = 2 * time.Minute
	seed := testseed.Seed(t)
	ctx := t.Context()
	p := simPool(t, remote.InOrder, seed)
	healthy := openTree(t, p, Options{Span: 8})
	late := openTree(t, p, Options{Span: 8, Lease: time.Nanosecond})
	r := rand.New(rand.NewPCG(seed, 0))
	known := map[string][]byte{} // nil: absent; missing: unknown
	var failed int
	done := make(chan error, 1)
	go func() {
		for i := range 300 {
			k := fmt.Sprintf("key%02d", r.IntN(40))
			var err error
			if i%5 == 4 {
				if _, err = late.Delete(ctx, []byte(k)); err == nil {
					known[k] = nil
				}
			} else {
				v := fmt.Appendf(nil, "v%d", i)
				if err = late.Put(ctx, []byte(k), v); err == nil {
					known[k] = v
				}
			}
			if err != nil {
				if !errors.Is(err, index.ErrContention) {
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
		t.Fatal("no operation failed under a lease of 1ns: the test does not reach the late writes")
	}
	verify(t, healthy)
	for k, want := range known {
		got, ok, err := healthy.Get(ctx, []byte(k))
		if err != nil || ok != (want != nil) || !bytes.Equal(got, want) {
			t.Errorf("%s: Get = %q, %v, %v; want %q (acknowledged under the short lease)", k, got, ok, err, want)
		}
	}
	t.Logf("%d of 300 operations failed with ErrContention", failed)
}
