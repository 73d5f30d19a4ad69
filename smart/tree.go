package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Tree is a SMART tree opened on one compute node. It implements Index and
// is safe for concurrent use by many goroutines.
type Tree struct {
	cn        *remote.ComputeNode
	opts      Options
	lf        leafFormat // births with Options.Reclaim
	line      uint64     // bytes of a WRITE that land together (writeLine)
	rootSlot  remote.Addr
	nodeBytes int64 // size of a memory node
	maxLeaf   int64 // the largest allocation a memory node can give (remote.Pool.MaxAllocBytes): no leaf may be larger
	// placed counts the bytes this compute node allocated on each memory
	// node (frees not subtracted): chainAlloc balances by it.
	placed      []atomic.Uint64
	retryBudget int
	closed      atomic.Bool
	rd          *rdwc.Table // read delegation and write combining
	cache       *artcache.Cache
	cstats      cacheCounters
	odds        insertOdds    // whether inserting on a snapshot pays (insertCached)
	patched     patchRing     // entries followForward patched last
	rootHint    atomic.Uint64 // last root slot value read
	// tornLocked counts leaves found torn right after their lock was
	// taken: the previous holder's WRITE was still landing (invariant I7).
	tornLocked atomic.Uint64
	// compactNext numbers Compact's blocks, which go round-robin to the
	// memory nodes.
	compactNext atomic.Uint32
	// reg is the compute node's registry membership (recover.go,
	// reclaim.go), lastReclaim the client time of its last Reclaim (reclaim.go).
	reg         *registry.Node
	lastReclaim atomic.Int64
	// leaves holds the reclaimed leaves, reused as leaves of this tree
	// only: a stale cached slot that still names one then reaches a leaf
	// whose lock word is where it expects it, and fails validation (rev,
	// birth) instead of changing some other structure's word with its lock
	// CAS. (The compute node's own free list serves every structure.)
	leaves remote.FreeList
	rstats struct{ retired, reused, renewals, crashed, recovered atomic.Uint64 }

	mu   sync.Mutex // guards free and unburied; never held across a verb
	free []*session
	// unburied holds the members of crashed clients that could not be
	// marked dead yet (the registry's memory node did not answer): the
	// next operations try again (markBuried). hasUnburied: it is not empty.
	unburied    []*registry.Member
	hasUnburied atomic.Bool
	// crashesSeen is the compute node's count of crashed clients
	// (remote.ComputeNode.Crashes) when the free sessions were last
	// looked through for crashed ones (replaceIdle).
	crashesSeen atomic.Uint64
}

var _ Index = (*Tree)(nil)

// The named region of a tree: word 0 is the root slot, word 1 the format
// word: the format magic in its low 56 bits and the protocol variant in its
// top byte. Compute nodes whose protocols would break each other (a locked
// inserter WRITEs a slot that lock-free inserters CAS) cannot open one tree.
const (
	regionBytes           = 64
	formatMagic           = 0x3676_5452_414d_53 // "SMARTv6": NODE_8 under dense nodes, growing to NODE_32
	formatMagicV1         = 0x3176_5452_414d_53 // "SMARTv1", not readable
	formatMagicV2         = 0x3276_5452_414d_53 // "SMARTv2", not readable
	formatMagicV3         = 0x3376_5452_414d_53 // "SMARTv3", not readable
	formatMagicV4         = 0x3476_5452_414d_53 // "SMARTv4", not readable
	formatMagicV5         = 0x3576_5452_414d_53 // "SMARTv5", not readable
	formatMagicMask       = 1<<56 - 1
	variantLockedInternal = 1 << 56
	variantReclaim        = 1 << 57
	variantNodeClasses    = 1 << 58
)

// formatWord returns the format word of a tree opened with opts.
func formatWord(opts Options) uint64 {
	w := uint64(formatMagic)
	if opts.LockedInternal {
		w |= variantLockedInternal
	}
	if opts.Reclaim {
		w |= variantReclaim
	}
	if !opts.PaperNodes {
		w |= variantNodeClasses
	}
	return w
}

// variantName names the protocol variant of a format word.
func variantName(w uint64) string {
	name := "lock-free internal nodes"
	if w&variantLockedInternal != 0 {
		name = "locked internal nodes (LockedInternal)"
	}
	if w&variantNodeClasses != 0 {
		name += " by size class"
	} else if w&variantLockedInternal == 0 {
		name += " of 256 slots (PaperNodes)"
	}
	if w&variantReclaim != 0 {
		name += " with memory reclamation (Reclaim)"
	}
	return name
}

