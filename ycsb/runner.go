package ycsb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// Mode selects how a run executes.
type Mode uint8

const (
	// ModeSim runs every client as a simulated thread of the RNIC simulator:
	// time is virtual, and equal configurations give identical results.
	ModeSim Mode = iota
	// ModeLocal runs clients as goroutines on in-process memory; time is the
	// wall clock of this machine.
	ModeLocal
	// ModeShm runs clients as goroutines on memory nodes in shared files
	// (Config.Shm); wall-clock time.
	ModeShm
	// ModeTCP runs clients as goroutines on memnode servers reached over
	// TCP (Config.TCP); wall-clock time, verbs carried out by the memory
	// nodes' CPUs.
	ModeTCP
	// ModeFabric runs clients as goroutines on memnode servers reached over
	// libfabric (Config.Fabric; a build with the fabric tag); wall-clock
	// time.
	ModeFabric
)

// modeNames are the names of the modes, by value.
var modeNames = [...]string{"sim", "local", "shm", "tcp", "fabric"}

// ParseMode parses "sim", "local", "shm", "tcp" or "fabric".
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("ycsb: unknown mode %q (want sim, local, shm, tcp or fabric)", s)
}

// String returns the mode's name.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// IndexConfig is what an Opener learns about the run.
type IndexConfig struct {
	// Name is the structure's name in the pool; every compute node of a run
	// opens the same name.
	Name string
	// KeySize is the longest key of the run (KeyType.MaxLen, or the longest
	// trace key); fixed-size indexes size their entries by it.
	KeySize int
	// ValueSize is the size of every value written.
	ValueSize int
	// CacheBytes is the compute node's cache budget: 0 selects the index's
	// default, a negative value disables the cache.
	CacheBytes int64
	// MemoryNodes is the number of memory nodes of the pool.
	MemoryNodes int
}

// Opener opens (creating on first use) the index of a run on one compute
// node. The runner calls it once per compute node, in compute-node order,
// inside a client started with Pool.Go, so it may issue verbs. It returns
// an index or an error (an Opener that returns neither fails the run).
type Opener func(cn *remote.ComputeNode, cfg IndexConfig) (index.Index, error)

// StatsReporter is implemented by indexes that keep counters (both trees
// of this module). The runner reports CacheHits/CacheLookups over the run
// phase, summed over compute nodes, as the cache hit ratio: the share of
// point operations that reached their leaf without reading an internal
// node (index.Stats). The counters are cumulative and safe to read
// concurrently.
type StatsReporter interface {
	Stats() index.Stats
}

