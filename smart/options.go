package smart

import (
	"fmt"
	"time"
)

// Options configure a SMART tree. The zero Options are the paper's design:
// lock-free internal nodes, in-place leaves with a rear-embedded lock, read
// delegation, write combining and an ART-indexed cache.
//
// Compute nodes opening one tree must agree on LockedInternal, Reclaim and
// PaperNodes
// (Open refuses a mismatch with ErrOptionsMismatch); every other option is
// local to the compute node and may differ between compute nodes.
type Options struct {
	// Name identifies the tree in the pool (default "smart"), in at most
	// remote.MaxNameBytes - 6 bytes. Compute nodes opening the same name
	// share one tree.
	Name string
	// CacheBytes is the byte budget of the compute node's cache of internal
	// nodes (default DefaultCacheBytes; negative disables the cache). The
	// cache needs about 32 bytes per key of 8-byte integer keys to hold every
	// internal node, so the default holds those of about 2 million keys.
	CacheBytes int64
	// RetryBudget is how many times an operation restarts from the root
	// before it fails with ErrContention (0: DefaultRetryBudget; Open
	// refuses a negative budget with remote.ErrBadRequest).
	RetryBudget int

	// The switches below exist for the factor analysis of the paper's
	// Figure 4.14; each one really changes the protocol.

	// LockedInternal uses ROWEX-like locked internal nodes instead of the
	// lock-free ones. The variant is recorded in the tree when it is
	// created: its locked inserters fill slots with plain WRITEs that
	// lock-free inserters would race with.
	LockedInternal bool
	// OutOfPlaceLeaves updates every leaf out of place (RCU: write a new leaf,
	// CAS the parent slot to it) instead of in place, so every update changes
	// the leaf's address and invalidates cached pointers to it. The old leaf
	// is still locked while it is replaced, which keeps the variant
	// linearizable with stale caches.
	OutOfPlaceLeaves bool
	// Release says how an in-place update releases the leaf's rear lock.
	// The zero value, ReleaseInWrite, is the paper's rear-embedded lock.
	// It is local to the compute node: any mix is correct (invariant I7).
	Release Release
	// NoReadDelegation disables read delegation among the node's clients.
	NoReadDelegation bool
	// NoWriteCombining disables write combining among the node's clients.
	NoWriteCombining bool
	// NoCachedInserts makes every insert of a new key read its node first,
	// as the paper does, instead of trying the CAS on the cache's snapshot
	// of the node (one round trip fewer when the snapshot is fresh;
	// docs/smart-protocol.md). It is local to the compute node. Inserts
	// are never tried on snapshots with PaperNodes or LockedInternal.
	NoCachedInserts bool
	// HashCache indexes the cache by a hash of the node prefix instead of a
	// local ART.
	HashCache bool

	// Reclaim reuses the memory of the leaves that Delete, out-of-place
	// updates and size-class changes unlink, once no client of any compute
	// node can still be reading them (epochs per compute node in the pool's
	// client registry; docs/smart-protocol.md, invariant I8). Without it a
	// tree never reuses memory: inserting and deleting the same keys
	// fills any pool. It costs no verb on the operation path: one heartbeat
	// WRITE and one registry READ per compute node every ReclaimInterval.
	// A leaf is reused only by the compute node that retired it. Every
	// compute node of a tree must set it (the paper's design does not
	// reclaim, so the default is off). A compute node silent for ten
	// intervals is judged dead and stops holding reclamation back; its
	// operations notice when they resume and start again (a scan continues
	// after the last pair it yielded), so they stay correct (I8).
	Reclaim bool
	// ReclaimInterval is how often a compute node of a Reclaim tree
	// publishes its epoch and reclaims (default DefaultReclaimInterval, at
	// least MinReclaimInterval): a retired leaf is reused a few intervals
	// after its operation returned. An operation that runs longer than five
	// intervals without a heartbeat of its compute node starts again
	// (I8), so the interval must be well above an operation's latency.
	ReclaimInterval time.Duration

	// Lease is how long a compute node's heartbeat must stand still, on
	// the clock of another compute node, before that one judges the silent
	// node's clients dead and takes their locks over (docs/recovery.md).
	// Zero means 10 × ReclaimInterval with Reclaim, registry.DefaultLease
	// (1 s) without; with Reclaim it must exceed ReclaimInterval, which is
	// then the interval of the node's heartbeats. A client the tree itself
	// saw stop (an injected fault, remote.ErrCrashed) is judged dead at
	// once, whatever the lease. It must be well above an operation's latency: a node paused
	// longer than a lease may find a lock it held taken over, and with a
	// lease below the latency of a round trip operations fail with
	// ErrContention (every batch under a lock is late for its deadline).
	Lease time.Duration
	// NoRedo leaves out the redo record that precedes every in-place
	// update (one more WRITE of 32 bytes plus the leaf's data, in the same
	// batch: no round trip). Without it an update cut in the middle by a
	// crash leaves a torn leaf that recovery cannot repair: Recover and
	// the operations on that key fail with ErrCorrupt. It is the paper's
	// configuration, kept for comparison.
	NoRedo bool
	// PaperNodes allocates every internal node with room for 256 slots, as
	// the paper does, so that a node type switch happens in place. By
	// default a node is allocated at the size of its type (16 bytes of
	// header and 8 per slot, in 16-byte steps: 48 bytes for a NODE_4 …
	// 2,064 for a NODE_256) and moves to a node of the next type
	// when it is full (docs/smart-node-growth.md), which takes a fraction
	// of the memory-node space. The choice is recorded in the tree when it
	// is created, like LockedInternal, which implies it.
	PaperNodes bool
}

// reclaimInterval is ReclaimInterval, or its default.
func (o *Options) reclaimInterval() time.Duration {
	if o.ReclaimInterval > 0 {
		return o.ReclaimInterval
	}
	return DefaultReclaimInterval
}

// regionPrefix begins the name of a tree's named region.
const regionPrefix = "smart/"

// Defaults of Options.
const (
	DefaultCacheBytes      = 64 << 20
	DefaultRetryBudget     = 64
	DefaultReclaimInterval = 10 * time.Millisecond
	MinReclaimInterval     = 10 * time.Microsecond
)

// Release is how an in-place update of a leaf releases its rear lock
// (docs/smart-protocol.md, invariant I7).
type Release uint8

const (
	// ReleaseInWrite clears the lock word, the leaf's last word, with the
	// WRITE of the new data: an update of an existing key costs 3 verbs in
	// 2 round trips.
	ReleaseInWrite Release = iota
	// ReleaseSecondWrite clears the lock word with a second WRITE in the
	// same batch, which lands after every line of the data: 4 verbs in 2
	// round trips.
	ReleaseSecondWrite
	// ReleaseRoundTrip clears the lock word with a WRITE in a third round
	// trip, after the data WRITE completed (the naive ART of the factor
	// analysis): 4 verbs in 3 round trips.
	ReleaseRoundTrip
)

// String returns the release's name as the factor analysis prints it.
func (r Release) String() string {
	switch r {
	case ReleaseInWrite:
		return "in-write"
	case ReleaseSecondWrite:
		return "second-write"
	case ReleaseRoundTrip:
		return "round-trip"
	}
	return fmt.Sprintf("Release(%d)", uint8(r))
}
