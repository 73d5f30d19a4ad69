package sherman

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Tree is a Sherman B+tree opened on one compute node. It implements
// index.Index and is safe for concurrent use by the goroutines of that node.
// Open one Tree per compute node and name: the Tree owns the node's local
// lock table and index cache.
type Tree struct {
	cn    *remote.ComputeNode
	opts  Options
	g     geometry
	meta  remote.Addr // named region: word 0 root address, word 1 descriptor
	root  atomic.Pointer[rootRef]
	cache *cache // nil if disabled
	locks *lockTable
	rdwc  *rdwc.Table    // nil unless Options.RDWC
	reg   *registry.Node // the compute node's registry membership

	closed atomic.Bool

	mu       sync.Mutex // guards idle, unburied and stale; never held across a verb or a wait
	idle     []*session
	unburied []*registry.Member // crashed clients not yet marked dead (recovery.go)
	stale    []remote.Addr      // pages whose global words crashed receivers of hand-overs left (hocl.go)

	hasUnburied atomic.Bool // unburied or stale is not empty
	// crashesSeen is the compute node's count of crashed clients
	// (remote.ComputeNode.Crashes) when the idle sessions were last looked
	// through for crashed ones (buryIdle).
	crashesSeen atomic.Uint64

	stats counters
}

// rootRef is the compute node's view of the root: its address and, once a
// read showed it, its level (-1 if unknown).
type rootRef struct {
	addr  remote.Addr
	level int
}

const (
	metaBytes    = 64
	offMetaRoot  = 0
	offMetaDescr = 8
	offMetaLocks = 16
	offMetaDepot = 24 // depot.go
)

// Open opens the tree opts.Name in cn's pool, creating it (an empty leaf as
// root) on first use. The pool needs an on-chip region for HOCL's global
// locks (remote.Config.OnChipBytes must not be negative) and memory nodes
// that can hold a page. The compute node joins the pool's client registry
// (internal/registry, on memory node 0), whose tags the tree's lock words
// hold. Errors wrap ErrBadOptions, ErrOptionsMismatch (the tree exists with
// another geometry or LockTableSize), the registry's or those of package
// remote.
func Open(cn *remote.ComputeNode, opts Options) (*Tree, error) {
	if cn == nil {
		return nil, fmt.Errorf("sherman: Open: %w: nil compute node", remote.ErrBadRequest)
	}
	opts, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	g, err := newGeometry(opts)
	if err != nil {
		return nil, err
	}
	cfg := cn.Pool().Config()
	words := max(cfg.OnChipBytes, 0) / 8 // negative: no on-chip region
	switch {
	case words == 0:
		return nil, fmt.Errorf("%w: the pool has no on-chip region for HOCL's locks", ErrBadOptions)
	case opts.LockTableSize > words:
		return nil, fmt.Errorf("%w: LockTableSize %d exceeds the %d words of the on-chip region",
			ErrBadOptions, opts.LockTableSize, words)
	case int64(g.pageBytes) > cn.Pool().MaxAllocBytes():
		return nil, fmt.Errorf("%w: pages of %d bytes exceed what a memory node can hold (%d of its %d bytes)",
			ErrBadOptions, g.pageBytes, cn.Pool().MaxAllocBytes(), cfg.NodeBytes)
	}
	t := &Tree{cn: cn, opts: opts, g: g}
	if opts.CacheBytes > 0 {
		t.cache = newCache(&t.g, opts.CacheBytes, uint64(cn.ID()))
	}
	if opts.RDWC {
		t.rdwc = rdwc.New(rdwc.Options{})
	}
	ctx := context.Background()
	c := cn.NewClient()
	if t.reg, err = registry.Join(ctx, c, registry.Options{Lease: opts.Lease}); err != nil {
		return nil, fmt.Errorf("sherman: joining the registry: %w", err)
	}
	s, err := t.newSession(ctx, c)
	if err != nil {
		return nil, err
	}
	// The redo slots come after the lock table: settling what a previous
	// incarnation of the client slot left takes locks.
	err = s.open(ctx)
	if err == nil {
		err = s.initRedo(ctx)
	}
	if err != nil {
		s.giveBack(ctx)
		t.discard(ctx, s)
		return nil, err
	}
	t.release(s)
	return t, nil
}