// Config describes a run: a pool of MemoryNodes memory nodes, ComputeNodes
// compute nodes with one index each and ClientsPerCN clients per compute
// node, a load phase and a measured run phase.
//
// The runner charges no client CPU time itself: indexes charge their own
// per-operation CPU cost (remote.Profile.CPUPerOp) through
// remote.Client.Compute, since only they hold the clients.
type Config struct {
	// Index names the index in reports.
	Index string
	// Open opens the index on each compute node (required).
	Open Opener
	// CacheBytes is passed to Open in IndexConfig.
	CacheBytes int64

	// Workload, Keys, Records and Ops define the generated operations:
	// Records records are loaded, then Ops operations of Workload run,
	// split evenly over the clients (a LoadOnly workload measures the load
	// of Records records instead). A workload that reads, updates or scans
	// needs Records ≥ 1.
	Workload Workload
	Keys     KeyType
	Records  int64
	Ops      int64
	// WarmupOps operations of Workload run between the load and the
	// measured run phase, on the same clients and with the run phase's key
	// distribution (streams of their own), so that the measurement starts
	// with warm caches. They count in no figure but Result.WarmupOps and
	// Result.WarmupRTTPerOp. Zero means DefaultWarmup(Records,
	// ComputeNodes) keys' worth: that many operations, divided by the keys
	// an operation of the workload visits on average (a scan visits its
	// length, 50.5 for YCSB E), so that a scan workload's warm-up costs
	// what a point workload's does; negative means none. Traces and
	// LoadOnly workloads have no warm-up.
	WarmupOps int64
	// From, if set, is the loaded index the run starts from instead of
	// running its own load phase: it must come from Load with the same
	// load phase (ErrLoadMismatch) and the same Opener (ErrLoadMismatch if
	// it opens indexes of another type than the load's), and the run then
	// gives the same Result as without it. Not with traces, LoadOnly
	// workloads or crash injection.
	From *Loaded
	// Compact, after the load phase, has one client compact the whole
	// index (index.Compacter; nothing for an index that is not one), as
	// part of the load: not measured, its verbs in no figure. It lays out
	// SMART's leaves in key order so that scans read many with one READ;
	// Result.Compacted counts the pairs it moved and Result.MNBytesPerKey
	// includes the memory it took.
	Compact bool
	// ValueSize is the length of every written value (default 8).
	ValueSize int

	// LoadTrace and RunTrace, if RunTrace is set, replace the generated
	// phases: each phase's operations are split into contiguous slices,
	// one per client, as SMART's split_workload.py does. Records and Ops
	// are then taken from the traces. A RunTrace without operations (set
	// but empty) is an error, and so is an operation of either trace of a
	// kind other than OpRead to OpReadModifyWrite or a SCAN whose
	// ScanLength is below 1 (the error names the field and the operation's
	// index). Both traces may hold any of these kinds.
	LoadTrace, RunTrace []Op

	// MemoryNodes, ComputeNodes and ClientsPerCN size the cluster (0: the
	// default, 1 each; negative counts are an error). MemoryNodes is at
	// most remote.MaxMemoryNodes and what the index addresses
	// (Footprint.MaxMemoryNodes).
	MemoryNodes, ComputeNodes, ClientsPerCN int
	// LoadClientsPerCN, if positive, is the clients per compute node of the
	// load phase (default ClientsPerCN), so that runs at several client
	// counts can share one load (Load, Config.From). Not with crash
	// injection.
	LoadClientsPerCN int
	// NodeBytes is each memory node's size (0: enough for the run).
	NodeBytes int64
	// Mode is ModeSim (the default), ModeLocal, ModeShm, ModeTCP or
	// ModeFabric.
	Mode Mode
	// Sim configures the simulator in ModeSim; its Seed is replaced by Seed.
	Sim remote.SimConfig
	// Shm, TCP and Fabric reach the memory nodes of ModeShm, ModeTCP and
	// ModeFabric. Their memory nodes outlive the run, so each run's index
	// gets a name of its own there. NodeBytes and MemoryNodes must be 0 or
	// match them (with TCP and Fabric, MemoryNodes 0 is the length of their
	// address list).
	Shm    remote.ShmConfig
	TCP    remote.TCPConfig
	Fabric remote.FabricConfig
	// Seed drives the operation streams, the simulator and its crash
	// injection.
	Seed uint64

	// CrashRate, if positive, stops clients at random at an average of
	// CrashRate per second of virtual time during the measured phase (the
	// run phase; for a LoadOnly workload, the load it measures), at random
	// points inside their batches (remote.Pool.InjectCrashes): a prefix of
	// the batch lands, a WRITE may be cut. Operations that return
	// remote.ErrCrashed have an unknown outcome; they are counted in
	// CrashResult.CrashedOps, not as completed or failed. The load and
	// warm-up phases run without crashes. After the run the runner
	// recovers and checks the structure and reports Result.CrashResult.
	// It needs ModeSim, an index that implements index.Recoverer
	// (ErrNotRecoverable) and ValueSize ≥ 8 (every value carries its
	// write's id); at most MaxCrashRate. The check costs memory for every
	// written key and every write (Estimate.CheckBytes).
	CrashRate float64

	// Footprint, if set, describes the index's memory use and limits for
	// the run's IndexConfig (see Estimate); Run rejects keys and values the
	// index cannot store and runs that do not fit before allocating
	// anything. Nil: the estimate counts the records' keys and values and
	// the runner's own memory only.
	Footprint func(IndexConfig) Footprint
	// MemoryLimit is the memory the run may use in bytes: 0 means the
	// machine's (its available memory, and its physical memory for the
	// memory nodes' size), a negative value disables the memory checks.
	MemoryLimit int64
	// MaxRuntime bounds the run's estimated minimum runtime
	// (Estimate.MinRuntime): 0 means DefaultMaxRuntime, a negative value
	// disables the check.
	MaxRuntime time.Duration

	// Progress, if set, is called with the number of operations completed
	// since its last call (load and run phases alike). It is called from
	// client goroutines: it must be safe for concurrent use and must not
	// block.
	Progress func(ops int64)
}

