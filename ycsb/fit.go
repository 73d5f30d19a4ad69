package ycsb

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// Errors of a run that does not fit, returned by Config.Validate and Run
// before anything is allocated.
var (
	// ErrTooLarge: the run needs more memory than the machine has (or
	// Config.MemoryLimit allows). The error names the estimate and the limit.
	// (Records that cannot fit in memory nodes of an explicit NodeBytes fail
	// with remote.ErrOutOfMemory, as the run would.)
	ErrTooLarge = errors.New("ycsb: run does not fit in memory")
	// ErrTooLong: the run takes longer than Config.MaxRuntime even at the
	// fastest rate this harness ever ran.
	ErrTooLong = errors.New("ycsb: run too long")
)

// ErrInvalid: Validate (and Run, Load and Estimate, before anything is
// allocated) refuses the Config itself, whatever the machine: a field out
// of range or contradicting another, a workload that reads records with
// Records 0, a trace operation Run cannot execute, or keys, values or
// memory nodes beyond the index's limits (Footprint; these also wrap
// index.ErrKeyTooLong or index.ErrValueTooLarge). The error's text is the
// cause's, naming the field; errors.Is(err, ErrInvalid) tells it from a
// run that does not fit (ErrTooLarge, ErrTooLong, remote.ErrOutOfMemory).
var ErrInvalid = errors.New("ycsb: invalid Config")

// invalidError is a refusal of the Config itself: its text is err's, and
// it wraps both err and ErrInvalid.
type invalidError struct{ err error }

func (e invalidError) Error() string   { return e.err.Error() }
func (e invalidError) Unwrap() []error { return []error{e.err, ErrInvalid} }

// DefaultMaxRuntime is the runtime bound of a Config whose MaxRuntime is 0.
const DefaultMaxRuntime = 24 * time.Hour

// Footprint is what an index costs in memory, as far as its Opener knows:
// the input of a run's memory estimate (Config.Footprint). Byte counts are
// live data; the estimate adds the garbage collector's headroom. The zero
// Footprint knows nothing: a record then costs its key and value bytes and
// the index nothing else.
type Footprint struct {
	// MaxKeyLen and MaxValueLen are the longest key and value the index
	// stores (0: no known limit).
	MaxKeyLen, MaxValueLen int
	// MaxMemoryNodes and MaxNodeBytes are the largest pool the index
	// addresses: memory nodes and the size of each (0: no limit but the
	// pool's, remote.MaxMemoryNodes).
	MaxMemoryNodes int
	MaxNodeBytes   int64
	// RecordBytes is the memory-node bytes one record occupies, the index's
	// structure included (0: the key and value sizes).
	RecordBytes int64
	// CacheBytes is the compute node's cache budget in effect (the index's
	// default resolved; 0: no cache) and CacheBytesPerRecord what one record
	// costs in the cache until the budget is reached.
	CacheBytes, CacheBytesPerRecord int64
	// ComputeNodeBytes is the index's fixed state per compute node (lock
	// tables, RDWC tables).
	ComputeNodeBytes int64
	// ClientBytes is the index's state per client (session, buffers).
	ClientBytes int64
}

// Estimate is the memory and time a run needs, computed from its Config
// alone. Memory figures are rough (within a factor of about two for the
// indexes of this module) and include the garbage collector's headroom.
type Estimate struct {
	// Records is the number of records at the end of the run (loaded and
	// inserted).
	Records int64
	// RemoteBytes is the memory-node bytes the records occupy.
	RemoteBytes int64
	// OnChipBytes is the memory nodes' on-chip regions, in total.
	OnChipBytes int64
	// ComputeNodeBytes is one compute node's memory: the index's state and
	// cache and the runner's latency histograms.
	ComputeNodeBytes int64
	// ClientBytes is one client's memory: its goroutine, value buffers and
	// the index's session.
	ClientBytes int64
	// CheckBytes is the lost-acknowledged check's record of the writes,
	// with crash injection (Config.CrashRate; 0 without): per written key
	// the key and about 100 bytes (map entry and the sorted list of the
	// read-back), per write about 16 bytes.
	CheckBytes int64
	// SnapshotBytes is the copy of the loaded records' memory-node bytes
	// that a run in this process keeps between its load phase and its
	// run phase (Loaded; 0 for LoadOnly workloads and memory nodes in
	// other processes).
	SnapshotBytes int64
	// Bytes is the total: the process's base, RemoteBytes, OnChipBytes,
	// every compute node's and client's share, CheckBytes and
	// SnapshotBytes.
	Bytes int64
	// MinRuntime is a lower bound of the wall-clock time of the load and run
	// phases: their operations at the fastest rate this harness reaches
	// (minOpRate), whatever the index.
	MinRuntime time.Duration
}

