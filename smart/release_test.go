package smart

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestReleaseInWriteStrict checks invariant I7 in the simulator's Strict
// mode, where the lines of one WRITE land in any order: writers on several
// compute nodes update one key with values spanning 23 lines (the lock word
// in the same WRITE), a deleter removes and re-inserts it, and readers check
// that every value they get is one a writer wrote whole. With the release
// in the WRITE, lock holders must meet leaves still landing (the scenario
// I7 is about); with the release as a second WRITE they never do. A lock
// holder that acts on the torn image instead of reading again (the
// validation of I7 removed) fails here: it takes a half-written key for
// another key and splits the leaf, which Verify and the writers report as a
// corrupt structure.
func TestReleaseInWriteStrict(t *testing.T) {
	for _, rel := range []Release{ReleaseInWrite, ReleaseSecondWrite} {
		t.Run(rel.String(), func(t *testing.T) {
			torn := releaseRun(t, rel, testseed.Seed(t))
			switch {
			case rel == ReleaseInWrite && torn == 0:
				t.Fatal("no lock holder met a leaf still landing: the run does not exercise I7")
			case rel == ReleaseSecondWrite && torn > 0:
				t.Fatalf("%d lock holders met a torn leaf although the release lands after the data", torn)
			}
			t.Logf("lock holders that met a leaf still landing: %d", torn)
		})
	}
}

// releaseRun runs the workload of TestReleaseInWriteStrict and returns how
// many times a lock holder found its leaf torn.
func releaseRun(t *testing.T, rel Release, seed uint64) uint64 {
	const cns, writers, updates, readers, reads = 2, 24, 20, 8, 60
	ctx := context.Background()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20,
		Sim: &remote.SimConfig{Ordering: remote.Strict, Seed: seed}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	trees := openSimTrees(t, p, cns, Options{Release: rel, NoWriteCombining: true, NoReadDelegation: true})
	key := []byte("k")
	// Every value fits the same size class, so updates stay in place.
	value := func(w, i int) []byte { return bytes.Repeat([]byte{byte(1 + (w*31+i)%250)}, 1390+(w+i)%11) }
	whole := func(v []byte) bool {
		return len(v) >= 1390 && len(v) <= 1400 && bytes.Count(v, v[:1]) == len(v)
	}
	if err := trees[0].Put(ctx, key, value(0, 0)); err != nil {
		t.Fatal(err)
	}
	problems := make(chan string, 64)
	report := func(format string, args ...any) {
		select {
		case problems <- fmt.Sprintf(format, args...):
		default:
		}
	}
	for w := range cns * writers {
		p.Go(func() {
			tr := trees[w%cns]
			for i := range updates {
				if err := tr.Put(ctx, key, value(w, i)); err != nil {
					report("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	p.Go(func() {
		for i := range updates / 3 {
			if _, err := trees[1].Delete(ctx, key); err != nil {
				report("delete: %v", err)
				return
			}
			if err := trees[0].Put(ctx, key, value(99, i)); err != nil {
				report("re-insert: %v", err)
				return
			}
		}
	})
	for r := range readers {
		p.Go(func() {
			for range reads {
				v, ok, err := trees[r%cns].Get(ctx, key)
				if err != nil {
					report("reader %d: %v", r, err)
					return
				}
				if ok && !whole(v) {
					report("reader %d got a value no writer wrote: %d bytes starting %x", r, len(v), v[:min(8, len(v))])
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	close(problems)
	for pr := range problems {
		t.Error(pr)
	}
	p.Go(func() {
		if v, ok, err := trees[cns-1].Get(ctx, key); err != nil || !ok || !whole(v) {
			t.Errorf("final Get: %d bytes, found %v, %v", len(v), ok, err)
		}
		if err := trees[0].Verify(ctx); err != nil {
			t.Errorf("Verify: %v", err)
		}
	})
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	var torn uint64
	for _, tr := range trees {
		torn += tr.tornLocked.Load()
	}
	return torn
}