// DefaultWarmup returns the warm-up of a run over records records on
// computeNodes compute nodes: one operation per record per compute node
// (each compute node warms a cache of its own), at most MaxDefaultWarmup.
// After W operations with uniform keys spread over the compute nodes, an
// internal node that covers k of R records has been missed by one compute
// node with probability about exp(-k·W/(R·CNs)): with W = R·CNs and the 16
// or so records under a node just above the leaves of a tree over random
// keys, about 1e-7. Measured on SMART, YCSB-C, 100 k records, 8 compute
// nodes × 32 clients, from cold caches (commit fc2d11e): 1.48 round trips
// per search without warm-up, 1.10 after R·CNs/2 operations, 1.02 after
// R·CNs, 0.99 after 2·R·CNs (read delegation lets searches of one key
// share a round trip).
func DefaultWarmup(records int64, computeNodes int) int64 {
	return min(records*int64(max(computeNodes, 1)), MaxDefaultWarmup)
}

// Defaults of Config.
const (
	// MaxDefaultWarmup bounds DefaultWarmup.
	MaxDefaultWarmup = 10_000_000
	DefaultValueSize = 8
	// maxLatency is the largest latency the histograms track; longer
	// operations are recorded as maxLatency.
	maxLatency = int64(100 * time.Second)
	// progressEvery is how many operations a client completes between two
	// calls of Config.Progress.
	progressEvery = 1024
)

// opStatus is an operation's outcome, YCSB's Return= codes.
type opStatus uint8

const (
	statusOK opStatus = iota
	statusNotFound
	statusError
	numStatuses
)

func (s opStatus) String() string {
	return [...]string{"OK", "NOT_FOUND", "ERROR"}[s]
}

// runner is the state of one Run.
type runner struct {
	cfg  Config
	name string // the index's name in the pool
	pool *remote.Pool
	idx  []index.Index
	hist *history // the writes, with crash injection; nil otherwise
}

// Run executes the load phase and the run phase of cfg and returns the
// measurements of the run phase. Only completed operations count towards
// throughput (an operation that returned an error is counted in
// Result.Errors instead, one stopped by crash injection in
// CrashResult.CrashedOps). A load-phase error aborts the run, and so does
// an operation of any phase that fails with remote.ErrUnavailable: a
// memory node is gone, so every client of the phase stops and Run returns
// that error, naming the phase and the operation, instead of a Result in
// which every later operation failed. In ModeSim every client is a
// simulated thread and every time is virtual: the same Config gives the
// same Result. Run first checks cfg as Validate does and allocates nothing
// if it fails (ErrInvalid, ErrTooLarge, ErrTooLong, remote.ErrOutOfMemory).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	explicitNodes := cfg.NodeBytes != 0
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if err := cfg.fits(explicitNodes); err != nil {
		return nil, err
	}
	var gen *Generator
	if cfg.RunTrace == nil {
		if gen, err = NewGenerator(cfg.Workload, cfg.Keys, uint64(cfg.Records), uint64(cfg.Ops)); err != nil {
			return nil, err
		}
	}
	if cfg.Workload.LoadOnly && cfg.RunTrace == nil {
		return runLoad(ctx, cfg, gen)
	}
	from := cfg.From
	if from == nil {
		if from, err = load(ctx, cfg, explicitNodes, gen); err != nil {
			return nil, err
		}
	} else if err := cfg.loadable(); err != nil {
		return nil, err
	} else if key := cfg.loadKey(explicitNodes); from.key != key {
		return nil, fmt.Errorf("%w: loaded %+v, run %+v", ErrLoadMismatch, from.key, key)
	}
	pool := from.pool
	if pool == nil {
		if pool, _, err = cfg.newPool(cfg.NodeBytes, from.snap); err != nil {
			return nil, err
		}
	}
	defer pool.Close()
	r := &runner{cfg: cfg, pool: pool, name: from.name, hist: from.hist}
	if err := r.open(); err != nil {
		return nil, err
	}
	defer r.close()
	if err := from.opened(r.idx); err != nil {
		return nil, err
	}

	// Warm-up phase.
	var warm phase
	warmBefore := r.snapshot()
	if cfg.WarmupOps > 0 {
		warm = r.phase(ctx, warmPhase, false, func(i, n int) source {
			lo, hi := split(cfg.WarmupOps, i, n)
			return &streamSource{g: gen, s: gen.Stream(r.seed(i, 2)), left: hi - lo}
		})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := warm.unavailable(); err != nil {
			return nil, fmt.Errorf("ycsb: warm-up phase: %w", err)
		}
	}

	// Run phase.
	src := func(i, n int) source {
		lo, hi := split(cfg.Ops, i, n)
		return &streamSource{g: gen, s: gen.Stream(r.seed(i, 1)), left: hi - lo}
	}
	if cfg.RunTrace != nil {
		src = func(i, n int) source { return slice(cfg.RunTrace, i, n) }
	}
	m, err := r.measure(ctx, "run", src)
	if err != nil {
		return nil, err
	}
	res := r.result(from.load, m.run, m.before, m.after)
	res.setWarmup(warm, warmBefore, m.before)
	res.MNBytesPerKey = from.loaded
	res.Compacted = from.compacted
	if err := r.checkCrashes(ctx, res, m); err != nil {
		return nil, err
	}
	return res, nil
}