// Constants of the estimate.
const (
	// baseBytes is the process before any run: runtime, binary, pool
	// bookkeeping.
	baseBytes = 32 << 20
	// gcHeadroom is the factor by which the heap exceeds its live data at
	// the default GOGC=100.
	gcHeadroom = 2
	// clientBaseBytes is the runner's own state per client besides its value
	// buffers: a goroutine's stack (at least 8 KiB) and its tallies.
	clientBaseBytes = 10 << 10
	// histogramBytes is one latency histogram, newHist().ByteSize()
	// (TestHistogramBytes checks it).
	histogramBytes = 229_444
	// minOpRate is an upper bound of the operations per second of one run
	// in the simulator, and per core in local mode, with any index: the
	// in-memory test index reaches about 130,000 in the simulator and
	// 250,000 per core in local mode on the 2-core development machine.
	minOpRate = 1_000_000
)

// Estimate returns the memory and time cfg needs, after filling in its
// defaults. It fails only if cfg is invalid.
func (cfg Config) Estimate() (Estimate, error) {
	n, err := cfg.normalized()
	if err != nil {
		return Estimate{}, err
	}
	return n.estimate(n.indexConfig()), nil
}

// Validate reports whether Run would accept cfg: valid fields, keys and
// values the index stores (Footprint), records that fit in the memory
// nodes, and a run that fits the machine's memory (MemoryLimit) and
// MaxRuntime. Run performs the same checks before it allocates anything.
// A refusal of the Config itself wraps ErrInvalid; one of a run that does
// not fit wraps ErrTooLarge, ErrTooLong or remote.ErrOutOfMemory.
func (cfg Config) Validate() error {
	n, err := cfg.normalized()
	if err != nil {
		return err
	}
	return n.fits(cfg.NodeBytes != 0)
}

// checkCluster checks the node and client counts of cfg before their
// defaults are filled in: none negative (0 selects the default), at most
// remote.MaxMemoryNodes memory nodes, and for memnode servers (ModeTCP,
// ModeFabric) MemoryNodes 0 or the length of their address list, which it
// then becomes.
func (cfg *Config) checkCluster() error {
	switch {
	case cfg.MemoryNodes < 0 || cfg.ComputeNodes < 0 || cfg.ClientsPerCN < 0:
		return fmt.Errorf("ycsb: negative node or client count: MemoryNodes %d, ComputeNodes %d, ClientsPerCN %d (0: the default, 1)",
			cfg.MemoryNodes, cfg.ComputeNodes, cfg.ClientsPerCN)
	case cfg.MemoryNodes > remote.MaxMemoryNodes:
		return fmt.Errorf("ycsb: %d memory nodes, more than a pool addresses (%d)", cfg.MemoryNodes, remote.MaxMemoryNodes)
	}
	var addrs []string
	switch cfg.Mode {
	case ModeTCP:
		addrs = cfg.TCP.MemoryNodes
	case ModeFabric:
		addrs = cfg.Fabric.MemoryNodes
	default:
		return nil
	}
	switch {
	case len(addrs) == 0: // the pool names what is missing
	case cfg.MemoryNodes == 0:
		cfg.MemoryNodes = len(addrs)
	case cfg.MemoryNodes != len(addrs):
		return fmt.Errorf("ycsb: MemoryNodes %d, but mode %v lists %d memory nodes", cfg.MemoryNodes, cfg.Mode, len(addrs))
	}
	return nil
}

// indexConfig is what Open learns about the run.
func (cfg *Config) indexConfig() IndexConfig {
	ic := IndexConfig{Name: "ycsb", KeySize: cfg.Keys.MaxLen(), ValueSize: cfg.ValueSize,
		CacheBytes: cfg.CacheBytes, MemoryNodes: cfg.MemoryNodes}
	for _, op := range cfg.LoadTrace {
		ic.KeySize = max(ic.KeySize, len(op.Key))
	}
	for _, op := range cfg.RunTrace {
		ic.KeySize = max(ic.KeySize, len(op.Key))
	}
	return ic
}

