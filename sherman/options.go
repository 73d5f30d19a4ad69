package sherman

import (
	"errors"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// Options configure a Sherman tree. The zero Options give keys of up to 32
// bytes and values of up to 64 (the setup of the SMART paper's motivation
// experiment, §4.3.1, which fits common string keys such as e-mail
// addresses and hex digests), 32 entries per page, a 64 MiB index cache and
// hand-over to at most 8 local holders. Unlike SMART, which takes any key
// of 1..255 bytes, Sherman fixes its entry size when a tree is created:
// pass KeySize and ValueSize for other data (SMART's evaluation setup is
// KeySize 8, ValueSize 8, as cmd/dmbench does for 8-byte keys).
//
// KeySize, ValueSize, Span and PageBytes fix the remote geometry and
// LockTableSize the global lock word of every page: every compute node
// opening the same Name must pass the same values (LockTableSize may be left
// zero to adopt the tree's), or Open fails with ErrOptionsMismatch. The
// other options are local to the compute node and may differ.
type Options struct {
	// Name identifies the tree in the pool (default "sherman"), in at most
	// remote.MaxNameBytes - 8 bytes. Compute nodes opening the same name
	// share one tree.
	Name string
	// KeySize is the maximum key length in bytes (default DefaultKeySize, at
	// most MaxKeyLen). Shorter keys are stored with their length.
	KeySize int
	// ValueSize is the maximum value length in bytes (default
	// DefaultValueSize, at most MaxValueLen). Shorter values are stored
	// with their length.
	ValueSize int
	// Span is the number of entries of every page, leaf and internal
	// (default DefaultSpan, at least MinSpan, at most MaxSpan). It cannot be
	// combined with PageBytes.
	Span int
	// PageBytes, if set, derives each page kind's span from a page size
	// instead, as upstream Sherman does with 1024-byte pages: the largest
	// span whose page fits in PageBytes.
	PageBytes int
	// CacheBytes is the byte budget of the compute node's index cache of
	// level-1 pages (default DefaultCacheBytes; negative disables the cache).
	CacheBytes int64
	// HandOver is the largest number of consecutive local holders one global
	// lock acquisition serves: one CAS, then up to HandOver-1 local
	// hand-overs (default DefaultHandOver, as upstream; 1 disables
	// hand-over).
	HandOver int
	// LockTableSize is the number of 64-bit global lock words used on each
	// memory node's on-chip region. A page's lock word is a hash of its
	// address modulo LockTableSize, so the first Open records it in the
	// tree and later ones must match it; zero adopts the tree's, or for a
	// new tree uses as many words as the region holds.
	LockTableSize int
	// RDWC enables SMART's read delegation and write combining (package
	// rdwc) among the compute node's clients, as SMART's evaluation did for
	// Sherman: concurrent Gets of one key share one leaf READ, concurrent
	// Puts of one key one locked write of the last value. Deletes and scans
	// run on their own.
	RDWC bool
	// RetryBudget bounds how often one operation re-reads a torn page,
	// restarts a traversal or waits for a concurrent root change before it
	// fails with an error wrapping index.ErrContention (default
	// DefaultRetryBudget). A global lock is retried up to 64×RetryBudget
	// times. In local mode retries back off (yield, then sleep up to 1 ms for
	// a torn page and 100 µs for a lock), so the default budget tolerates a
	// writer preempted for a second or more: the sleeps last what the system
	// makes of them (a 100 µs sleep lasted 1.1 ms on the 2-core development
	// VM, where a Put gave up on a global lock that a live client never
	// released after 65,537 CASes and 75 s on the local transport).
	RetryBudget int
	// NoRedo turns off the redo record that precedes every page WRITE under
	// a lock (the paper-faithful configuration, one verb and 40 bytes plus
	// the written bytes fewer per write). Without it a lock left by a
	// crashed client is still taken over, but a page whose WRITE the crash
	// cut stays torn: reads of it fail with index.ErrContention and Verify
	// reports it (rule S2). Local to the compute node; every compute node
	// writing the tree should agree.
	NoRedo bool
	// Lease is how long this compute node waits, on its own clock, for a
	// lock holder whose compute node's heartbeat stands still before it
	// judges the holder dead and takes its lock over (default
	// registry.DefaultLease, 1 s; a holder whose own compute node saw it
	// crash is judged dead at once). Local to the compute node; its
	// heartbeats are sent every Lease/10 while it works. Below the latency
	// of a round trip every write under a lock is late for its deadline,
	// and Puts and Deletes fail with index.ErrContention.
	Lease time.Duration
}

// Defaults and limits of Options.
const (
	DefaultName        = "sherman"
	DefaultKeySize     = 32
	DefaultValueSize   = 64
	DefaultSpan        = 32
	DefaultCacheBytes  = 64 << 20
	DefaultHandOver    = 8
	DefaultRetryBudget = 1024

	MaxKeyLen   = 255
	MaxValueLen = 4096
	MinSpan     = 4
	MaxSpan     = 1024
)

// regionPrefix begins the name of a tree's named region.
const regionPrefix = "sherman/"

// Errors of Open besides those of package remote.
var (
	// ErrBadOptions: an option is out of range.
	ErrBadOptions = errors.New("sherman: invalid options")
	// ErrOptionsMismatch: the tree already exists in the pool with a
	// different geometry (key size, value size or spans) or LockTableSize.
	// It is index.ErrOptionsMismatch, shared by every index of the module.
	ErrOptionsMismatch = index.ErrOptionsMismatch
)

// normalized fills in defaults and validates o.
func (o Options) normalized() (Options, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.KeySize == 0 {
		o.KeySize = DefaultKeySize
	}
	if o.ValueSize == 0 {
		o.ValueSize = DefaultValueSize
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.HandOver == 0 {
		o.HandOver = DefaultHandOver
	}
	if o.RetryBudget == 0 {
		o.RetryBudget = DefaultRetryBudget
	}
	if o.Lease == 0 {
		o.Lease = registry.DefaultLease
	}
	switch {
	case o.KeySize < 1 || o.KeySize > MaxKeyLen:
		return o, fmt.Errorf("%w: KeySize %d not in 1..%d", ErrBadOptions, o.KeySize, MaxKeyLen)
	case o.ValueSize < 0 || o.ValueSize > MaxValueLen:
		return o, fmt.Errorf("%w: ValueSize %d not in 1..%d", ErrBadOptions, o.ValueSize, MaxValueLen)
	case o.Span != 0 && o.PageBytes != 0:
		return o, fmt.Errorf("%w: Span and PageBytes are exclusive", ErrBadOptions)
	case o.Span != 0 && (o.Span < MinSpan || o.Span > MaxSpan):
		return o, fmt.Errorf("%w: Span %d not in %d..%d", ErrBadOptions, o.Span, MinSpan, MaxSpan)
	case o.PageBytes < 0:
		return o, fmt.Errorf("%w: PageBytes %d is negative", ErrBadOptions, o.PageBytes)
	case o.HandOver < 1:
		return o, fmt.Errorf("%w: HandOver %d is below 1", ErrBadOptions, o.HandOver)
	case o.LockTableSize < 0:
		return o, fmt.Errorf("%w: LockTableSize %d is negative", ErrBadOptions, o.LockTableSize)
	case o.Lease < 0:
		return o, fmt.Errorf("%w: Lease %v is negative", ErrBadOptions, o.Lease)
	case len(regionPrefix)+len(o.Name) > remote.MaxNameBytes:
		return o, fmt.Errorf("%w: Name of %d bytes (at most %d)", ErrBadOptions, len(o.Name), remote.MaxNameBytes-len(regionPrefix))
	case o.RetryBudget < 1:
		return o, fmt.Errorf("%w: RetryBudget %d is below 1", ErrBadOptions, o.RetryBudget)
	}
	if o.Span == 0 && o.PageBytes == 0 {
		o.Span = DefaultSpan
	}
	return o, nil
}