// measured is a measured phase: its clients, the pool's counters before
// and after it and the crashes injected in it.
type measured struct {
	run           phase
	before, after snapshot
	crashes       uint64
}

// measure runs the measured phase of src (what: "run" or "load"), under
// crash injection if the run asks for it. A phase stopped by an
// unavailable memory node is an error.
func (r *runner) measure(ctx context.Context, what string, src func(i, n int) source) (measured, error) {
	m := measured{before: r.snapshot()}
	if r.cfg.CrashRate > 0 {
		r.pool.InjectCrashes(r.cfg.CrashRate, r.seed(0, 3))
	}
	m.run = r.phase(ctx, runPhase, false, src)
	if r.cfg.CrashRate > 0 {
		m.crashes = r.pool.InjectCrashes(0, 0)
	}
	if err := ctx.Err(); err != nil {
		return m, err
	}
	if err := m.run.unavailable(); err != nil {
		return m, fmt.Errorf("ycsb: %s phase: %w", what, err)
	}
	m.after = r.snapshot()
	return m, nil
}

// checkCrashes recovers and checks the structure after a measured phase
// under crash injection (Result.CrashResult); without it, it does nothing.
func (r *runner) checkCrashes(ctx context.Context, res *Result, m measured) error {
	if r.cfg.CrashRate <= 0 {
		return nil
	}
	res.CrashResult = r.recoverAndCheck(ctx, m.run, m.crashes)
	return ctx.Err()
}

// runLoad runs a LoadOnly workload of a normalized cfg: the measured phase
// is the load itself, on a fresh pool.
func runLoad(ctx context.Context, cfg Config, gen *Generator) (*Result, error) {
	pool, name, err := cfg.newPool(cfg.NodeBytes, nil)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	r, err := newRunner(cfg, pool, name)
	if err != nil {
		return nil, err
	}
	defer r.close()
	m, err := r.measure(ctx, "load", func(i, n int) source { return loadRange(gen, i, n) })
	if err != nil {
		return nil, err
	}
	res := r.result(phase{}, m.run, m.before, m.after)
	res.MNBytesPerKey = per(m.after.stats.AllocBytes-m.after.stats.FreedBytes, cfg.Records)
	if err := r.checkCrashes(ctx, res, m); err != nil {
		return nil, err
	}
	return res, nil
}

// normalized returns cfg with its defaults filled in, or an error wrapping
// ErrInvalid that says which field is invalid.
func (cfg Config) normalized() (Config, error) {
	n, err := cfg.withDefaults()
	if err != nil {
		return cfg, invalidError{err}
	}
	return n, nil
}

