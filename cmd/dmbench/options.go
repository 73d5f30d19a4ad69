package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
)

// options are the flags every benchmarking command shares: the workload's
// size and keys, the cluster and the simulator.
type options struct {
	keys        string
	records     int64
	ops         int64
	warmup      int64
	valueSize   int
	mns, cns    int
	loadClients int   // --load-clients
	warmupKeys  int64 // --warmup-keys
	cacheMB     float64
	mnMB        int64
	mode        string
	shmDir      string
	memnodes    string
	token       string
	provider    string
	nic         string
	ordering    string
	zipf        float64
	seed        uint64
	maxTime     time.Duration
	crashRate   float64 // run only (registerCrash)
	parallel    int     // compare and factor only (registerParallel)
	compact     bool

	fs *flag.FlagSet // the flag set registered on, for the flags given
}

// defaultOptions are the defaults of run and compare: a few seconds of
// simulation per run on two cores.
func defaultOptions() options {
	return options{
		keys: "int", records: 100_000, ops: 100_000, valueSize: ycsb.DefaultValueSize,
		mns: 2, cns: 4, cacheMB: 64, mode: "sim", nic: "cx6", ordering: "inorder",
		zipf: ycsb.DefaultZipfTheta, seed: 1, maxTime: ycsb.DefaultMaxRuntime, parallel: runtime.GOMAXPROCS(0),
	}
}

// memoryLimit is the ycsb.Config.MemoryLimit of every run: 0, the
// machine's memory (a variable so that tests can fix it).
var memoryLimit int64

// maxMB bounds the MiB flags, so that their byte counts fit in an int64
// (and far exceed any machine: the checks against memory then apply).
const maxMB = 1 << 40

func (o *options) register(fs *flag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.keys, "keys", o.keys, "key type: int (8-byte big-endian) or email (at most 32 bytes)")
	fs.Int64Var(&o.records, "records", o.records, "records loaded before the run phase")
	fs.Int64Var(&o.ops, "ops", o.ops, "operations of the run phase, split over all clients")
	fs.Int64Var(&o.warmup, "warmup-ops", o.warmup, fmt.Sprintf("warm-up operations between the load and the run phase, not measured (0: --records × --cns keys' worth, at most %d, a scan counting its mean length; -1: none)", ycsb.MaxDefaultWarmup))
	fs.Int64Var(&o.warmupKeys, "warmup-keys", 0, "instead of --warmup-ops: a warm-up of this many keys' worth, a scan counting its mean length "+
		"(so that one value suits point and scan workloads)")
	fs.IntVar(&o.valueSize, "value-size", o.valueSize, "value size in bytes")
	fs.IntVar(&o.mns, "mns", o.mns, "memory nodes")
	fs.IntVar(&o.cns, "cns", o.cns, "compute nodes")
	fs.IntVar(&o.loadClients, "load-clients", 0, "clients per compute node of the load phase (0: those of the run); "+
		"compare loads once for all client counts with it")
	fs.Float64Var(&o.cacheMB, "cache-mb", o.cacheMB, "index cache per compute node in MiB (0: no cache)")
	fs.Int64Var(&o.mnMB, "mn-mb", o.mnMB, "memory per memory node in MiB (0: enough for the run)")
	fs.StringVar(&o.mode, "mode", o.mode, "sim (RNIC simulator, virtual time, deterministic), local (goroutines, wall clock), "+
		"shm (memory nodes in files of --shm-dir), tcp or fabric (memnode servers at --memnodes)")
	fs.StringVar(&o.shmDir, "shm-dir", "", "--mode shm: directory of the memory-node files (kept after the run)")
	fs.StringVar(&o.memnodes, "memnodes", "", "--mode tcp or fabric: comma-separated host:port of the memnode servers, memory node 0 first")
	fs.StringVar(&o.token, "token", "", "--mode tcp or fabric: the memnode servers' shared secret (default: $DMINDEX_TOKEN)")
	fs.StringVar(&o.provider, "provider", "", "--mode fabric: libfabric provider, verbs or sockets (default: the memory nodes')")
	fs.StringVar(&o.nic, "nic", o.nic, "simulated RNIC profile: cx6")
	fs.StringVar(&o.ordering, "ordering", o.ordering, "simulated byte ordering of READ and WRITE: inorder or strict")
	fs.Float64Var(&o.zipf, "zipf", o.zipf, "Zipfian constant θ of zipfian and latest request distributions, 0 < θ < 1")
	fs.Uint64Var(&o.seed, "seed", o.seed, "seed of workloads, values and simulator")
	fs.BoolVar(&o.compact, "compact", false, "after the load, compact the index once (SMART: its leaves laid out in key order, "+
		"so that a scan reads many with one READ; part of the load, not measured; nothing for Sherman)")
	fs.DurationVar(&o.maxTime, "max-runtime", o.maxTime, "refuse runs whose estimated minimum runtime exceeds this (0: no limit)")
}

