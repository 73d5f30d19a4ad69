package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// Errors of the registry.
var (
	// ErrFull: every block of the registry is claimed by a live compute
	// node, or a block has no free client slot left and none can be claimed.
	ErrFull = errors.New("registry: full")
	// ErrMismatch: the pool's registry was created with another geometry.
	ErrMismatch = errors.New("registry: geometry mismatch")
	// ErrClosed: the node or member was closed.
	ErrClosed = errors.New("registry: closed")
)

// Options configure a registry. The zero value works.
type Options struct {
	// Blocks is the number of blocks (compute nodes at once); at most
	// 65536. Zero means 256, or fewer on a pool whose memory nodes are so
	// small that the blocks would take more than a sixteenth of one (at
	// least 1): every compute node of a pool sees the same size, so the
	// default agrees. Every compute node of a pool must agree.
	Blocks int
	// Clients is the number of client slots per block, 32 if zero; at most
	// 256. A compute node with more clients claims more blocks.
	Clients int
	// Lease is how long a block's heartbeat must stand still, on the
	// observer's clock, before its clients are judged dead; DefaultLease
	// (1 s) if zero.
	Lease time.Duration
	// Interval is the least time between two heartbeats of a compute node;
	// Lease/10 if zero.
	Interval time.Duration
	// Free receives each object Reclaim frees; nil means the reclaiming
	// client's remote.Client.Free (the compute node's free lists). A
	// structure that keeps its own free lists (so that its objects are
	// reused only as objects of the same kind) sets it. Local to the
	// compute node.
	Free func(a remote.Addr, size int) error
}

// DefaultLease is Options.Lease when zero: a second, so that a process
// that stalls (scheduling, garbage collection on a loaded machine) is not
// judged dead while it holds a lock; a client that a tree sees crash is
// judged dead at once, whatever the lease.
const DefaultLease = time.Second