// withDefaults returns cfg with its defaults filled in, or an error if a
// field is invalid.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Open == nil {
		return cfg, errors.New("ycsb: Config.Open is required")
	}
	if cfg.Mode > ModeFabric {
		return cfg, fmt.Errorf("ycsb: unknown mode %v", cfg.Mode)
	}
	if err := cfg.checkCluster(); err != nil {
		return cfg, err
	}
	external := cfg.Mode >= ModeShm // memory nodes that exist outside the run
	if !external {
		cfg.MemoryNodes = max(cfg.MemoryNodes, 1)
	}
	cfg.ComputeNodes = max(cfg.ComputeNodes, 1)
	cfg.ClientsPerCN = max(cfg.ClientsPerCN, 1)
	if cfg.ValueSize == 0 {
		cfg.ValueSize = DefaultValueSize
	}
	if cfg.ValueSize < 0 || cfg.Records < 0 || cfg.Ops < 0 || cfg.NodeBytes < 0 {
		return cfg, fmt.Errorf("ycsb: negative value size, records, ops or node bytes")
	}
	if cfg.RunTrace == nil {
		w, err := cfg.Workload.normalized()
		if err != nil {
			return cfg, err
		}
		if err := checkGenerator(w, cfg.Keys, uint64(cfg.Records)); err != nil {
			return cfg, err
		}
	} else if len(cfg.RunTrace) == 0 {
		return cfg, errors.New("ycsb: the run trace has no operations")
	}
	switch {
	case !(cfg.CrashRate >= 0 && cfg.CrashRate <= MaxCrashRate): // also rejects NaN
		return cfg, fmt.Errorf("ycsb: crash rate %v: want 0 (no crashes) up to %.0f per second of virtual time", cfg.CrashRate, MaxCrashRate)
	case cfg.CrashRate > 0 && cfg.Mode != ModeSim:
		return cfg, fmt.Errorf("ycsb: crash injection needs the simulator (ModeSim), not mode %v", cfg.Mode)
	case cfg.CrashRate > 0 && cfg.ValueSize < 8:
		return cfg, fmt.Errorf("ycsb: crash injection needs values of at least 8 bytes (each carries its write's id), not %d", cfg.ValueSize)
	}
	if cfg.LoadTrace != nil && cfg.RunTrace == nil {
		return cfg, errors.New("ycsb: a load trace needs a run trace")
	}
	if err := checkTrace("LoadTrace", cfg.LoadTrace); err != nil {
		return cfg, err
	}
	if err := checkTrace("RunTrace", cfg.RunTrace); err != nil {
		return cfg, err
	}
	switch {
	case cfg.LoadClientsPerCN < 0:
		return cfg, fmt.Errorf("ycsb: negative LoadClientsPerCN %d", cfg.LoadClientsPerCN)
	case cfg.LoadClientsPerCN == 0, cfg.Workload.LoadOnly:
		cfg.LoadClientsPerCN = cfg.ClientsPerCN
	case cfg.CrashRate > 0 && cfg.LoadClientsPerCN != cfg.ClientsPerCN:
		return cfg, errors.New("ycsb: crash injection needs the load phase's clients to be the run's (LoadClientsPerCN)")
	}
	switch {
	case cfg.RunTrace != nil:
		cfg.Records, cfg.Ops = int64(len(cfg.LoadTrace)), int64(len(cfg.RunTrace))
		cfg.WarmupOps = 0
	case cfg.Workload.LoadOnly:
		cfg.Ops = cfg.Records
		cfg.WarmupOps = 0
	case cfg.WarmupOps == 0:
		cfg.WarmupOps = int64(math.Ceil(float64(DefaultWarmup(cfg.Records, cfg.ComputeNodes)) / cfg.Workload.KeysPerOp()))
	case cfg.WarmupOps < 0:
		cfg.WarmupOps = 0
	}
	if cfg.NodeBytes == 0 && !external {
		records := float64(cfg.Records) + float64(cfg.Ops) + float64(cfg.WarmupOps)
		cfg.NodeBytes = defaultNodeBytes(records, cfg.MemoryNodes, cfg.ComputeNodes*cfg.ClientsPerCN)
	}
	return cfg, nil
}

// checkTrace checks the operations of trace, the Config field name, for
// what Run executes (Op.check). The error names the field, the operation's
// index and what is wrong with it.
func checkTrace(name string, trace []Op) error {
	for i := range trace {
		if err := trace[i].check(); err != nil {
			return fmt.Errorf("ycsb: %s[%d]: %w", name, i, err)
		}
	}
	return nil
}

// check returns why op cannot be run (Run) or written to a trace
// (WriteTrace), or nil: a kind outside the defined set (OpRead to
// OpReadModifyWrite), or a SCAN of fewer than 1 pair (index.ScanLimit takes
// a length of 0 or less for no bound: the scan would read the whole index).
func (op *Op) check() error {
	switch {
	case op.Kind >= numOpKinds:
		return fmt.Errorf("unknown operation kind %v", op.Kind)
	case op.Kind == OpScan && op.ScanLength < 1:
		return fmt.Errorf("SCAN of length %d, want at least 1 pair", op.ScanLength)
	}
	return nil
}

// defaultNodeBytes is the default size of each of mns memory nodes for
// records records and clients clients: about 1 KiB per record covers
// either index with room to spare, plus every client's allocation chunk;
// untouched memory costs nothing. (Absurd sizes are rejected by fits, not
// here.)
func defaultNodeBytes(records float64, mns, clients int) int64 {
	need := min(records*1024/float64(mns)+float64(clients)*remote.DefaultChunkBytes+64<<20, 1<<62)
	return (int64(need) + (1 << 20) - 1) &^ (1<<20 - 1)
}

