package index

import "testing"

func TestStatsString(t *testing.T) {
	for _, tc := range []struct {
		s    Stats
		want string
	}{
		{Stats{}, "no activity"},
		{Stats{CacheLookups: 4, CacheHits: 3}, "cache-lookups=4 cache-hits=3 (75.0%)"},
		{Stats{GlobalLocks: 2, Combined: 1}, "global-locks=2 combined=1"},
		{Stats{CacheLookups: 1, CacheEntries: 5, CacheBytes: 640}, "cache-lookups=1 (0.0%) cache-entries=5 cache-bytes=640"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestStatsAdd(t *testing.T) {
	a := Stats{CacheLookups: 1, CacheHits: 2, CacheStartsBelowRoot: 3, CacheLevelsSaved: 4, CacheInvalidations: 5,
		CacheEntries: 6, CacheBytes: 7, Retries: 8, TornReads: 9, TornUnderLock: 10, LeafSplits: 11, InnerSplits: 12,
		RootGrowths: 13, UnlinkedSplits: 14, GlobalLocks: 15, HandOvers: 16, LockCASFailures: 17, Delegated: 18, Combined: 19,
		Retired: 20, Reused: 21, Renewals: 22, Crashed: 23, Recovered: 24}
	want := Stats{CacheLookups: 2, CacheHits: 4, CacheStartsBelowRoot: 6, CacheLevelsSaved: 8, CacheInvalidations: 10,
		CacheEntries: 12, CacheBytes: 14, Retries: 16, TornReads: 18, TornUnderLock: 20, LeafSplits: 22, InnerSplits: 24,
		RootGrowths: 26, UnlinkedSplits: 28, GlobalLocks: 30, HandOvers: 32, LockCASFailures: 34, Delegated: 36, Combined: 38,
		Retired: 40, Reused: 42, Renewals: 44, Crashed: 46, Recovered: 48}
	if got := a.Add(a); got != want {
		t.Fatalf("a.Add(a) = %+v, want %+v", got, want)
	}
}
