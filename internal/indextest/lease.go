package indextest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
)

// LateOps runs 300 Puts and Deletes (and Scans, if scans is set) of 40
// keys on late, an index opened with a lease so short that every batch
// under a lock is past its deadline, from a goroutine of its own, and fails
// the test unless they all return within two minutes, each done or failed
// with an error wrapping index.ErrContention, and at least one failed (else
// the test does not reach the late batches). It returns the changes that
// were acknowledged, as CheckAcknowledged takes them. The random choice of
// keys is seeded with seed.
func LateOps(t *testing.T, late index.Index, seed uint64, scans bool) map[string][]byte {
	t.Helper()
	const ops, limit = 300, 2 * time.Minute
	ctx := t.Context()
	r := rand.New(rand.NewPCG(seed, 0))
	known := map[string][]byte{} // nil: absent; missing: unknown
	failed := 0
	done := make(chan error, 1)
	go func() {
		for i := range ops {
			k := fmt.Sprintf("key%02d", r.IntN(40))
			var err error
			switch {
			case i%5 == 4:
				if _, err = late.Delete(ctx, []byte(k)); err == nil {
					known[k] = nil
				}
			case i%5 == 3 && scans:
				for _, err = range late.Scan(ctx, []byte("key"), nil) {
					if err != nil {
						break
					}
				}
			default:
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
		t.Fatalf("operations under a lease too short did not return in %v", limit)
	}
	if failed == 0 {
		t.Fatal("no operation failed under a lease too short: the test does not reach the late batches")
	}
	t.Logf("%d of %d operations failed with ErrContention", failed, ops)
	return known
}

// CheckAcknowledged fails the test unless idx reads every key of known
// with its value (nil: absent).
func CheckAcknowledged(t *testing.T, idx index.Index, known map[string][]byte) {
	t.Helper()
	for k, want := range known {
		got, ok, err := idx.Get(t.Context(), []byte(k))
		if err != nil || ok != (want != nil) || !bytes.Equal(got, want) {
			t.Errorf("%s: Get = %q, %v, %v; want %q (acknowledged)", k, got, ok, err, want)
		}
	}
}