// seed returns the seed of client i in phase p.
func (r *runner) seed(i, p int) uint64 {
	return r.cfg.Seed*0x9E3779B97F4A7C15 + uint64(p)<<32 + uint64(i)
}

// newRunner opens cfg's indexes on pool, where the index is called name;
// with crash injection it checks that they recover and starts the record
// of the writes.
func newRunner(cfg Config, pool *remote.Pool, name string) (*runner, error) {
	r := &runner{cfg: cfg, pool: pool, name: name}
	if err := r.open(); err != nil {
		return nil, err
	}
	if cfg.CrashRate > 0 {
		if err := r.checkRecoverable(); err != nil {
			r.close()
			return nil, err
		}
		r.hist = newHistory(cfg.ValueSize, cfg.ComputeNodes*cfg.ClientsPerCN)
	}
	return r, nil
}

// open opens one index per compute node, one after the other, inside a
// client so that opening may issue verbs.
func (r *runner) open() error {
	ic := r.cfg.indexConfig()
	ic.Name = r.name
	var err error
	r.pool.Go(func() {
		for i := range r.cfg.ComputeNodes {
			var ix index.Index
			if ix, err = r.cfg.Open(r.pool.NewComputeNode(), ic); err != nil {
				err = fmt.Errorf("ycsb: opening %s on compute node %d: %w", r.cfg.Index, i, err)
				return
			}
			if ix == nil {
				err = fmt.Errorf("ycsb: opening %s on compute node %d: the Opener returned neither an index nor an error", r.cfg.Index, i)
				return
			}
			r.idx = append(r.idx, ix)
		}
	})
	return errors.Join(r.pool.Wait(), err)
}

// close closes the indexes inside a client (closing may issue verbs).
func (r *runner) close() {
	r.pool.Go(func() {
		for _, ix := range r.idx {
			ix.Close()
		}
	})
	r.pool.Wait()
}

// source is one client's operations in one phase.
type source interface {
	// next returns the next operation, or false when the client is done.
	next() (Op, bool)
	// done reports that op returned.
	done(Op)
}

// split returns the half-open share [lo, hi) of client i of n in 0..total.
func split(total int64, i, n int) (lo, hi int64) {
	return total * int64(i) / int64(n), total * int64(i+1) / int64(n)
}

// rangeSource inserts the records [n, hi) of a generator.
type rangeSource struct {
	g     *Generator
	n, hi uint64
	buf   []byte
}

func loadRange(g *Generator, i, n int) source {
	lo, hi := split(int64(g.Records()), i, n)
	return &rangeSource{g: g, n: uint64(lo), hi: uint64(hi)}
}

func (s *rangeSource) next() (Op, bool) {
	if s.n >= s.hi {
		return Op{}, false
	}
	op := s.g.LoadOp(s.buf, s.n)
	s.buf = op.Key
	s.n++
	return op, true
}

func (s *rangeSource) done(Op) {}

// sliceSource replays a contiguous slice of a trace.
type sliceSource struct{ ops []Op }

func slice(ops []Op, i, n int) source {
	lo, hi := split(int64(len(ops)), i, n)
	return &sliceSource{ops: ops[lo:hi]}
}

func (s *sliceSource) next() (Op, bool) {
	if len(s.ops) == 0 {
		return Op{}, false
	}
	op := s.ops[0]
	s.ops = s.ops[1:]
	return op, true
}

func (s *sliceSource) done(Op) {}

// streamSource takes left operations from a generator's stream.
type streamSource struct {
	g    *Generator
	s    *Stream
	left int64
}

func (s *streamSource) next() (Op, bool) {
	if s.left == 0 {
		return Op{}, false
	}
	s.left--
	return s.s.Next(), true
}

func (s *streamSource) done(op Op) { s.g.Ack(op) }

// phase is what the clients of one phase measured.
type phase struct {
	start, end time.Duration // pool time of the phase's start and last completion
	clients    []clientStats
	hists      []*histSet // one per compute node
}

// clientStats is one client's tally.
type clientStats struct {
	completed, errors int64
	crashed           int64 // operations stopped by crash injection (remote.ErrCrashed)
	appBytes          int64 // key and value bytes handed to or returned to the application
	end               time.Duration
	err               error // the client's first error
	gone              error // the error (remote.ErrUnavailable) that stopped the phase, if this client saw it
}