// fits checks a normalized cfg against the index's limits, the machine's
// memory and MaxRuntime. explicitNodes tells whether NodeBytes was given
// (a default size is only reserved, never touched beyond the records).
func (cfg *Config) fits(explicitNodes bool) error {
	ic := cfg.indexConfig()
	var fp Footprint
	if cfg.Footprint != nil {
		fp = cfg.Footprint(ic)
	}
	switch {
	case fp.MaxKeyLen > 0 && ic.KeySize > fp.MaxKeyLen:
		return invalidError{fmt.Errorf("%w: keys of %d bytes, %s stores at most %d", index.ErrKeyTooLong, ic.KeySize, cfg.Index, fp.MaxKeyLen)}
	case fp.MaxValueLen > 0 && cfg.ValueSize > fp.MaxValueLen:
		return invalidError{fmt.Errorf("%w: values of %d bytes, %s stores at most %d", index.ErrValueTooLarge, cfg.ValueSize, cfg.Index, fp.MaxValueLen)}
	case fp.MaxMemoryNodes > 0 && cfg.MemoryNodes > fp.MaxMemoryNodes:
		return invalidError{fmt.Errorf("ycsb: %d memory nodes, %s addresses at most %d", cfg.MemoryNodes, cfg.Index, fp.MaxMemoryNodes)}
	}
	est := cfg.estimate(ic)
	if cfg.MemoryLimit >= 0 {
		mem := systemMemory()
		if cfg.MemoryLimit > 0 {
			mem = memory{total: cfg.MemoryLimit, available: cfg.MemoryLimit, source: "the run's MemoryLimit"}
		}
		nodes := float64(cfg.MemoryNodes) * float64(cfg.NodeBytes)
		// Memnode servers' memory is on their hosts, not this one.
		remoteHosts := cfg.Mode == ModeTCP || cfg.Mode == ModeFabric
		if explicitNodes && !remoteHosts && mem.total > 0 && nodes > float64(mem.total) {
			return fmt.Errorf("%w: memory nodes of %d × %s = %s exceed the %s of physical memory (%s)", ErrTooLarge,
				cfg.MemoryNodes, bytesText(float64(cfg.NodeBytes)), bytesText(nodes), bytesText(float64(mem.total)), mem.source)
		}
		if mem.available > 0 && est.Bytes > mem.available {
			var check string
			if est.CheckBytes > 0 {
				check = fmt.Sprintf(", %s for the crash check", bytesText(float64(est.CheckBytes)))
			}
			return fmt.Errorf("%w: it needs about %s (%s of records on the memory nodes for %d records, "+
				"%d compute nodes × %s, %d clients × %s%s), more than the %s of available memory (%s)", ErrTooLarge,
				bytesText(float64(est.Bytes)), bytesText(float64(est.RemoteBytes)), est.Records,
				cfg.ComputeNodes, bytesText(float64(est.ComputeNodeBytes)), int64(cfg.ComputeNodes)*int64(cfg.ClientsPerCN),
				bytesText(float64(est.ClientBytes)), check, bytesText(float64(mem.available)), mem.source)
		}
	}
	if explicitNodes && fp.MaxNodeBytes > 0 && cfg.NodeBytes > fp.MaxNodeBytes {
		return invalidError{fmt.Errorf("ycsb: memory nodes of %s, %s addresses at most %s each", bytesText(float64(cfg.NodeBytes)), cfg.Index, bytesText(float64(fp.MaxNodeBytes)))}
	}
	// (Shm's MemoryNodes 0 is the nodes its directory holds, unknown here.)
	if nodes := float64(cfg.MemoryNodes) * float64(cfg.NodeBytes); explicitNodes && cfg.MemoryNodes > 0 && float64(est.RemoteBytes) > nodes {
		return fmt.Errorf("ycsb: %w: the run's %d records need about %s on the memory nodes, more than their %d × %s",
			remote.ErrOutOfMemory, est.Records, bytesText(float64(est.RemoteBytes)), cfg.MemoryNodes, bytesText(float64(cfg.NodeBytes)))
	}
	limit := cfg.MaxRuntime
	if limit == 0 {
		limit = DefaultMaxRuntime
	}
	if limit > 0 && est.MinRuntime > limit {
		return fmt.Errorf("%w: its %.0f operations take at least %v at %.0f operations/s, more than the limit of %v",
			ErrTooLong, cfg.totalOps(), RoundRuntime(est.MinRuntime), cfg.opRate(), limit)
	}
	return nil
}