// open finds or creates the tree's root.
func (s *session) open(ctx context.Context) error {
	t := s.t
	meta, err := s.c.Named(ctx, regionPrefix+t.opts.Name, metaBytes)
	if err != nil {
		return err
	}
	t.meta = meta
	var word, locks [8]byte
	ops := []remote.Op{
		remote.CAS(meta.Add(offMetaDescr), 0, t.g.descriptor()),
		remote.Read(meta.Add(offMetaRoot), word[:]),
		remote.Read(meta.Add(offMetaLocks), locks[:]),
	}
	if err := s.c.Do(ctx, ops); err != nil {
		return err
	}
	if old := ops[0].Old; old != 0 && old != t.g.descriptor() {
		return fmt.Errorf("%w: tree %q has descriptor %#x, these options give %#x",
			ErrOptionsMismatch, t.opts.Name, old, t.g.descriptor())
	}
	if err := s.openLocks(ctx, le.Uint64(locks[:])); err != nil {
		return err
	}
	// What closed compute nodes left, taken before this one allocates
	// (and given back if Open fails).
	s.adopt(ctx)
	root := remote.Addr(le.Uint64(word[:]))
	if root == 0 {
		// Create an empty leaf and race to install it; a loser's page stays
		// unused (it is never handed out again).
		leaf, err := s.alloc(ctx)
		if err != nil {
			return err
		}
		h := header{version: 1, highInf: true}
		t.g.encodeLeaf(s.buf[0], &h, nil)
		if err := s.c.Write(ctx, leaf, s.buf[0][:t.g.leafBytes]); err != nil {
			return err
		}
		old, err := s.c.CAS(ctx, meta.Add(offMetaRoot), 0, uint64(leaf))
		if err != nil {
			return err
		}
		if root = remote.Addr(old); old == 0 {
			root = leaf
		}
	}
	t.root.Store(&rootRef{addr: root, level: -1})
	return nil
}

// Lock descriptor: the word at offMetaLocks records the tree's
// LockTableSize, magic:8 | size:56, so that every compute node maps a page
// to the same global lock word.
const lockMagic = 0x4c << 56

func lockDescriptor(size int) uint64 { return lockMagic | uint64(size) }

// openLocks agrees with the tree on LockTableSize, given the lock
// descriptor read (0 if none yet), and creates the local lock table. Only
// an opener whose geometry matched gets here, so the first of them records
// its size.
func (s *session) openLocks(ctx context.Context, rec uint64) error {
	t := s.t
	cfg := t.cn.Pool().Config()
	words := max(cfg.OnChipBytes, 0) / 8 // negative: no on-chip region
	if rec == 0 {
		size := t.opts.LockTableSize
		if size == 0 {
			size = words
		}
		old, err := s.c.CAS(ctx, t.meta.Add(offMetaLocks), 0, lockDescriptor(size))
		if err != nil {
			return err
		}
		if rec = old; old == 0 {
			rec = lockDescriptor(size)
		}
	}
	size := int(rec &^ lockMagic)
	switch {
	case rec&^(1<<56-1) != lockMagic || size == 0:
		return corrupt("tree %q has lock descriptor %#x", t.opts.Name, rec)
	case t.opts.LockTableSize != 0 && t.opts.LockTableSize != size:
		return fmt.Errorf("%w: tree %q uses LockTableSize %d, these options %d",
			ErrOptionsMismatch, t.opts.Name, size, t.opts.LockTableSize)
	case size > words:
		return fmt.Errorf("%w: tree %q uses LockTableSize %d, more than the %d words of the on-chip region",
			ErrOptionsMismatch, t.opts.Name, size, words)
	}
	t.opts.LockTableSize = size
	t.locks = newLockTable(cfg.MemoryNodes, size, t.opts.HandOver)
	return nil
}

// Close releases the tree's compute-node state (index cache) and leaves the
// registry: the members of idle clients are closed, and the compute node's
// membership if no operation is running. Operations after Close fail with
// index.ErrClosed; the remote tree stays for other compute nodes. Close is
// idempotent.
func (t *Tree) Close() error {
	if t == nil || t.cn == nil {
		return nil // never opened
	}
	if t.closed.Swap(true) {
		return nil
	}
	if t.cache != nil {
		t.cache.clear()
	}
	if t.rdwc != nil {
		t.rdwc.Close(index.ErrClosed)
	}
	t.leaveRegistry()
	return nil
}

