package index

import (
	"context"
	"iter"
)

// KV is one key-value pair returned by a scan. Both slices belong to the
// caller.
type KV struct{ Key, Value []byte }

// Index is an ordered key-value index on disaggregated memory. Every index
// of this module (SMART, Sherman) implements it. An Index is opened on one
// compute node and is safe for concurrent use by many goroutines of that
// node; indexes opened on different compute nodes over the same pool and
// name see one structure.
//
// Keys are non-empty byte strings compared bytewise; values may be empty
// (see the package documentation for each index's limits). Returned slices
// belong to the caller. Errors wrap the sentinels of this package or those
// of package remote (remote.ErrOutOfMemory, remote.ErrClosed) and a
// cancelled context's error; test them with errors.Is. A failed call leaves
// the index unchanged or fully applied, never half-applied. A call ends by
// its context's deadline, except for the writes a Put or Delete makes under
// a lock it took, which run to completion whatever the context (the
// transport's Timeout bounds them: docs/deploy.md).
type Index interface {
	// Get returns the value stored under key.
	Get(ctx context.Context, key []byte) (value []byte, found bool, err error)
	// Put inserts key or replaces its value.
	Put(ctx context.Context, key, value []byte) error
	// Delete removes key and reports whether it was present.
	Delete(ctx context.Context, key []byte) (found bool, err error)
	// Scan yields the pairs with lo <= key < hi in ascending key order (nil
	// hi: no upper bound). It fetches incrementally: stopping early does not
	// read the rest of the range. A pair present for the whole scan is
	// yielded exactly once; pairs inserted or deleted during the scan may or
	// may not be. On error the sequence yields (KV{}, err) once and stops.
	// The bounds are read when the iteration starts (each time it starts):
	// from then on lo and hi are the caller's again, to reuse or overwrite
	// even inside the loop.
	Scan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error]
	// ReverseScan yields the pairs with lo <= key < hi in descending key
	// order (nil hi: no upper bound), with Scan's guarantees: incremental,
	// a pair present for the whole scan yielded exactly once, and an error
	// yielded once as (KV{}, err), and its bounds read when the iteration
	// starts (the caller may reuse them afterwards, inside the loop too).
	// Its cost differs by index (see each index's documentation).
	ReverseScan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error]
	// Close releases the index's compute-node state; the remote structure
	// stays for other compute nodes. Calls of the other methods after Close
	// fail with ErrClosed. Close is idempotent: a later Close does nothing
	// and returns nil.
	Close() error
}

// Recoverer is implemented by indexes that recover from crashed clients
// (both indexes of this module). An operation whose client an injected fault
// stopped returns an error wrapping remote.ErrCrashed; its outcome is
// unknown (it may or may not have taken effect), and the index continues
// with a new client. (A fault that strikes after the operation took effect,
// in the unwaited release of its lock or in the index's upkeep, may leave
// it returning nil: nil always means that it took effect.) So does an operation whose write to a memory node
// failed with remote.ErrUnavailable (or its context's error while the write
// was in flight): its client crashed (remote.Client.Crashed), and its error
// wraps that error. What the stopped client left (a held lock, a write cut
// in the middle, an unfinished split) is repaired by the next operation
// that runs into it, once the holder is judged dead: at once for a client
// the index saw stop, after a lease for a compute node that went silent.
type Recoverer interface {
	// Recover sweeps the whole structure and repairs everything dead
	// clients left, taking their locks over; it returns the number of locks
	// recovered. Safe to run concurrently with operations. After it
	// returns, with no operation running and no client dead for less than
	// a lease, the structure holds no lock.
	Recover(ctx context.Context) (int, error)
}