// registerCrash registers --crash-rate (dmbench run only).
func (o *options) registerCrash(fs *flag.FlagSet) {
	fs.Float64Var(&o.crashRate, "crash-rate", o.crashRate, fmt.Sprintf("--mode sim: stop clients at random inside their batches, "+
		"this many per virtual second of the measured phase, then recover and check that no acknowledged write was lost "+
		"(0: none, at most %.0f; needs --value-size 8 or more)", ycsb.MaxCrashRate))
}

// registerParallel registers --parallel (compare and factor only), one
// run per core by default.
func (o *options) registerParallel(fs *flag.FlagSet) {
	fs.IntVar(&o.parallel, "parallel", o.parallel, "simulated runs executed at once, at least 1 (results are identical with any value)")
}

// check validates the flags that do not depend on the index or workload.
func (o *options) check() error {
	switch {
	case o.records < 0 || o.ops < 0:
		return fmt.Errorf("--records and --ops must not be negative")
	case o.warmup < -1:
		return fmt.Errorf("--warmup-ops %d: want -1 (none), 0 (the default) or a count", o.warmup)
	case o.warmupKeys < 0 || o.warmupKeys > 0 && o.warmup != 0:
		return fmt.Errorf("--warmup-keys %d: want a positive count, and no --warmup-ops with it", o.warmupKeys)
	case o.valueSize < 1:
		return fmt.Errorf("--value-size must be at least 1")
	case o.mns < 1 || o.cns < 1:
		return fmt.Errorf("--mns and --cns must be at least 1")
	case o.parallel < 1:
		return fmt.Errorf("--parallel %d: want at least 1 (the default is one run per core)", o.parallel)
	case o.mnMB < 0 || o.mnMB > maxMB:
		return fmt.Errorf("--mn-mb %d: want 0 (enough for the run) up to %d", o.mnMB, int64(maxMB))
	case !(o.cacheMB >= 0 && o.cacheMB <= maxMB): // also rejects NaN
		return fmt.Errorf("--cache-mb %v: want 0 (no cache) up to %d", o.cacheMB, int64(maxMB))
	case o.mode != "sim" && o.ordering == "strict":
		return fmt.Errorf("--ordering %s applies to --mode sim only: %s mode runs on real memory", o.ordering, o.mode)
	case o.maxTime < 0:
		return fmt.Errorf("--max-runtime must not be negative (0: no limit)")
	case !(o.crashRate >= 0 && o.crashRate <= ycsb.MaxCrashRate): // also rejects NaN
		return fmt.Errorf("--crash-rate %v: want 0 (no crashes) up to %.0f crashes per virtual second", o.crashRate, ycsb.MaxCrashRate)
	case o.crashRate > 0 && o.mode != "sim":
		return fmt.Errorf("--crash-rate applies to --mode sim only: fault injection is simulated")
	case o.crashRate > 0 && o.valueSize < 8:
		return fmt.Errorf("--crash-rate needs --value-size 8 or more: each value carries the id of the write that wrote it")
	}
	return checkZipf(o.zipf)
}

// checkZipf validates a --zipf value: YCSB's Zipfian constant, 0 < θ < 1
// (the range of Gray et al.'s generator that YCSB uses; YCSB's default is
// 0.99).
func checkZipf(theta float64) error {
	if !(theta > 0 && theta < 1) {
		return fmt.Errorf("--zipf %v: want 0 < θ < 1 (default %v)", theta, ycsb.DefaultZipfTheta)
	}
	return nil
}

// config returns the run of index on workload w with clients clients per
// compute node.
//
// The config is validated as ycsb.Run will validate it, so that a command
// running many configurations fails before the first one starts.
func (o *options) config(index string, w ycsb.Workload, clients int) (ycsb.Config, error) {
	cfg, err := o.unvalidated(index, w, clients)
	if err != nil {
		return ycsb.Config{}, err
	}
	return cfg, o.withHint(cfg.Validate())
}

