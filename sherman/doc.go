// Package sherman implements the Sherman B+tree (SIGMOD'22) on disaggregated
// memory as a baseline for SMART, behind the index.Index interface.
//
// The remote structure is a B-link tree of fixed-geometry pages: sorted
// internal pages and unsorted leaves, each with a low and a high fence key,
// its level and a right-sibling pointer. Readers are lock-free; writers lock
// a page with Sherman's hierarchical on-chip lock (HOCL): a 64-bit word in the
// memory node's on-chip region, hashed from the page address, fronted by a
// compute-node-local lock table that hands the global lock over to at most
// Options.HandOver consecutive local holders. An update of one leaf entry
// writes only that entry, coalesced with the unlock in one doorbell batch.
// Each compute node caches copies of level-1 pages (the parents of leaves)
// so that a cached search reads one leaf in one round trip.
//
// Unlike the original C++ code, pages are validated by checksums instead of
// front/rear version bytes (correct even when the cache lines of one READ or
// WRITE land in any order), a torn entry is re-read instead of being reported
// absent, Delete and Scan are exact, tiny trees and concurrent root splits
// are handled, and every retry loop has a budget that ends in an error
// wrapping index.ErrContention. The on-memory layout is documented bit by bit
// in docs/sherman-layout.md.
//
// Crash recovery (Tree implements index.Recoverer): lock words hold the
// registry tags of their holders, every page write under a lock is preceded
// by a redo record (unless Options.NoRedo), and a writer that finds a lock
// held by a dead client (one its compute node saw crash, or one whose
// compute node was silent for Options.Lease) takes it over and repairs the
// page. docs/sherman-layout.md, "Crash recovery", has the state machine.
//
// Open a tree on each compute node that uses it:
//
//	pool, _ := remote.NewPool(remote.Config{MemoryNodes: 2})
//	t, err := sherman.Open(pool.NewComputeNode(), sherman.Options{})
//	err = t.Put(ctx, []byte("key"), []byte("value"))
package sherman