func (o Options) withDefaults(nodeBytes int64) (Options, error) {
	if o.Clients == 0 {
		o.Clients = 32
	}
	if o.Blocks == 0 {
		o.Blocks = 256
		for o.Blocks > 1 && int64(blocksBytes(o.Blocks, o.Clients)) > nodeBytes/16 {
			o.Blocks /= 2
		}
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Interval == 0 {
		o.Interval = o.Lease / 10
	}
	switch {
	case o.Blocks < 0 || o.Blocks > maxBlocks:
		return o, fmt.Errorf("registry: %w: Blocks %d outside 1..%d", remote.ErrBadRequest, o.Blocks, maxBlocks)
	case o.Clients < 0 || o.Clients > maxClients:
		return o, fmt.Errorf("registry: %w: Clients %d outside 1..%d", remote.ErrBadRequest, o.Clients, maxClients)
	case o.Lease < 0 || o.Interval < 0 || o.Interval >= o.Lease:
		return o, fmt.Errorf("registry: %w: Interval %v and Lease %v: want 0 < Interval < Lease", remote.ErrBadRequest, o.Interval, o.Lease)
	}
	return o, nil
}

// Node is one compute node's membership: the blocks it claimed, its members,
// its epoch and the objects it retired. Safe for concurrent use by its
// members.
type Node struct {
	opts   Options
	region remote.Addr // the header
	body   remote.Addr // the blocks

	e atomic.Uint64 // the node's epoch; pins take it
	// lastBeat is the client time of the last heartbeat sent (written
	// under mu); gaps counts the heartbeats sent Lease/2 or more after the
	// one before (see Lost), and gapEnd is the client time of the last of
	// them (math.MinInt64 before the first; see Judged).
	lastBeat atomic.Int64
	gaps     atomic.Uint64
	gapEnd   atomic.Int64

	mu       sync.Mutex
	closed   bool
	claiming bool // a member is claiming a block (Register)
	blocks   []*block
	members  []*Member // registered, for the published epoch
	beats    uint64
	limbo    []Retired
	seen     map[int]observation // other blocks' heartbeats, for Reclaim
}

// block is a claimed block.
type block struct {
	idx   int
	owner uint64   // the owner word this node wrote
	incs  []uint64 // last incarnation of each client slot
	used  []bool
	dir   remote.Addr // the redo directory, 0 until known (redo.go)
}

// Join claims a block of the pool's registry for c's compute node, creating
// the registry on first use. c is used for this call only.
func Join(ctx context.Context, c *remote.Client, opts Options) (*Node, error) {
	opts, err := opts.withDefaults(c.Pool().Config().NodeBytes)
	if err != nil {
		return nil, err
	}
	region, err := c.Named(ctx, RegionName, headerBytes)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	want := geometry(opts.Blocks, opts.Clients)
	got, err := c.CAS(ctx, region, 0, want)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if got != 0 && got != want {
		b, k, perr := parseGeometry(got)
		if perr != nil {
			return nil, perr
		}
		return nil, fmt.Errorf("%w: the pool's registry has %d blocks of %d clients, Options ask for %d of %d",
			ErrMismatch, b, k, opts.Blocks, opts.Clients)
	}
	body, err := c.Named(ctx, RegionName+"/blocks", blocksBytes(opts.Blocks, opts.Clients))
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	n := &Node{opts: opts, region: region, body: body, seen: make(map[int]observation)}
	n.gapEnd.Store(math.MinInt64)
	if _, err := n.claim(ctx, c); err != nil {
		return nil, err
	}
	return n, nil
}

// claim claims a free block. Like every method of the package it holds no
// mutex across a verb (a parked simulated client would block the others).
// A node joining a registry whose blocks are all claimed waits a lease and
// takes over a block whose heartbeat stood still all that time: its node
// died without closing (every lock tag of its clients is then judged dead,
// their slots getting new incarnations here).
func (n *Node) claim(ctx context.Context, c *remote.Client) (*block, error) {
	hdr := make([]byte, blockBytes*n.opts.Blocks)
	if err := c.Read(ctx, n.blockAddr(0), hdr); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	epoch, err := n.readEpoch(ctx, c)
	if err != nil {
		return nil, err
	}
	for b := range n.opts.Blocks {
		if owner := binary.LittleEndian.Uint64(hdr[blockBytes*b:]); owner&1 == 0 {
			if blk, err := n.take(ctx, c, b, owner, hdr, epoch); blk != nil || err != nil {
				return blk, err
			}
		}
	}
	n.mu.Lock()
	joining := len(n.blocks) == 0
	n.mu.Unlock()
	if !joining {
		// A live node does not wait a lease without a heartbeat.
		return nil, fmt.Errorf("%w: all %d blocks are claimed", ErrFull, n.opts.Blocks)
	}
	start := c.Now()
	for attempt := 0; c.Now()-start <= n.opts.Lease; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.Backoff(attempt)
	}
	now := make([]byte, len(hdr))
	if err := c.Read(ctx, n.blockAddr(0), now); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	for b := range n.opts.Blocks {
		was, is := hdr[blockBytes*b:blockBytes*b+hbOff+8], now[blockBytes*b:blockBytes*b+hbOff+8]
		if string(was) != string(is) {
			continue // owner or heartbeat moved: alive, or claimed meanwhile
		}
		if blk, err := n.take(ctx, c, b, binary.LittleEndian.Uint64(is), now, epoch); blk != nil || err != nil {
			return blk, err
		}
	}
	return nil, fmt.Errorf("%w: all %d blocks are claimed by live nodes", ErrFull, n.opts.Blocks)
}

