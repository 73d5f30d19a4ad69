package index

import (
	"fmt"
	"strings"
)

// Stats are an index's counters on one compute node since it was opened
// (cumulative; reading them is safe while the index is in use). An index
// leaves the fields it does not keep at zero; each field says which index
// fills it.
type Stats struct {
	// CacheLookups counts point operations (Get, Put, Delete) that consulted
	// the compute node's cache. SMART and Sherman.
	CacheLookups uint64
	// CacheHits counts the lookups whose operation reached its leaf without
	// reading an internal node (or a slot of one) remotely: the cache
	// answered the whole path.
	// CacheHits/CacheLookups is the cache hit ratio. SMART and Sherman.
	CacheHits uint64
	// CacheStartsBelowRoot counts traversals (restarts included) that began
	// at a cached node instead of the root, and CacheLevelsSaved the
	// internal nodes they skipped, summed. SMART.
	CacheStartsBelowRoot, CacheLevelsSaved uint64
	// CacheInvalidations counts cache entries dropped because an operation
	// found them stale. SMART and Sherman.
	CacheInvalidations uint64
	// CachedInserts counts new keys inserted on the cache's snapshot of
	// their node without reading it (one round trip), CachedInsertsLost
	// the attempts whose CAS found the snapshot stale (the node is then
	// read). SMART.
	CachedInserts, CachedInsertsLost uint64
	// CacheEntries and CacheBytes are what the cache holds now (SMART:
	// internal nodes; Sherman: internal pages). SMART and Sherman.
	CacheEntries int
	CacheBytes   int64

	// Retries counts re-reads and restarts spent on contention or torn
	// data. Sherman.
	Retries uint64
	// TornReads counts reads retried because a check (checksum, versions)
	// failed. Sherman.
	TornReads uint64
	// TornUnderLock counts leaves found torn right after their lock was
	// taken: the previous holder's WRITE was still landing (SMART's
	// invariant I7). SMART.
	TornUnderLock uint64

	// LeafSplits, InnerSplits and RootGrowths count structural changes made
	// by this compute node; UnlinkedSplits the splits whose separator could
	// not be inserted (the page is reached through its left sibling).
	// Sherman.
	LeafSplits, InnerSplits, RootGrowths, UnlinkedSplits uint64
	// GlobalLocks counts global lock acquisitions, HandOvers the local
	// hand-overs that skipped one, LockCASFailures the failed lock CASes.
	// Sherman.
	GlobalLocks, HandOvers, LockCASFailures uint64

	// Delegated counts Gets answered by another client's read and Combined
	// Puts written by another client's write (read delegation and write
	// combining). SMART, and Sherman with Options.RDWC.
	Delegated, Combined uint64

	// Retired counts objects this compute node unlinked and handed to
	// memory reclamation, Reused the allocations it served with reclaimed
	// objects, and Renewals the operations it restarted with a new epoch
	// pin because other compute nodes may have judged it dead meanwhile.
	// SMART with Options.Reclaim.
	Retired, Reused, Renewals uint64

	// Crashed counts this compute node's clients that crashed (an injected
	// fault stopped them, remote.ErrCrashed, or a batch of theirs that
	// writes failed, remote.Client.Crashed) and that the index replaced;
	// Recovered
	// the locks it took over from dead holders (crashed clients, or
	// compute nodes silent for a lease) and released after repairing what
	// they left.
	Crashed, Recovered uint64
}

// Add returns the field-by-field sum of s and o (e.g. over compute nodes).
func (s Stats) Add(o Stats) Stats {
	return Stats{
		CacheLookups: s.CacheLookups + o.CacheLookups, CacheHits: s.CacheHits + o.CacheHits,
		CacheStartsBelowRoot: s.CacheStartsBelowRoot + o.CacheStartsBelowRoot,
		CacheLevelsSaved:     s.CacheLevelsSaved + o.CacheLevelsSaved,
		CacheInvalidations:   s.CacheInvalidations + o.CacheInvalidations,
		CachedInserts:        s.CachedInserts + o.CachedInserts, CachedInsertsLost: s.CachedInsertsLost + o.CachedInsertsLost,
		CacheEntries: s.CacheEntries + o.CacheEntries, CacheBytes: s.CacheBytes + o.CacheBytes,
		Retries: s.Retries + o.Retries, TornReads: s.TornReads + o.TornReads, TornUnderLock: s.TornUnderLock + o.TornUnderLock,
		LeafSplits: s.LeafSplits + o.LeafSplits, InnerSplits: s.InnerSplits + o.InnerSplits,
		RootGrowths: s.RootGrowths + o.RootGrowths, UnlinkedSplits: s.UnlinkedSplits + o.UnlinkedSplits,
		GlobalLocks: s.GlobalLocks + o.GlobalLocks, HandOvers: s.HandOvers + o.HandOvers,
		LockCASFailures: s.LockCASFailures + o.LockCASFailures,
		Delegated:       s.Delegated + o.Delegated, Combined: s.Combined + o.Combined,
		Retired: s.Retired + o.Retired, Reused: s.Reused + o.Reused, Renewals: s.Renewals + o.Renewals,
		Crashed: s.Crashed + o.Crashed, Recovered: s.Recovered + o.Recovered,
	}
}

// String formats the non-zero counters on one line, in field order.
func (s Stats) String() string {
	var b strings.Builder
	add := func(name string, v uint64) {
		if v == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", name, v)
	}
	add("cache-lookups", s.CacheLookups)
	add("cache-hits", s.CacheHits)
	if s.CacheLookups > 0 {
		fmt.Fprintf(&b, " (%.1f%%)", 100*float64(s.CacheHits)/float64(s.CacheLookups))
	}
	add("starts-below-root", s.CacheStartsBelowRoot)
	add("levels-saved", s.CacheLevelsSaved)
	add("invalidations", s.CacheInvalidations)
	add("cached-inserts", s.CachedInserts)
	add("cached-inserts-lost", s.CachedInsertsLost)
	add("cache-entries", uint64(s.CacheEntries))
	add("cache-bytes", uint64(s.CacheBytes))
	add("retries", s.Retries)
	add("torn-reads", s.TornReads)
	add("torn-under-lock", s.TornUnderLock)
	add("leaf-splits", s.LeafSplits)
	add("inner-splits", s.InnerSplits)
	add("root-growths", s.RootGrowths)
	add("unlinked-splits", s.UnlinkedSplits)
	add("global-locks", s.GlobalLocks)
	add("hand-overs", s.HandOvers)
	add("lock-cas-failures", s.LockCASFailures)
	add("delegated", s.Delegated)
	add("combined", s.Combined)
	add("retired", s.Retired)
	add("reused", s.Reused)
	add("renewals", s.Renewals)
	add("crashed", s.Crashed)
	add("recovered", s.Recovered)
	if b.Len() == 0 {
		return "no activity"
	}
	return b.String()
}