// RoundRuntime rounds an estimated runtime up for printing, to a precision
// that suits its size: whole minutes from an hour, whole seconds from a
// minute, three significant digits below. Rounded up, an estimate above a
// limit is never printed at or below it.
func RoundRuntime(d time.Duration) time.Duration {
	var unit time.Duration
	switch {
	case d <= 0:
		return d
	case d >= time.Hour:
		unit = time.Minute
	case d >= time.Minute:
		unit = time.Second
	default:
		unit = 1
		for v := d; v >= 1000; v /= 10 {
			unit *= 10
		}
	}
	if d > math.MaxInt64-unit {
		return d
	}
	return (d + unit - 1) / unit * unit
}

// estimate computes the Estimate of a normalized cfg. Products are taken
// in float64 and saturate at math.MaxInt64, so absurd inputs give absurd
// estimates instead of overflowing.
func (cfg *Config) estimate(ic IndexConfig) Estimate {
	var fp Footprint
	if cfg.Footprint != nil {
		fp = cfg.Footprint(ic)
	}
	records := float64(cfg.Records) + (float64(cfg.Ops)+float64(cfg.WarmupOps))*cfg.insertShare()
	recordBytes := float64(fp.RecordBytes)
	if recordBytes == 0 {
		recordBytes = float64(ic.KeySize + cfg.ValueSize)
	}
	remoteBytes := records * recordBytes
	onChip := float64(cfg.MemoryNodes) * remote.DefaultOnChipBytes
	cache := min(float64(fp.CacheBytes), records*float64(fp.CacheBytesPerRecord))
	cn := gcHeadroom * (cache + float64(fp.ComputeNodeBytes) + cfg.histograms()*histogramBytes)
	// A client holds the value it writes and the one a read returns.
	client := gcHeadroom * (clientBaseBytes + 2*float64(cfg.ValueSize) + float64(fp.ClientBytes))
	clients := float64(cfg.ComputeNodes) * float64(cfg.ClientsPerCN)
	var check float64
	if cfg.CrashRate > 0 {
		check = gcHeadroom * (records*float64(ic.KeySize+100) + cfg.totalOps()*16)
	}
	var snap float64
	if (cfg.Mode == ModeSim || cfg.Mode == ModeLocal) && !cfg.Workload.LoadOnly {
		snap = float64(cfg.Records)*recordBytes + onChip
	}
	total := baseBytes + remoteBytes + onChip + float64(cfg.ComputeNodes)*cn + clients*client + check + snap
	ops := cfg.totalOps()
	return Estimate{
		Records: saturate(records), RemoteBytes: saturate(remoteBytes), OnChipBytes: saturate(onChip),
		ComputeNodeBytes: saturate(cn), ClientBytes: saturate(client), CheckBytes: saturate(check),
		SnapshotBytes: saturate(snap), Bytes: saturate(total),
		MinRuntime: time.Duration(saturate(ops / cfg.opRate() * float64(time.Second))),
	}
}

// totalOps is the operations of every phase: load, warm-up and run.
func (cfg *Config) totalOps() float64 {
	return float64(cfg.Records) + float64(cfg.WarmupOps) + float64(cfg.Ops)
}

// insertShare is the share of the run phase's operations that add a
// record (all of them for traces, which are not inspected).
func (cfg *Config) insertShare() float64 {
	w := cfg.Workload
	sum := w.Read + w.Update + w.Insert + w.Scan + w.ReadModifyWrite
	if cfg.RunTrace != nil || w.LoadOnly || sum <= 0 {
		return 0
	}
	return w.Insert / sum
}

// histograms is how many latency histograms one compute node may hold
// over both phases: per phase one overall, and one of successes and one of
// failures per operation kind used (a read-modify-write also records a
// read and an update).
func (cfg *Config) histograms() float64 {
	kinds := float64(numOpKinds)
	if cfg.RunTrace == nil {
		w := cfg.Workload
		kinds = 0
		for _, p := range []float64{w.Read, w.Update, w.Insert, w.Scan} {
			if p > 0 {
				kinds++
			}
		}
		if w.ReadModifyWrite > 0 {
			kinds += 3
		}
		kinds = min(kinds, float64(numOpKinds))
	}
	return (1 + 2) + (1 + 2*kinds) // load: overall and inserts; run
}

// opRate is minOpRate for the run's mode: per core in local mode.
func (cfg *Config) opRate() float64 {
	if cfg.Mode == ModeLocal {
		return minOpRate * float64(max(1, min(runtime.GOMAXPROCS(0), cfg.ComputeNodes*cfg.ClientsPerCN)))
	}
	return minOpRate
}

func saturate(v float64) int64 {
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// bytesText prints a byte count with a binary unit ("1.5 GiB").
func bytesText(b float64) string {
	const units = "KMGTPE"
	if b < 1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	i := -1
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", b, units[i])
}
