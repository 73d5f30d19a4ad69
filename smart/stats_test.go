package smart

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestCacheHitMeansOneRoundTrip ties the cache hit counter to what a user
// reads into it: a Get counts as a hit exactly when it reached its leaf
// without reading an internal node, which for a Get is exactly when it
// cost one round trip (the leaf READ). The tree is cold at first (misses),
// then warm (hits), and a tiny cache keeps some misses. The keys are put
// by another compute node, whose cache is warm from the inserts.
func TestCacheHitMeansOneRoundTrip(t *testing.T) {
	for _, cache := range []int64{0, 16 << 10} {
		opts := Options{CacheBytes: cache, NoReadDelegation: true, NoWriteCombining: true}
		loader, p := newTree(t, remote.Config{}, opts)
		ctx := context.Background()
		const n = 3000
		for i := range n {
			if err := loader.Put(ctx, benchKey(i), benchKey(i)); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := Open(p.NewComputeNode(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var hits, oneRTT int
		for round := range 2 {
			for i := range n {
				rt, st := p.Stats().RoundTrips, tr.Stats()
				if _, ok, err := tr.Get(ctx, benchKey(i)); err != nil || !ok {
					t.Fatalf("Get %d: %v %v", i, ok, err)
				}
				dRT, after := p.Stats().RoundTrips-rt, tr.Stats()
				hit := after.CacheHits - st.CacheHits
				if after.CacheLookups-st.CacheLookups != 1 || (hit == 1) != (dRT == 1) {
					t.Fatalf("cache %d, round %d, Get %d: %d round trips, %d lookups, %d hits",
						cache, round, i, dRT, after.CacheLookups-st.CacheLookups, hit)
				}
				hits += int(hit)
				if dRT == 1 {
					oneRTT++
				}
			}
		}
		if hits == 0 || hits == 2*n {
			t.Fatalf("cache %d: %d hits of %d Gets: the test does not see both hits and misses", cache, hits, 2*n)
		}
		t.Logf("cache %d bytes: %d of %d Gets hit (%s)", cache, hits, 2*n, tr.Stats())
	}
}
