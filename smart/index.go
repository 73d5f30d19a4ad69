package smart

import (
	"context"
	"errors"
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
// Keys are non-empty byte strings compared bytewise; values may be empty.
// Returned slices belong to the caller. Errors wrap the sentinels below or
// those of package remote (remote.ErrOutOfMemory, remote.ErrClosed) and a
// cancelled context's error; test them with errors.Is. A failed call leaves
// the index unchanged or fully applied, never half-applied.
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
	Scan(ctx context.Context, lo, hi []byte) iter.Seq2[KV, error]
	// Close releases the index's compute-node state. Later calls return
	// ErrClosed. The remote structure stays for other compute nodes.
	Close() error
}

// Sentinel errors shared by every Index of this module.
var (
	// ErrEmptyKey: keys must be at least one byte long.
	ErrEmptyKey = errors.New("index: empty key")
	// ErrKeyTooLong: the key exceeds the index's maximum key length.
	ErrKeyTooLong = errors.New("index: key too long")
	// ErrValueTooLarge: the value exceeds the index's maximum value size, or
	// (SMART) its leaf would not fit in a memory node.
	ErrValueTooLarge = errors.New("index: value too large")
	// ErrClosed: the index was closed.
	ErrClosed = errors.New("index: closed")
	// ErrContention: an operation exceeded its retry budget (it names the
	// cause); the index is unchanged by it.
	ErrContention = errors.New("index: retry budget exhausted")
	// ErrCorrupt: the remote structure violates an invariant (reported by
	// Verify, or by an operation that cannot proceed).
	ErrCorrupt = errors.New("index: corrupt remote structure")
	// ErrOptionsMismatch: Open found the index already created under its
	// name with options that every compute node must share and that differ
	// from the ones given (SMART's protocol variant, Sherman's geometry and
	// lock table). Nothing was changed.
	ErrOptionsMismatch = errors.New("index: options do not match the existing index")
)