// unvalidated is config without ycsb's validation, for a caller that
// completes the config first (dmbench run adds its traces, which decide
// the records and operations validated).
func (o *options) unvalidated(index string, w ycsb.Workload, clients int) (ycsb.Config, error) {
	if err := o.check(); err != nil {
		return ycsb.Config{}, err
	}
	if clients < 1 {
		return ycsb.Config{}, fmt.Errorf("--clients must be at least 1")
	}
	keys, err := ycsb.ParseKeyType(o.keys)
	if err != nil {
		return ycsb.Config{}, err
	}
	mode, err := ycsb.ParseMode(o.mode)
	if err != nil {
		return ycsb.Config{}, err
	}
	profile, err := remote.ProfileByName(o.nic)
	if err != nil {
		return ycsb.Config{}, err
	}
	ordering, err := remote.ParseOrdering(o.ordering)
	if err != nil {
		return ycsb.Config{}, err
	}
	memnodes, err := o.checkTransport(mode)
	if err != nil {
		return ycsb.Config{}, err
	}
	ix, err := lookup(index)
	if err != nil {
		return ycsb.Config{}, err
	}
	mns := o.mns
	if mode == ycsb.ModeTCP || mode == ycsb.ModeFabric {
		mns = 0 // as many as --memnodes lists
	}
	cache := int64(o.cacheMB * (1 << 20))
	if cache <= 0 {
		cache = -1 // no cache
	}
	maxTime := o.maxTime
	if maxTime == 0 {
		maxTime = -1 // no limit
	}
	w.ZipfTheta = o.zipf
	warmup := o.warmup
	if o.warmupKeys > 0 {
		warmup = int64(math.Ceil(float64(o.warmupKeys) / w.KeysPerOp()))
	}
	cfg := ycsb.Config{
		Index: index, Open: ix.open(), Footprint: ix.footprint, CacheBytes: cache,
		Workload: w, Keys: keys, Records: o.records, Ops: o.ops, WarmupOps: warmup, ValueSize: o.valueSize,
		MemoryNodes: mns, ComputeNodes: o.cns, ClientsPerCN: clients, LoadClientsPerCN: o.loadClients, NodeBytes: o.mnMB << 20,
		Mode: mode, Sim: remote.SimConfig{Profile: profile, Ordering: ordering}, Seed: o.seed, Compact: o.compact,
		Shm:        remote.ShmConfig{Dir: o.shmDir},
		TCP:        remote.TCPConfig{MemoryNodes: memnodes, Token: o.token},
		Fabric:     remote.FabricConfig{MemoryNodes: memnodes, Token: o.token, Provider: o.provider},
		MaxRuntime: maxTime, MemoryLimit: memoryLimit, CrashRate: o.crashRate,
	}
	return cfg, nil
}

// withHint adds to an error of ycsb's checks the flags that change the
// outcome (not --records and --ops with --run-trace, whose traces decide
// them).
func (o *options) withHint(err error) error {
	fewer := "lower --records or --ops"
	if o.isSet("run-trace") {
		fewer = "replay shorter traces"
	}
	switch {
	case errors.Is(err, ycsb.ErrTooLarge):
		return fmt.Errorf("%w; %s, or lower --value-size, --cns, --clients or --mn-mb", err, fewer)
	case errors.Is(err, ycsb.ErrTooLong):
		return fmt.Errorf("%w; %s, or raise --max-runtime", err, fewer)
	case errors.Is(err, remote.ErrOutOfMemory):
		switch o.mode {
		case "tcp", "fabric":
			// The memory is the memnode servers' --bytes, and every run
			// leaves its index on them.
			return fmt.Errorf("%w; the memory nodes are the memnode servers' (their --bytes), which keep the index of every earlier run "+
				"until they restart: restart them with a larger --bytes (or a new --file), and give --mn-mb as their size or omit it", err)
		case "shm":
			return fmt.Errorf("%w; the memory nodes are the files of --shm-dir, which keep the index of every earlier run: "+
				"use a new --shm-dir (or remove its files) with a larger --mn-mb, or omit --mn-mb", err)
		}
		return fmt.Errorf("%w; raise --mn-mb, or omit it to size the memory nodes for the run", err)
	}
	return err
}

// checkTotalRuntime fails if the runs of cfgs together exceed --max-runtime
// (each one alone was checked by config).
func (o *options) checkTotalRuntime(cfgs []ycsb.Config) error {
	if o.maxTime == 0 {
		return nil
	}
	var total time.Duration
	for _, cfg := range cfgs {
		est, err := cfg.Estimate()
		if err != nil {
			return err
		}
		total += est.MinRuntime
	}
	if total > o.maxTime {
		return fmt.Errorf("%w: the %d runs take at least %v together, more than --max-runtime %v",
			ycsb.ErrTooLong, len(cfgs), ycsb.RoundRuntime(total), o.maxTime)
	}
	return nil
}

