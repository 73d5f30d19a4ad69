package ycsb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// ErrLoadMismatch is returned by Run when Config.From was loaded by a Config
// whose load phase differs from the run's.
var ErrLoadMismatch = errors.New("ycsb: Config.From was loaded with another load phase")

// A Loaded is an index after a load phase: a snapshot of the memory nodes
// once every record is inserted and every compute node's index closed, and
// the load phase's measurements. Load returns one; runs that start from it
// (Config.From) skip their own load phase and give exactly the Result they
// would give without it, since Run itself loads through a Loaded: it
// closes the load phase's indexes, snapshots the memory nodes, and starts
// warm-up and run phase on a fresh pool with fresh indexes (cold caches)
// from the snapshot. One Loaded serves any number of runs, at once or one
// after the other; it never changes.
type Loaded struct {
	key    LoadKey
	snap   *remote.Snapshot // in-process modes
	pool   *remote.Pool     // other modes: the load's pool, handed to one run
	name   string           // the index's name in the pool
	kind   reflect.Type     // the dynamic type of the load's indexes
	load   phase
	stats  remote.Stats // the pool's I/O at the end of the load phase
	hist   *history     // the load's writes, with crash injection
	loaded float64      // memory-node bytes per record
	// compacted is the number of pairs Config.Compact moved.
	compacted int64
}

// A LoadKey is what determines a load phase: configurations with equal
// keys load the same index the same way, so that one Loaded serves them all
// (Config.From). LoadKeys are comparable (map keys).
type LoadKey struct {
	index                            string
	keys                             KeyType
	records                          int64
	valueSize                        int
	cacheBytes                       int64
	memoryNodes, computeNodes, perCN int
	nodeBytes                        int64 // explicit ones only
	mode                             Mode
	sim                              remote.SimConfig
	seed                             uint64
	compact                          bool
}

// LoadKey returns the load key of cfg, and false if cfg cannot start from a
// Loaded: an invalid Config, memory nodes outside this process (shm, tcp,
// fabric), a LoadOnly workload, a trace or crash injection.
func (cfg Config) LoadKey() (LoadKey, bool) {
	explicitNodes := cfg.NodeBytes != 0
	n, err := cfg.normalized()
	if err != nil || n.loadable() != nil {
		return LoadKey{}, false
	}
	return n.loadKey(explicitNodes), true
}

// loadable tells why a normalized cfg cannot start from a Loaded, or nil.
func (cfg *Config) loadable() error {
	switch {
	case cfg.Mode != ModeSim && cfg.Mode != ModeLocal:
		return fmt.Errorf("ycsb: a Loaded needs memory nodes in this process (sim or local), not mode %v", cfg.Mode)
	case cfg.Workload.LoadOnly || cfg.RunTrace != nil:
		return errors.New("ycsb: a Loaded needs a generated workload with a load phase (not a trace, not the load workload)")
	case cfg.CrashRate > 0:
		return errors.New("ycsb: crash injection runs load their own index (CrashRate is set)")
	}
	return nil
}

// loadKey returns the load key of a normalized cfg (explicitNodes as in
// fits).
func (cfg *Config) loadKey(explicitNodes bool) LoadKey {
	k := LoadKey{index: cfg.Index, keys: cfg.Keys, records: cfg.Records, valueSize: cfg.ValueSize,
		cacheBytes: cfg.CacheBytes, memoryNodes: cfg.MemoryNodes, computeNodes: cfg.ComputeNodes,
		perCN: cfg.LoadClientsPerCN, mode: cfg.Mode, seed: cfg.Seed, compact: cfg.Compact}
	if explicitNodes {
		k.nodeBytes = cfg.NodeBytes
	}
	if cfg.Mode == ModeSim {
		k.sim = cfg.Sim
		k.sim.Seed = cfg.Seed
	}
	return k
}

// Load runs the load phase of cfg (every record inserted by every client,
// as in Run) and returns the loaded index, for runs that share it through
// Config.From. Only the fields that shape the load phase matter: Index,
// Open, CacheBytes, Keys, Records, ValueSize, MemoryNodes, ComputeNodes,
// LoadClientsPerCN (or ClientsPerCN), NodeBytes, Mode, Sim, Seed and Compact; runs
// from the result must have the same ones (and the same Opener) but may
// differ in everything else. It needs the simulator or the local transport
// (memory nodes in this process), a workload with a load phase, no traces
// and no crash injection; it checks cfg as Run does.
func Load(ctx context.Context, cfg Config) (*Loaded, error) {
	explicitNodes := cfg.NodeBytes != 0
	cfg.From = nil
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	if err := cfg.loadable(); err != nil {
		return nil, err
	}
	if err := cfg.fits(explicitNodes); err != nil {
		return nil, err
	}
	gen, err := NewGenerator(cfg.Workload, cfg.Keys, uint64(cfg.Records), uint64(cfg.Ops))
	if err != nil {
		return nil, err
	}
	return load(ctx, cfg, explicitNodes, gen)
}