// Options returns the options the tree was opened with, defaults filled in.
func (t *Tree) Options() Options {
	if t == nil {
		return Options{}
	}
	return t.opts
}

// session is the per-operation state of one client: a remote.Client used
// by one goroutine at a time, its registry member, scratch buffers and the
// traversal path.
type session struct {
	t       *Tree
	c       *remote.Client
	ctx     context.Context // the operation's (session), which bounds its upkeep (bury); nil between operations
	m       *registry.Member
	tag     uint64 // this client's global lock word value: its registry tag
	retries int
	buf     [3][]byte                 // page buffers
	ops     []remote.Op               // scratch batch
	path    [maxLevel + 1]remote.Addr // pages visited per level by the last descent
	w       waiter                    // local lock queue node
	scan    scanner                   // the buffers of the session's scans

	// Recovery (recovery.go).
	redo      []remote.Addr // redo slot per memory node (nil with NoRedo)
	rec, img  []byte        // scratch redo record and image
	wops      []remote.Op   // scratch page write
	rbuf      []byte        // page buffer of repairs
	tagWord   [8]byte       // the tag a repair leaves in a global word (retag)
	recovered int           // locks taken over
	// prewatch holds, during Recover, the judgements of held global words
	// that its first walk began (by word address): taking one over waits
	// for the lease since then, not for a lease of its own.
	prewatch  map[remote.Addr]*registry.Watch
	locked    bool // the session holds a lock (helpTorn must not take another)
	verifying bool // Verify reads: report, never repair
}

// session returns an idle session, or a new one with a new client, for an
// operation whose context is ctx. Sessions are reused last-in first-out so
// that a goroutine running operations back to back keeps its client. The
// upkeep it runs (a new client's registration, the heartbeat, marking
// crashed clients dead) is bounded by ctx.
func (t *Tree) session(ctx context.Context) (*session, error) {
	s, err := t.anySession(ctx)
	if err != nil {
		return nil, err
	}
	s.retries = 0
	s.path = [maxLevel + 1]remote.Addr{}
	s.ctx = ctx
	s.touch(ctx)
	if t.hasUnburied.Load() {
		s.markBuried(ctx)
	}
	s.c.ChargeOp()
	return s, nil
}

// anySession returns an idle session or a new one, registered under ctx.
func (t *Tree) anySession(ctx context.Context) (*session, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if n := t.cn.Crashes(); n != t.crashesSeen.Load() {
		t.buryIdle(ctx, n)
	}
	t.mu.Lock()
	var s *session
	if n := len(t.idle); n > 0 {
		s = t.idle[n-1]
		t.idle = t.idle[:n-1]
	}
	t.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := t.newSession(ctx, t.cn.NewClient())
	if err != nil {
		return nil, err
	}
	if err := s.initRedo(ctx); err != nil {
		t.discard(ctx, s)
		return nil, err
	}
	return s, nil
}

// newSession returns a session of client c, registered in the registry.
func (t *Tree) newSession(ctx context.Context, c *remote.Client) (*session, error) {
	m, err := t.reg.Register(ctx, c)
	if err != nil {
		if c.Crashed() { // a client replaced before it served: no member to mark
			t.stats.crashed.Add(1)
		}
		return nil, fmt.Errorf("sherman: registering a client: %w", err)
	}
	s := &session{t: t, c: c, m: m, tag: m.Tag()}
	for i := range s.buf {
		s.buf[i] = make([]byte, t.g.pageBytes)
	}
	s.w.c = c
	return s, nil
}

// release returns s to the idle list, or, if its client crashed, drops it:
// its member is marked dead (so that its locks are taken over at once) and
// the next operation gets a new client.
func (t *Tree) release(s *session) {
	if s.c.Crashed() {
		t.stats.crashed.Add(1)
		ctx := s.ctx
		if ctx == nil { // a session that served no operation
			ctx = context.Background()
		}
		t.bury(ctx, s)
		return
	}
	s.ctx = nil
	t.mu.Lock()
	t.idle = append(t.idle, s)
	t.mu.Unlock()
}

// retry consumes one unit of the operation's retry budget and returns an
// error wrapping index.ErrContention once it is exhausted.
func (s *session) retry(cause string, a remote.Addr) error {
	s.retries++
	s.t.stats.retries.Add(1)
	if s.retries > s.t.opts.RetryBudget {
		return fmt.Errorf("sherman: %s at %v after %d retries: %w", cause, a, s.t.opts.RetryBudget, index.ErrContention)
	}
	return nil
}

