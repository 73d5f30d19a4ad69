// Package ycsb generates YCSB workloads and runs them against an index on
// disaggregated memory, measuring what matters there: throughput, latency
// percentiles, round trips, verbs and bytes per operation, the compute-node
// cache hit ratio and the memory nodes' NIC utilisation.
//
// # Workloads
//
// Workloads follow YCSB's CoreWorkload: records are named by the FNV hash
// of their number (insertorder=hashed); keys are drawn from a scrambled
// Zipfian (θ = 0.99 by default, with YCSB's normalisation constants),
// latest, uniform or hotspot distribution, and only among acknowledged
// records; YCSB E scans have uniform lengths in 1..100, and the index is
// told the length (index.ScanLimit), as YCSB tells a database; F does
// read-modify-writes. Preset names YCSB's LOAD and A–F and SMART's "la"
// (100% insert) and "N-" (N% insert, the rest reads, latest) mixes. Key
// numbers become keys through a KeyType: 8-byte big-endian integers or
// synthetic e-mail addresses of at most 32 bytes with the host reversed in
// front ("com.gmail@john…"), the pre-processing of the SMART paper.
//
// ReadTrace and WriteTrace read and write index-microbench traces
// ("INSERT <key>", "READ <key>", "UPDATE <key>", "SCAN <key> <len>"), so
// that workloads generated elsewhere can be replayed (Config.LoadTrace,
// Config.RunTrace).
//
// # Runs
//
// Run builds a pool of memory nodes, opens one index per compute node
// through an Opener, loads the records with every client (LoadClientsPerCN
// per compute node, if set) and closes the indexes. It then starts a fresh
// pool from a snapshot of the memory nodes (remote.Pool.Snapshot), opens
// fresh indexes (cold caches), warms them up (WarmupOps) and runs the
// operations split evenly over ComputeNodes × ClientsPerCN clients. Load
// returns that loaded index (a Loaded) and Config.From starts a run from
// it, so that runs of several workloads or client counts share one load
// phase and still give the Result each gives alone. In
// ModeSim (the default) every client is a simulated thread of the RNIC
// simulator and all times are virtual, so a Config always gives the same
// Result; ModeLocal uses goroutines and the wall clock. Throughput counts
// completed operations (not issued ones, as the original SMART harness
// did); latencies go to HdrHistograms, per operation kind as in YCSB's
// output (Result.WriteText). An operation that fails is counted in
// Result.Errors, except that one failing with remote.ErrUnavailable (a
// memory node of a tcp or fabric run is gone) stops its phase at once and
// Run returns that error, as it does for any error of the load phase: a
// phase whose operations all fail would measure nothing. Operations
// stopped by crash injection are counted apart (see Crashes). Remote I/O
// per operation comes from the pool's statistics over the run phase, the
// cache hit ratio from indexes that implement StatsReporter, NIC
// utilisation from the simulator's report. The runner charges no CPU time
// of its own: indexes charge remote.Profile.CPUPerOp through their
// clients.
//
// # Crashes
//
// With Config.CrashRate (simulator only) the run phase runs under random
// crash injection (remote.Pool.InjectCrashes): clients stop inside their
// batches and the index, which must implement index.Recoverer, replaces
// them. Every write's value carries the write's id (its first 8 bytes; the
// rest derived from the id and the key), so a value read back names the
// write that wrote it. The runner records per written key the latest
// invocation of an acknowledged write and per write when it was
// acknowledged (never, for a crashed or failed write: its outcome is
// unknown). After the run it stops the injection, calls Recover on every
// compute node's index and Verify (Verifier), and reads every written key
// back: a key lost an acknowledged write if it is missing, or holds the
// value of a write acknowledged before an acknowledged write to it was
// invoked, or a value none of its writes wrote. Result.CrashResult reports
// the crashes, the crashed operations, the recovered locks, the lost keys
// and the first error. The record costs at most 16 bytes per write and the
// key plus about 100 bytes per written key (Estimate.CheckBytes, which
// doubles it for the garbage collector): about 1.5 GB of live data for 10 M
// records of 8-byte keys and 20 M operations (load, warm-up and run).
//
// # Limits
//
// Before it allocates anything, Run checks the Config (Config.Validate):
// keys and values must fit the index (Config.Footprint), and the run's
// Estimate, from the records on the memory nodes, each compute node's cache,
// tables and histograms and each client's buffers, must fit the machine's
// available memory (MemAvailable on Linux, GOMEMLIMIT, a cgroup's
// memory.max, or Config.MemoryLimit), memory nodes of an explicit size its
// physical memory, and the minimum runtime Config.MaxRuntime. A run that
// does not fit fails with an error wrapping ErrTooLarge, ErrTooLong or
// remote.ErrOutOfMemory that names the estimate and the limit; a Config
// that is invalid whatever the machine (a field out of range, a trace
// operation Run cannot execute, keys or values beyond the index's limits:
// index.ErrKeyTooLong, index.ErrValueTooLarge) with one wrapping
// ErrInvalid.
package ycsb