// firstErr returns the error of the lowest-numbered client that failed.
func (p *phase) firstErr() error {
	for i := range p.clients {
		if p.clients[i].err != nil {
			return p.clients[i].err
		}
	}
	return nil
}

// unavailable returns the error of the lowest-numbered client that stopped
// the phase because a memory node was unavailable, or nil.
func (p *phase) unavailable() error {
	for i := range p.clients {
		if p.clients[i].gone != nil {
			return p.clients[i].gone
		}
	}
	return nil
}

// histSet holds one compute node's latency histograms. Clients of the node
// share it under mu (held only to record, never across a verb).
type histSet struct {
	mu         sync.Mutex
	ok         [numOpKinds]*hdrhistogram.Histogram // latencies of successful operations
	failed     [numOpKinds]*hdrhistogram.Histogram // latencies of NOT_FOUND and ERROR
	sumOK      [numOpKinds]int64                   // exact latency sums for averages
	sumFail    [numOpKinds]int64
	returns    [numOpKinds][numStatuses]int64
	overall    *hdrhistogram.Histogram // one sample per completed operation
	sumOverall int64
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, maxLatency, 3) }

// record adds one operation of kind k; with overall set it is also a
// completed operation of the workload.
func (h *histSet) record(k OpKind, st opStatus, d time.Duration, overall bool) {
	v := min(max(int64(d), 1), maxLatency)
	h.mu.Lock()
	defer h.mu.Unlock()
	if overall {
		if h.overall == nil {
			h.overall = newHist()
		}
		h.overall.RecordValue(v)
		h.sumOverall += v
	}
	h.returns[k][st]++
	hist, sum := &h.ok[k], &h.sumOK[k]
	if st != statusOK {
		hist, sum = &h.failed[k], &h.sumFail[k]
	}
	if *hist == nil {
		*hist = newHist()
	}
	(*hist).RecordValue(v)
	*sum += v
}

// phase runs phase number ph (loadPhase, warmPhase or runPhase): every
// client, started with Pool.Go, executes the operations of its source,
// until the context is cancelled, an operation of any client fails with
// remote.ErrUnavailable (a memory node is gone: every client stops; see
// phase.unavailable) or, with abort set, its first error.
func (r *runner) phase(ctx context.Context, ph int, abort bool, src func(i, n int) source) phase {
	cns, k := r.cfg.ComputeNodes, r.cfg.ClientsPerCN
	n := cns * k
	p := phase{clients: make([]clientStats, n), hists: make([]*histSet, cns)}
	for i := range p.hists {
		p.hists[i] = new(histSet)
	}
	p.start = r.pool.Now()
	var gone atomic.Bool
	for i := range n {
		s := src(i, n)
		c := &p.clients[i]
		ix, hs := r.idx[i/k], p.hists[i/k]
		w := newWriter(ph, i, n)
		r.hist.add(w)
		r.pool.Go(func() { r.client(ctx, ix, hs, s, c, w, abort, &gone) })
	}
	r.pool.Wait()
	for i := range p.clients {
		p.end = max(p.end, p.clients[i].end)
	}
	p.end = max(p.end, p.start)
	return p
}

// client runs one client's operations, its writes numbered by w.
// Latencies are read from the pool's clock, which in the simulator is the
// running client's virtual time. With abort set the client stops at its
// first error (an operation stopped by crash injection is not one). An
// error wrapping remote.ErrUnavailable sets gone and stops every client of
// the phase: a memory node is gone, and a phase whose operations all fail
// measures nothing.
func (r *runner) client(ctx context.Context, ix index.Index, hs *histSet, s source, c *clientStats, w *writer, abort bool, gone *atomic.Bool) {
	value := make([]byte, r.cfg.ValueSize)
	var pending int64
loop:
	for ctx.Err() == nil && !gone.Load() {
		op, ok := s.next()
		if !ok {
			break
		}
		t0 := r.pool.Now()
		app, err := r.exec(ctx, ix, hs, w, op, value, t0)
		c.end = r.pool.Now()
		s.done(op)
		switch {
		case crashed(err):
			c.crashed++
		case err != nil:
			c.errors++
			if c.err == nil {
				c.err = fmt.Errorf("%v %s: %w", op.Kind, quoteKey(op.Key), err)
			}
			if errors.Is(err, remote.ErrUnavailable) {
				c.gone = fmt.Errorf("%v %s: %w", op.Kind, quoteKey(op.Key), err)
				gone.Store(true)
				break loop
			}
			if abort {
				break loop
			}
		default:
			c.completed++
			c.appBytes += app
		}
		if pending++; pending == progressEvery && r.cfg.Progress != nil {
			r.cfg.Progress(pending)
			pending = 0
		}
	}
	if pending > 0 && r.cfg.Progress != nil {
		r.cfg.Progress(pending)
	}
}

