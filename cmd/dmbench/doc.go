// Command dmbench benchmarks the range indexes of this module (SMART and
// the Sherman baseline) on disaggregated memory with YCSB workloads, in
// the deterministic RNIC simulator (virtual time, the default) or with
// real goroutines (--mode local).
//
// Without arguments it runs a small comparison, SMART against Sherman on
// YCSB A and C in the simulator, and prints the table:
//
//	go run ./cmd/dmbench
//
// Commands:
//
//	dmbench run            one index, one workload: YCSB's text output, or --json
//	dmbench compare        indexes × workloads × client counts: a table with
//	                       SMART/Sherman ratios, results.json and throughput–latency
//	                       and ratio plots (PNG, SVG) in --out DIR
//	dmbench amplification  bytes moved per byte returned, for reads and writes
//	                       (the paper's Table 4.1)
//	dmbench factor         SMART's techniques added one by one (Figure 4.14)
//	dmbench gen            write a workload as index-microbench trace files
//
// The workload and cluster flags are shared: --workload load|a|b|c|d|e|f|la
// (or N-: N% insert, the rest reads, latest), --keys int|email, --records
// N, --ops N, --value-size B, --mns M, --cns C, --clients K (per compute
// node), --cache-mb X (per compute node), --mode sim|local|shm|tcp|fabric,
// --nic cx6, --ordering inorder|strict (sim only), --zipf θ (0 < θ < 1),
// --seed S, --max-runtime D. With --mode tcp or fabric the memory nodes are
// the memnode servers of --memnodes: --mns, if given, must count them, and
// --mn-mb, if given, must be their size. In sim mode the same flags give the
// same output, byte for byte. The flags that take comma-separated lists
// (--indexes, --workloads, --clients, --memnodes) refuse an empty element
// ("smart,,sherman") and an element listed twice. --parallel (compare,
// factor: simulated runs at once, one per core by default) must be at
// least 1.
//
// `dmbench run --run-trace FILE` replays an index-microbench transaction
// file (`dmbench gen` writes one) as the run phase, after the load file of
// --load-trace if given (without it the index starts empty: Records 0, and
// dmbench says so on stderr). To replay both phases of a generated
// workload: `dmbench gen --workload a --out DIR`, then `dmbench run
// --load-trace DIR/load_randint_workloada --run-trace
// DIR/txn_randint_workloada`. The traces decide the records and the
// operations, and no workload is generated (no warm-up, no request
// distribution): --records, --ops, --workload, --warmup-ops, --warmup-keys
// and --zipf are refused with --run-trace.
//
// `dmbench compare` and `dmbench amplification` print their setup before
// their table and a legend of its columns after it. Amplification's paper
// columns hold Table 4.1's figures only for the paper's setup, e-mail keys
// and 64-byte values (96-byte objects, its defaults); for other keys or
// values they hold "-" and the legend says why.
//
// Every run is checked before anything is allocated (ycsb.Config.Validate):
// a value or key longer than the index stores, memory nodes larger than the
// machine's physical memory, records that do not fit in --mn-mb, a run whose
// estimated memory (records on the memory nodes, per compute node the cache,
// RDWC or lock tables and histograms, per client its buffers) exceeds the
// available memory, and runs whose minimum runtime exceeds --max-runtime
// (24h by default) fail, naming the estimate and the limit.
//
// The exit status is 0 on success and for -h, which prints the flags. It is
// 2 for bad input, which changing the flags or input files fixes whatever
// the machine: an unknown command or flag, a flag value out of range or
// contradicting another, an unknown index or workload, a trace file that
// cannot be read or holds no operations, and a run that the index cannot
// hold (keys, of --keys or a trace, or values of --value-size longer than
// it stores; more memory nodes than it addresses) or that cannot run (a
// workload that reads with --records 0): the errors of ycsb.ErrInvalid,
// index.ErrKeyTooLong and index.ErrValueTooLarge. It is 1
// for a run that does not fit this machine, its memory nodes or
// --max-runtime (ycsb.ErrTooLarge, remote.ErrOutOfMemory,
// ycsb.ErrTooLong), and for a run that failed: a command whose operations
// failed prints its results and exits with status 1, naming the first
// failure; a run whose memory node went away (an operation failed with
// remote.ErrUnavailable) stops that phase at once and exits with status 1
// and that error, without results.
//
// `dmbench run --json` prints one object with the fields of ycsb.Result:
// index, workload, mode, records, ops, mns, cns, clients (per compute
// node), throughput_ops, p50_us, p99_us, rtt_per_op, verbs_per_op,
// read_bytes_per_op, write_bytes_per_op, cache_hit_ratio (null if the index
// reports no cache; a hit is an operation that reached its leaf without
// reading an internal node), mn_iops_util and mn_bw_util (the busiest
// memory node's NIC, null outside the simulator), warmup_ops and
// warmup_rtt_per_op (the unmeasured warm-up between load and run: one
// operation per record per compute node by default, a scan counting as its mean length,
// --warmup-ops), mn_bytes_per_key (the
// memory-node memory the loaded index uses per record), cache_bytes_per_key (what one
// compute node's index cache holds at the end, per record), compacted (with
// --compact), and more.
//
// `--compact` (run, compare, factor) has one client compact the index once
// after the load, as part of it and not measured (index.Compacter: SMART
// lays its leaves out in key order so that a scan reads runs of them with
// one READ; Sherman is not a Compacter and is unchanged); compacted counts
// the pairs moved, and mn_bytes_per_key includes the memory the new layout
// took (the old leaves stay allocated unless the index reclaims them).
// `dmbench factor` has SMART's last step, "+compaction after the load",
// compact in any case.
//
// `dmbench run --crash-rate N` (sim only, N up to 1,000,000) stops N random
// clients per virtual second of the measured phase (the run phase; for
// --workload load, the load itself) at random points inside their
// batches, a WRITE possibly cut at a word boundary; the index replaces
// them. Operations that return remote.ErrCrashed have an unknown outcome
// and count neither as completed nor as failed. After the run dmbench
// recovers the index on every compute node (index.Recoverer; an index
// without it is refused), calls its Verify and reads every written key
// back. The output gains crash_rate, crashes, crashed_ops,
// recovered_locks, lost_acknowledged (keys that lost an acknowledged
// write: must be 0) and verify ("ok" or the first error), and the
// text output a [CRASH] block; a lost write or a failed verify exits with
// status 1 after printing the result.
//
// A progress bar is drawn on stderr when it is a terminal.
package main