// Open opens the tree named opts.Name in cn's pool, creating it if needed.
// Trees opened under one name on several compute nodes are one tree; they
// must agree on Options.LockedInternal, Options.Reclaim and
// Options.PaperNodes (the protocol variant, recorded in the tree when it is
// created), or Open fails with ErrOptionsMismatch.
func Open(cn *remote.ComputeNode, opts Options) (*Tree, error) {
	if cn == nil {
		return nil, fmt.Errorf("smart: Open: %w: nil compute node", remote.ErrBadRequest)
	}
	if opts.Name == "" {
		opts.Name = "smart"
	}
	if opts.LockedInternal {
		opts.PaperNodes = true // its node lock word sits behind 256 slots
	}
	if opts.RetryBudget < 0 {
		return nil, fmt.Errorf("smart: Open: %w: negative Options.RetryBudget %d", remote.ErrBadRequest, opts.RetryBudget)
	}
	if opts.RetryBudget == 0 {
		opts.RetryBudget = DefaultRetryBudget
	}
	if opts.ReclaimInterval < 0 || (opts.ReclaimInterval > 0 && opts.ReclaimInterval < MinReclaimInterval) {
		return nil, fmt.Errorf("smart: Open: %w: Options.ReclaimInterval %v below %v", remote.ErrBadRequest, opts.ReclaimInterval, MinReclaimInterval)
	}
	if len(regionPrefix)+len(opts.Name) > remote.MaxNameBytes {
		return nil, fmt.Errorf("smart: Open: %w: Options.Name of %d bytes (at most %d)", remote.ErrBadRequest, len(opts.Name), remote.MaxNameBytes-len(regionPrefix))
	}
	if opts.Lease < 0 {
		return nil, fmt.Errorf("smart: Open: %w: negative Options.Lease %v", remote.ErrBadRequest, opts.Lease)
	}
	if interval := opts.reclaimInterval(); opts.Reclaim && opts.Lease != 0 && opts.Lease <= interval {
		return nil, fmt.Errorf("smart: Open: %w: Options.Lease %v with Reclaim: it must exceed Options.ReclaimInterval %v, the heartbeats' interval",
			remote.ErrBadRequest, opts.Lease, interval)
	}
	if opts.Release > ReleaseRoundTrip {
		return nil, fmt.Errorf("smart: Open: %w: unknown Options.Release %v", remote.ErrBadRequest, opts.Release)
	}
	p := cn.Pool()
	if p.MemoryNodes() > maxSlotMN || p.Config().NodeBytes > maxSlotOffset {
		return nil, fmt.Errorf("smart: pool of %d memory nodes of %d bytes exceeds the slot address space (%d nodes of %d bytes)",
			p.MemoryNodes(), p.Config().NodeBytes, maxSlotMN, int64(maxSlotOffset))
	}
	t := &Tree{cn: cn, opts: opts, lf: leafFormat{births: opts.Reclaim}, line: writeLine(p.Config()), retryBudget: opts.RetryBudget,
		rd:    rdwc.New(rdwc.Options{DisableReads: opts.NoReadDelegation, DisableWrites: opts.NoWriteCombining}),
		cache: newCache(opts)}
	ctx := context.Background()
	s, err := t.session()
	if err != nil {
		return nil, err
	}
	defer t.release(s)
	region, err := s.c.Named(ctx, regionPrefix+opts.Name, regionBytes)
	if err != nil {
		return nil, fmt.Errorf("smart: open %q: %w", opts.Name, err)
	}
	t.rootSlot = region
	t.nodeBytes = p.Config().NodeBytes
	t.maxLeaf = p.MaxAllocBytes()
	t.placed = make([]atomic.Uint64, p.MemoryNodes())
	if err := s.checkFormat(ctx, region); err != nil {
		return nil, fmt.Errorf("smart: open %q: %w", opts.Name, err)
	}
	// What closed compute nodes left, taken before this one allocates,
	// and given back if it fails.
	leaves := t.adopt(ctx, s.c)
	err = s.initRoot(ctx, region)
	if err == nil {
		err = t.joinRegistry(ctx, s.c)
	}
	if err != nil {
		t.giveBack(ctx, s.c, leaves)
		return nil, fmt.Errorf("smart: open %q: %w", opts.Name, err)
	}
	t.settle(leaves)
	return t, nil
}

// writeLine returns the granularity at which the bytes of one WRITE land
// together: the lines of the simulator's Strict ordering, and otherwise a
// cache line, the unit in which RDMA hardware may land a WRITE's bytes out
// of order (Ziegler et al., SIGMOD'23; invariant I7).
func writeLine(cfg remote.Config) uint64 {
	if cfg.Sim != nil && cfg.Sim.Profile.LineBytes > 0 {
		return uint64(cfg.Sim.Profile.LineBytes)
	}
	return 64
}

// oldFormats names the formats of earlier versions of this package, which
// Open refuses by name.
var oldFormats = map[uint64]string{
	formatMagicV1: "SMARTv1, 64-byte leaf classes",
	formatMagicV2: "SMARTv2, the leaf checksum after the meta word",
	formatMagicV3: "SMARTv3, 16-byte leaf classes and a checksum word",
	formatMagicV4: "SMARTv4, no NODE_2",
	formatMagicV5: "SMARTv5, NODE_4 under dense nodes, NODE_8 growing to NODE_16",
}

