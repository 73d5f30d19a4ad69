package smart

import "github.com/dmindex/dmindex/index"

// The contract of package index, re-exported so that code importing SMART
// needs no second import. See package index for the documentation.
type (
	// KV is index.KV.
	KV = index.KV
	// Index is index.Index.
	Index = index.Index
	// LimitScanner is index.LimitScanner (*Tree implements it).
	LimitScanner = index.LimitScanner
	// Recoverer is index.Recoverer (*Tree implements it).
	Recoverer = index.Recoverer
	// Compacter is index.Compacter (*Tree implements it).
	Compacter = index.Compacter
)

var (
	_ LimitScanner = (*Tree)(nil)
	_ Recoverer    = (*Tree)(nil)
	_ Compacter    = (*Tree)(nil)
)

// The sentinel errors of package index (the same values: errors.Is holds
// across the two names).
var (
	ErrEmptyKey        = index.ErrEmptyKey
	ErrKeyTooLong      = index.ErrKeyTooLong
	ErrValueTooLarge   = index.ErrValueTooLarge
	ErrClosed          = index.ErrClosed
	ErrContention      = index.ErrContention
	ErrCorrupt         = index.ErrCorrupt
	ErrOptionsMismatch = index.ErrOptionsMismatch
	ErrLeaseLost       = index.ErrLeaseLost
)