// loadNodeBytes is the size of each memory node of the load phase's pool:
// cfg.NodeBytes if given (or the existing nodes' own size), else room for
// the records alone (the run's pool grows to its own size), so that the
// load does not depend on the run.
func (cfg *Config) loadNodeBytes(explicitNodes bool) int64 {
	if explicitNodes || cfg.Mode >= ModeShm {
		return cfg.NodeBytes
	}
	return defaultNodeBytes(float64(cfg.Records), cfg.MemoryNodes, cfg.ComputeNodes*cfg.LoadClientsPerCN)
}

// load runs the load phase of a normalized cfg, with its LoadClientsPerCN
// clients per compute node. In-process modes end it with a snapshot and
// release the pool; the others keep the pool for the one run that follows.
func load(ctx context.Context, cfg Config, explicitNodes bool, gen *Generator) (*Loaded, error) {
	key := cfg.loadKey(explicitNodes)
	cfg.ClientsPerCN = cfg.LoadClientsPerCN
	pool, name, err := cfg.newPool(cfg.loadNodeBytes(explicitNodes), nil)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			pool.Close()
		}
	}()
	r, err := newRunner(cfg, pool, name)
	if err != nil {
		return nil, err
	}
	var ph phase
	if cfg.RunTrace != nil {
		ph = r.phase(ctx, loadPhase, true, func(i, n int) source { return slice(cfg.LoadTrace, i, n) })
	} else {
		ph = r.phase(ctx, loadPhase, true, func(i, n int) source { return loadRange(gen, i, n) })
	}
	var compacted int64
	err = ph.unavailable() // the error that stopped every client, else the first
	if err == nil {
		err = ph.firstErr()
	}
	if err == nil && cfg.Compact && ctx.Err() == nil {
		compacted, err = r.compact(ctx)
	}
	r.close()
	if err != nil {
		return nil, fmt.Errorf("ycsb: load phase: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &Loaded{key: key, name: name, kind: reflect.TypeOf(r.idx[0]), load: ph, stats: pool.Stats(), hist: r.hist, compacted: compacted}
	l.loaded = per(l.stats.AllocBytes-l.stats.FreedBytes, cfg.Records)
	if cfg.Mode != ModeSim && cfg.Mode != ModeLocal {
		l.pool, keep = pool, true
		return l, nil
	}
	if l.snap, err = pool.Snapshot(); err != nil {
		return nil, err
	}
	return l, nil
}

// opened checks the indexes a run from l opened against those of the load
// (ErrLoadMismatch): an Opener of another index would run against a tree
// it cannot see. (Openers of the same index type are not told apart.)
func (l *Loaded) opened(idx []index.Index) error {
	for i, ix := range idx {
		if t := reflect.TypeOf(ix); t != l.kind {
			return fmt.Errorf("%w: loaded by indexes of type %v, compute node %d of the run opened a %v (another Opener?)",
				ErrLoadMismatch, l.kind, i, t)
		}
	}
	return nil
}

// compact has one client of the first compute node compact the whole
// index (Config.Compact), if it is an index.Compacter.
func (r *runner) compact(ctx context.Context) (int64, error) {
	c, ok := r.idx[0].(index.Compacter)
	if !ok {
		return 0, nil
	}
	var n int
	var err error
	r.pool.Go(func() { n, err = c.Compact(ctx, nil, nil) })
	if werr := r.pool.Wait(); werr != nil {
		return 0, werr
	}
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	return int64(n), nil
}

// Records returns the number of records loaded.
func (l *Loaded) Records() int64 { return l.key.records }

// LoadTime returns how long the load phase took: virtual time in the
// simulator.
func (l *Loaded) LoadTime() time.Duration { return l.load.end - l.load.start }

// Bytes returns the memory the loaded index holds (the snapshot of its
// memory nodes).
func (l *Loaded) Bytes() int64 {
	if l.snap == nil {
		return 0
	}
	return l.snap.Bytes()
}

// newPool creates the pool of a normalized cfg with memory nodes of
// nodeBytes each, started from snap if set, and returns it with the name the
// run's index has in it.
func (cfg *Config) newPool(nodeBytes int64, snap *remote.Snapshot) (*remote.Pool, string, error) {
	// Collect an earlier run's pool first, so that its memory nodes are
	// unmapped before this one maps new ones (a comparison runs many).
	runtime.GC()
	pcfg := remote.Config{MemoryNodes: cfg.MemoryNodes, NodeBytes: nodeBytes, From: snap}
	name := "ycsb"
	switch cfg.Mode {
	case ModeSim:
		sim := cfg.Sim
		sim.Seed = cfg.Seed
		pcfg.Sim = &sim
	case ModeShm:
		pcfg.Shm = &cfg.Shm
	case ModeTCP:
		pcfg.TCP = &cfg.TCP
	case ModeFabric:
		pcfg.Fabric = &cfg.Fabric
	}
	if pcfg.Shm != nil || pcfg.TCP != nil || pcfg.Fabric != nil {
		name = fmt.Sprintf("ycsb/%s/%d", cfg.Index, time.Now().UnixNano())
	}
	pool, err := remote.NewPool(pcfg)
	return pool, name, err
}