// checkTransport refuses transport flags that the mode does not use and
// missing ones it needs, and returns the memory nodes of --memnodes (nil
// without it).
func (o *options) checkTransport(mode ycsb.Mode) ([]string, error) {
	net := mode == ycsb.ModeTCP || mode == ycsb.ModeFabric
	switch {
	case mode == ycsb.ModeShm && o.shmDir == "":
		return nil, fmt.Errorf("--mode shm needs --shm-dir")
	case mode != ycsb.ModeShm && o.shmDir != "":
		return nil, fmt.Errorf("--shm-dir is only for --mode shm")
	case net && o.memnodes == "":
		return nil, fmt.Errorf("--mode %v needs --memnodes host:port,...", mode)
	case !net && (o.memnodes != "" || o.token != ""):
		return nil, fmt.Errorf("--memnodes and --token are only for --mode tcp and fabric")
	case mode != ycsb.ModeFabric && o.provider != "":
		return nil, fmt.Errorf("--provider is only for --mode fabric")
	case !net:
		return nil, nil
	}
	memnodes, err := names("memnodes", o.memnodes)
	switch {
	case err != nil:
		return nil, err
	case o.isSet("mns") && o.mns != len(memnodes):
		return nil, fmt.Errorf("--mns %d, but --memnodes lists %d memory nodes (with --mode %v, omit --mns: the memory nodes are those listed)",
			o.mns, len(memnodes), mode)
	}
	return memnodes, nil
}

// isSet reports whether flag name was given on the command line.
func (o *options) isSet(name string) bool {
	set := false
	if o.fs != nil {
		o.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	}
	return set
}

// workloads parses the comma-separated list of workload names of flag
// flagName (list).
func workloads(flagName, text string) ([]ycsb.Workload, error) {
	return list(flagName, text, ycsb.Preset)
}

// names parses the comma-separated list of names of flag flagName (list).
func names(flagName, text string) ([]string, error) {
	return list(flagName, text, func(s string) (string, error) { return s, nil })
}

// counts parses the comma-separated list of positive integers of flag
// flagName (list).
func counts(flagName, text string) ([]int, error) {
	return list(flagName, text, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q is not a positive integer", s)
		}
		return n, nil
	})
}

// list parses text, the value of the comma-separated list flag flagName:
// its elements, spaces trimmed, each read by parse. Every list flag goes
// through it, so that all refuse the same inputs with the same words: an
// empty list, an empty element ("smart,,sherman"), an element parse
// refuses, and an element listed twice (as parse reads it: "a,A" for
// workloads, "4,04" for counts).
func list[T comparable](flagName, text string, parse func(string) (T, error)) ([]T, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("--%s is empty", flagName)
	}
	var out []T
	for s := range strings.SplitSeq(text, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("--%s %q has an empty element", flagName, text)
		}
		v, err := parse(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flagName, err)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("--%s lists %q twice", flagName, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// newFlagSet returns the flag set of subcommand name, whose usage text is
// the synopsis followed by about and the flags.
func newFlagSet(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: dmbench %s [flags]\n\n%s\n", name, about)
		fs.PrintDefaults()
	}
	return fs
}

// usageError is an error of the command line, which exits with status 2:
// a flag the flag set could not parse (printed: the flag set printed it on
// stderr with the usage text, main only sets the exit status), or a flag
// value, command or argument that the command refuses (main prints it).
type usageError struct {
	error
	printed bool
}

func (e usageError) Unwrap() error { return e.error }

// badUsage returns err, met while checking the command line, as a
// usageError, except the refusals of a valid run that does not fit the
// machine, its memory nodes or --max-runtime (ycsb.ErrTooLarge,
// ycsb.ErrTooLong, remote.ErrOutOfMemory), which fail like a run (status 1).
func badUsage(err error) error {
	var usage usageError
	switch {
	case err == nil, errors.As(err, &usage), errors.Is(err, flag.ErrHelp),
		errors.Is(err, ycsb.ErrTooLarge), errors.Is(err, ycsb.ErrTooLong), errors.Is(err, remote.ErrOutOfMemory):
		return err
	}
	return usageError{error: err}
}

// parse parses args into fs. A flag error is printed on stderr by fs and
// returned as a usageError; -h returns flag.ErrHelp.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{error: err, printed: true}
	}
	if fs.NArg() > 0 {
		return usageError{error: fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// progress is a progress bar over operations, drawn on stderr only when it
// is a terminal; the nil *progress draws nothing.
type progress struct{ bar *progressbar.ProgressBar }

// newProgress returns a bar of total operations, or nil if stderr is not a
// terminal.
func newProgress(stderr io.Writer, total int64) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("ops"), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))}
}

// track makes cfg report to the bar, described by what.
func (p *progress) track(cfg *ycsb.Config, what string) {
	if p == nil {
		return
	}
	p.bar.Describe(what)
	cfg.Progress = func(n int64) { p.bar.Add64(n) }
}

func (p *progress) finish() {
	if p != nil {
		p.bar.Finish()
	}
}

// phaseOps is how many operations a run of cfg executes (load, warm-up and
// run).
func phaseOps(cfg ycsb.Config) int64 {
	if cfg.Workload.LoadOnly {
		return cfg.Records
	}
	warm := max(cfg.WarmupOps, 0)
	if cfg.WarmupOps == 0 {
		warm = ycsb.DefaultWarmup(cfg.Records, cfg.ComputeNodes)
	}
	return cfg.Records + warm + cfg.Ops
}
