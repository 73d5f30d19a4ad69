package index

import "errors"

// Sentinel errors shared by every Index of this module.
var (
	// ErrEmptyKey: keys must be at least one byte long.
	ErrEmptyKey = errors.New("index: empty key")
	// ErrKeyTooLong: the key exceeds the index's maximum key length.
	ErrKeyTooLong = errors.New("index: key too long")
	// ErrValueTooLarge: the value exceeds the index's maximum value size, or
	// (SMART) its leaf would not fit in a memory node (more than
	// remote.Pool.MaxAllocBytes).
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
	// ErrLeaseLost: the compute node was silent for so long (a paused
	// process) that others may have judged it dead, and a lock the
	// operation held was taken over meanwhile; the operation wrote nothing
	// under it and failed. Retrying is safe.
	ErrLeaseLost = errors.New("index: lock lost while the compute node was silent")
)