// take claims block b, whose owner word was owner (free, or a dead node's)
// in hdr, the block headers read: a CAS to a new incarnation, then the
// block's client words, the first heartbeat and its redo directory. It
// returns nil and no error if another node claimed the block first.
func (n *Node) take(ctx context.Context, c *remote.Client, b int, owner uint64, hdr []byte, epoch uint64) (*block, error) {
	mine := (owner>>1+1)<<1 | 1
	old, err := c.CAS(ctx, n.blockAddr(b), owner, mine)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if old != owner {
		return nil, nil
	}
	words := make([]byte, 8*n.opts.Clients)
	if err := c.Read(ctx, n.clientAddr(b, 0), words); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	blk := &block{idx: b, owner: mine, incs: make([]uint64, n.opts.Clients), used: make([]bool, n.opts.Clients),
		dir: remote.Addr(binary.LittleEndian.Uint64(hdr[blockBytes*b+dirOff:]))}
	for k := range blk.incs {
		blk.incs[k] = binary.LittleEndian.Uint64(words[8*k:]) >> 2
	}
	if owner&1 != 0 {
		// Taken over from a dead node: its clients' tags are dead at once
		// (the heartbeat that now moves is this node's, not theirs).
		for k := range blk.incs {
			if w := binary.LittleEndian.Uint64(words[8*k:]); w&3 == stateLive {
				binary.LittleEndian.PutUint64(words[8*k:], w&^3|stateDead)
			}
		}
		if err := c.Write(ctx, n.clientAddr(b, 0), words); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
	}
	// A heartbeat that moves and an epoch no later than any pin of this
	// node, before any member can pin or hold a lock.
	n.mu.Lock()
	n.e.Store(max(n.e.Load(), epoch))
	n.beats++
	beat := n.beatBytes()
	n.mu.Unlock()
	if err := c.Write(ctx, n.blockAddr(b).Add(hbOff), beat); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	n.mu.Lock()
	n.lastBeat.Store(int64(c.Now()))
	n.blocks = append(n.blocks, blk)
	n.mu.Unlock()
	// The redo directory now, while memory is likely free: members
	// then find it on a full pool.
	if _, err := n.directory(ctx, c, blk); err != nil {
		return nil, err
	}
	return blk, nil
}

// Close leaves the registry: every member must be closed first. c is used
// for this call only.
func (n *Node) Close(ctx context.Context, c *remote.Client) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	if m := len(n.members); m > 0 {
		n.mu.Unlock()
		return fmt.Errorf("registry: Close with %d members registered", m)
	}
	n.closed = true
	blocks := n.blocks
	n.mu.Unlock()
	for _, b := range blocks {
		if _, err := c.CAS(ctx, n.blockAddr(b.idx), b.owner, b.owner&^1); err != nil {
			return fmt.Errorf("registry: %w", err)
		}
	}
	return nil
}

// Lease returns the node's lease (Options.Lease).
func (n *Node) Lease() time.Duration { return n.opts.Lease }

// Interval returns the node's heartbeat interval (Options.Interval).
func (n *Node) Interval() time.Duration { return n.opts.Interval }

// Epoch returns the node's current epoch.
func (n *Node) Epoch() uint64 { return n.e.Load() }

func (n *Node) blockAddr(b int) remote.Addr { return n.body.Add(uint64(blockBytes * b)) }

func (n *Node) clientAddr(b, k int) remote.Addr {
	return n.body.Add(uint64(blockBytes*n.opts.Blocks + 8*(b*n.opts.Clients+k)))
}

// Reachable reads a word of the registry with c: whether the registry's
// memory node answers, asked before a write to it that may as well wait
// (marking a crashed client dead again): a write that fails stops its
// client (remote.Client.Crashed), a read does not.
func (n *Node) Reachable(ctx context.Context, c *remote.Client) error {
	_, err := n.readEpoch(ctx, c)
	return err
}

func (n *Node) readEpoch(ctx context.Context, c *remote.Client) (uint64, error) {
	var buf [8]byte
	if err := c.Read(ctx, n.region.Add(epochOff), buf[:]); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	return binary.LittleEndian.Uint64(buf[:]), nil
}