// exec executes op on ix, records its latency (and, for a
// read-modify-write, those of its read and update, as YCSB does) and
// returns the key and value bytes it handed to or returned to the
// application. It writes the values of w's writes, in value's buffer. An
// operation stopped by crash injection is not measured, and neither is one
// of an unknown kind, which fails.
func (r *runner) exec(ctx context.Context, ix index.Index, hs *histSet, w *writer, op Op, value []byte, t0 time.Duration) (int64, error) {
	var (
		st  = statusOK
		app int64
		err error
	)
	switch op.Kind {
	case OpRead:
		var v []byte
		var found bool
		if v, found, err = ix.Get(ctx, op.Key); found {
			app = int64(len(op.Key) + len(v))
		} else {
			st = statusNotFound
		}
	case OpUpdate, OpInsert:
		err = r.put(ctx, ix, w, op.Key, value, t0)
		app = int64(len(op.Key) + len(value))
	case OpScan:
		app, err = scan(ctx, ix, op)
	case OpReadModifyWrite:
		v, found, e := ix.Get(ctx, op.Key)
		t1 := r.pool.Now()
		switch {
		case crashed(e):
		case e != nil:
			hs.record(OpRead, statusError, t1-t0, false)
		case !found:
			hs.record(OpRead, statusNotFound, t1-t0, false)
		default:
			hs.record(OpRead, statusOK, t1-t0, false)
			app = int64(len(op.Key) + len(v))
		}
		if err = e; err == nil {
			err = r.put(ctx, ix, w, op.Key, value, t1)
			switch {
			case crashed(err):
			case err != nil:
				hs.record(OpUpdate, statusError, r.pool.Now()-t1, false)
			default:
				hs.record(OpUpdate, statusOK, r.pool.Now()-t1, false)
			}
			app += int64(len(op.Key) + len(value))
		}
	default: // Validate refuses traces with such operations
		return 0, fmt.Errorf("ycsb: unknown operation kind %v", op.Kind)
	}
	if crashed(err) {
		return app, err
	}
	if err != nil {
		st = statusError
	}
	hs.record(op.Kind, st, r.pool.Now()-t0, st != statusError)
	return app, err
}

// scan runs op, a scan, on ix and returns the key and value bytes it
// returned. The index is told the scan's length (index.ScanLimit), as
// YCSB's DB interface tells a database: it reads no further ahead than the
// op.ScanLength pairs need. It is apart from exec because the variables
// its loop body shares with exec would escape to the heap on every
// operation.
func scan(ctx context.Context, ix index.Index, op Op) (app int64, err error) {
	for kv, e := range index.ScanLimit(ctx, ix, op.Key, nil, op.ScanLength) {
		if e != nil {
			return app, e
		}
		app += int64(len(kv.Key) + len(kv.Value))
	}
	return app, nil
}

// put writes the value of w's next write to key, in value's buffer,
// invoked at t0, and records it in the history.
func (r *runner) put(ctx context.Context, ix index.Index, w *writer, key, value []byte, t0 time.Duration) error {
	id := w.next
	w.next++
	writeValue(value, id, key)
	err := ix.Put(ctx, key, value)
	r.hist.record(w, key, t0, r.pool.Now(), err)
	return err
}

// snapshot is the pool's counters at a phase boundary.
type snapshot struct {
	stats       remote.Stats
	report      remote.Report
	hits, looks uint64
	caches      bool  // some index reports cache statistics
	cacheBytes  int64 // what the reporting indexes' caches hold, summed
	reporters   int
}

func (r *runner) snapshot() snapshot {
	s := snapshot{stats: r.pool.Stats(), report: r.pool.Report()}
	for _, ix := range r.idx {
		if sr, ok := ix.(StatsReporter); ok {
			st := sr.Stats()
			s.hits, s.looks, s.caches = s.hits+st.CacheHits, s.looks+st.CacheLookups, true
			s.cacheBytes += st.CacheBytes
			s.reporters++
		}
	}
	return s
}