// checkFormat sets the tree's format word if the tree is new, and fails
// with ErrOptionsMismatch or ErrCorrupt if it holds another.
func (s *session) checkFormat(ctx context.Context, region remote.Addr) error {
	want := formatWord(s.t.opts)
	old, err := s.c.CAS(ctx, region.Add(8), 0, want)
	switch {
	case err != nil:
		return err
	case old == 0 || old == want:
		return nil
	case oldFormats[old&formatMagicMask] != "":
		return fmt.Errorf("%w: the tree was created by an earlier version of this package (format %s), which this one cannot read", ErrCorrupt, oldFormats[old&formatMagicMask])
	case old&formatMagicMask != formatMagic:
		return fmt.Errorf("%w: region holds another structure (magic %#x)", ErrCorrupt, old)
	}
	return fmt.Errorf("%w: the tree uses %s, these options %s", ErrOptionsMismatch, variantName(old), variantName(want))
}

// initRoot creates the root node if the tree is new. The root is an
// internal node at depth 0 with no prefix whose address never changes (by
// size class it is created as a NODE_256, which never moves); its slot in
// the named region carries its type.
func (s *session) initRoot(ctx context.Context, region remote.Addr) error {
	w, err := s.readWord(ctx, region)
	if err != nil || w != 0 {
		return err
	}
	typ := node4
	if !s.t.opts.PaperNodes {
		typ = node256
	}
	a, err := s.allocOn(ctx, -1, s.t.nodeAlloc(typ), addrAlign)
	if err != nil {
		return err
	}
	img := make([]byte, typ.readBytes())
	binary.LittleEndian.PutUint64(img[nodeRevOff:], uint64(region))
	binary.LittleEndian.PutUint64(img[nodeHeaderOff:], uint64(makeHeader(0, typ, nil)))
	if err := s.c.Write(ctx, a, img); err != nil {
		return err
	}
	_, err = s.c.CAS(ctx, region, 0, uint64(nodeSlot(0, typ, a)))
	return err // a lost race leaves the other opener's root in place
}

// nodeAlloc is the allocation of a new internal node of type typ: its
// size class, or room for 256 slots (and the lock word of LockedInternal)
// with Options.PaperNodes.
func (t *Tree) nodeAlloc(typ nodeType) int {
	if t.opts.PaperNodes {
		return nodeAllocBytes
	}
	return typ.allocBytes()
}

// mayBeNode reports whether a could be the address of an internal node of
// the tree: 16-byte aligned, on one of the pool's memory nodes, with room
// for a node's header below the memory node's end. unfinishedMove checks
// addresses it derives from words that may not be what it hopes.
func (t *Tree) mayBeNode(a remote.Addr) bool {
	return !a.IsNil() && a.MN() < t.cn.Pool().MemoryNodes() && a.Offset()%addrAlign == 0 &&
		int64(a.Offset())+nodeHeaderBytes <= t.nodeBytes
}

// nodeReadBytes is how much of the node sl names a walk of the whole
// structure reads: all 256 slots with Options.PaperNodes (slots behind the
// type may be in use while a type switch completes), else its type's.
func (t *Tree) nodeReadBytes(sl slot) int {
	if t.opts.PaperNodes {
		return nodeAllocBytes
	}
	return sl.nodeType().readBytes()
}

// Close releases the tree's compute-node state; the remote tree stays for
// other compute nodes. Operations after Close fail with ErrClosed. Close is
// idempotent: a later Close does nothing and returns nil.
func (t *Tree) Close() error {
	if t == nil || t.cn == nil {
		return nil // never opened
	}
	if !t.closed.Swap(true) {
		t.rd.Close(ErrClosed)
		t.leaveRegistry()
	}
	return nil
}

// Name returns the tree's name in the pool ("" for a Tree not made by
// Open).
func (t *Tree) Name() string {
	if t == nil {
		return ""
	}
	return t.opts.Name
}

// errNotOpened is the error of a call on a Tree not made by Open.
var errNotOpened = fmt.Errorf("%w: a smart.Tree not made by Open", ErrClosed)

// usable returns why t cannot run an operation, if it cannot: it was not
// made by Open (a zero or nil Tree), or it is closed.
func (t *Tree) usable() error {
	switch {
	case t == nil || t.cn == nil:
		return errNotOpened
	case t.closed.Load():
		return ErrClosed
	}
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// checkKey validates a key.
func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLong, len(key), MaxKeyLen)
	}
	return nil
}

// wrapRemote turns the pool's closed error, and that of a registry node
// closed by a Close that raced the operation, into the index's.
func wrapRemote(err error) error {
	if (errors.Is(err, remote.ErrClosed) || errors.Is(err, registry.ErrClosed)) && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