// errNotOpened is the error of a call on a Tree not made by Open.
var errNotOpened = fmt.Errorf("%w: a sherman.Tree not made by Open", index.ErrClosed)

// usable returns why t cannot run an operation, if it cannot: it was not
// made by Open (a zero or nil Tree), or it is closed.
func (t *Tree) usable() error {
	switch {
	case t == nil || t.cn == nil:
		return errNotOpened
	case t.closed.Load():
		return index.ErrClosed
	}
	return nil
}

// closedError makes an error of a closed pool, or of a registry node closed
// by a Close that raced the operation, also satisfy
// errors.Is(err, index.ErrClosed), as SMART's do.
func closedError(err error) error {
	if (errors.Is(err, remote.ErrClosed) || errors.Is(err, registry.ErrClosed)) && !errors.Is(err, index.ErrClosed) {
		return fmt.Errorf("%w: %w", index.ErrClosed, err)
	}
	return err
}

// corrupt returns an error wrapping index.ErrCorrupt.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("sherman: %s: %w", fmt.Sprintf(format, args...), index.ErrCorrupt)
}

// alloc allocates one page, line-aligned, round-robin over memory nodes.
func (s *session) alloc(ctx context.Context) (remote.Addr, error) {
	a, err := s.c.AllocOn(context.WithoutCancel(ctx), -1, s.t.g.pageBytes, lineBytes)
	if err != nil {
		return 0, fmt.Errorf("sherman: allocating a page: %w", err)
	}
	return a, nil
}

// checkKey validates a key argument for t, which must be usable (made by
// Open and not closed).
func (t *Tree) checkKey(key []byte) error {
	if err := t.usable(); err != nil {
		return err // a Tree not made by Open has no KeySize
	}
	switch {
	case len(key) == 0:
		return index.ErrEmptyKey
	case len(key) > t.g.keySize:
		return fmt.Errorf("%w: %d bytes, the tree's KeySize is %d", index.ErrKeyTooLong, len(key), t.g.keySize)
	}
	return nil
}

// errNoLevel: a descent asked for a level above the root's.
var errNoLevel = errors.New("sherman: level above the root")

type counters struct {
	cacheHits, cacheMisses, cacheInval atomic.Uint64
	globalLocks, handOvers, casFails   atomic.Uint64
	tornReads, retries                 atomic.Uint64
	leafSplits, innerSplits, rootGrows atomic.Uint64
	unlinked                           atomic.Uint64
	crashed, recovered, redone         atomic.Uint64
}

// Stats returns a snapshot of the tree's counters (the Sherman fields of
// index.Stats). A cache lookup is one location of a leaf operation's leaf;
// a hit one the cache routed to the right leaf, with no internal page read
// (a cached page found stale counts as a miss). Crashed counts the clients
// dropped after they crashed (remote.Client.Crashed), Recovered the global locks
// this compute node took over from dead holders.
func (t *Tree) Stats() index.Stats {
	if t == nil || t.cn == nil {
		return index.Stats{}
	}
	c := &t.stats
	var shared rdwc.Stats
	if t.rdwc != nil {
		shared = t.rdwc.Stats()
	}
	hits, inval := c.cacheHits.Load(), c.cacheInval.Load()
	var entries int
	var bytes int64
	if t.cache != nil {
		entries, bytes = t.cache.size()
	}
	return index.Stats{
		CacheEntries: entries, CacheBytes: bytes,
		Delegated: shared.Delegated, Combined: shared.Combined,
		CacheLookups: hits + c.cacheMisses.Load() - inval, CacheHits: hits - inval, CacheInvalidations: inval,
		GlobalLocks: c.globalLocks.Load(), HandOvers: c.handOvers.Load(), LockCASFailures: c.casFails.Load(),
		TornReads: c.tornReads.Load(), Retries: c.retries.Load(),
		LeafSplits: c.leafSplits.Load(), InnerSplits: c.innerSplits.Load(), RootGrowths: c.rootGrows.Load(),
		UnlinkedSplits: c.unlinked.Load(),
		Crashed:        c.crashed.Load(), Recovered: c.recovered.Load(),
	}
}

var _ index.Index = (*Tree)(nil)
