package ycsb

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dmindex/dmindex/remote"
)

// Result is the measurement of one run phase. Latencies are in
// microseconds and throughput in operations per second, both of virtual
// time in ModeSim. Per-operation counts divide the run phase's remote I/O
// (every client of every compute node) by the completed operations.
//
// The JSON field names are a stable interface of cmd/dmbench.
type Result struct {
	Index     string `json:"index"`
	Workload  string `json:"workload"`
	Keys      string `json:"keys"`
	Mode      string `json:"mode"`
	NIC       string `json:"nic,omitempty"`      // simulator profile (sim only)
	Ordering  string `json:"ordering,omitempty"` // simulator ordering (sim only)
	Records   int64  `json:"records"`
	Ops       int64  `json:"ops"` // operations issued in the run phase
	ValueSize int    `json:"value_size"`
	MNs       int    `json:"mns"`
	CNs       int    `json:"cns"`
	Clients   int    `json:"clients"` // per compute node
	// LoadClients is the load phase's clients per compute node, when they
	// are not Clients (Config.LoadClientsPerCN).
	LoadClients int     `json:"load_clients,omitempty"`
	CacheMB     float64 `json:"cache_mb"` // 0: no cache, or the index's default

	Seed uint64 `json:"seed"`

	// Completed operations returned without error (NOT_FOUND included);
	// Errors returned an error and are not part of throughput or latency.
	Completed  int64  `json:"completed"`
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`

	RunTimeMS     float64 `json:"runtime_ms"`
	ThroughputOps float64 `json:"throughput_ops"`
	AvgUS         float64 `json:"avg_us"`
	P50US         float64 `json:"p50_us"`
	P95US         float64 `json:"p95_us"`
	P99US         float64 `json:"p99_us"`
	P999US        float64 `json:"p999_us"`
	MaxUS         float64 `json:"max_us"`

	RTTPerOp         float64 `json:"rtt_per_op"`   // signaled batches
	VerbsPerOp       float64 `json:"verbs_per_op"` // one-sided verbs
	ReadBytesPerOp   float64 `json:"read_bytes_per_op"`
	WriteBytesPerOp  float64 `json:"write_bytes_per_op"`
	CASFailuresPerOp float64 `json:"cas_failures_per_op"`
	RPCsPerOp        float64 `json:"rpcs_per_op"`
	// AppBytesPerOp is the key and value bytes the application handed over
	// (writes) or got back (reads, scans): the denominator of I/O
	// amplification.
	AppBytesPerOp float64 `json:"app_bytes_per_op"`

	// CacheHitRatio is null unless the index implements StatsReporter.
	CacheHitRatio *float64 `json:"cache_hit_ratio"`
	// CacheBytesPerKey is what one compute node's index cache holds at the
	// end of the run (index.Stats.CacheBytes, averaged over the compute
	// nodes) per loaded record; null unless the index implements
	// StatsReporter.
	CacheBytesPerKey *float64 `json:"cache_bytes_per_key"`
	// MNIOPSUtil and MNBWUtil are the busiest memory node NIC's verb rate
	// and larger direction's byte rate, as shares of the profile's limits,
	// over the run phase; null outside the simulator.
	MNIOPSUtil *float64 `json:"mn_iops_util"`
	MNBWUtil   *float64 `json:"mn_bw_util"`

	LoadRunTimeMS     float64 `json:"load_runtime_ms"`
	LoadThroughputOps float64 `json:"load_throughput_ops"`

	// MNBytesPerKey is the memory-node memory the index's structures use
	// once the records are loaded (remote.Stats.AllocBytes less FreedBytes,
	// without the unused tails of allocation chunks), per record.
	MNBytesPerKey float64 `json:"mn_bytes_per_key"`
	// Compacted is the number of pairs Config.Compact moved after the
	// load (0 without it).
	Compacted int64 `json:"compacted,omitempty"`

	// WarmupOps is the number of warm-up operations that completed between
	// the load and the run phase (Config.WarmupOps), WarmupErrors those
	// that failed, and WarmupRTTPerOp their round trips per operation: the
	// cold-cache figure to set against RTTPerOp.
	WarmupOps      int64   `json:"warmup_ops"`
	WarmupErrors   int64   `json:"warmup_errors,omitempty"`
	WarmupRTTPerOp float64 `json:"warmup_rtt_per_op"`

	// Operations has one entry per YCSB measurement, in YCSB's order.
	Operations []OpResult `json:"operations"`

	// CrashResult holds the figures of crash injection (Config.CrashRate);
	// nil, and absent from the JSON, without it. Its fields are promoted
	// (res.Crashes), which panics when it is nil: test it first.
	*CrashResult
}

// OpResult is one YCSB measurement block: the operations of one kind that
// succeeded ("READ"), or those that did not ("READ-FAILED": NOT_FOUND and
// ERROR).
type OpResult struct {
	Name    string        `json:"name"`
	Count   int64         `json:"count"`
	AvgUS   float64       `json:"avg_us"`
	MinUS   float64       `json:"min_us"`
	MaxUS   float64       `json:"max_us"`
	P50US   float64       `json:"p50_us"`
	P95US   float64       `json:"p95_us"`
	P99US   float64       `json:"p99_us"`
	P999US  float64       `json:"p999_us"`
	Returns []ReturnCount `json:"returns,omitempty"`
}

// ReturnCount counts the operations of a kind by YCSB return code ("OK",
// "NOT_FOUND", "ERROR").
type ReturnCount struct {
	Code  string `json:"code"`
	Count int64  `json:"count"`
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

func per(n uint64, ops int64) float64 {
	if ops == 0 {
		return 0
	}
	return float64(n) / float64(ops)
}

func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}

// result assembles the Result of a run.
func (r *runner) result(load, run phase, before, after snapshot) *Result {
	cfg := &r.cfg
	res := &Result{
		Index: cfg.Index, Workload: cfg.Workload.Name, Keys: cfg.Keys.String(), Mode: cfg.Mode.String(),
		Records: cfg.Records, Ops: cfg.Ops, ValueSize: cfg.ValueSize,
		MNs: r.pool.MemoryNodes(), CNs: cfg.ComputeNodes, Clients: cfg.ClientsPerCN,
		CacheMB: float64(max(cfg.CacheBytes, 0)) / (1 << 20), Seed: cfg.Seed,
	}
	if cfg.RunTrace != nil && res.Workload == "" {
		res.Workload = "trace"
	}
	if cfg.LoadClientsPerCN != cfg.ClientsPerCN {
		res.LoadClients = cfg.LoadClientsPerCN
	}
	if p := r.pool.Config().Sim; p != nil {
		res.NIC, res.Ordering = p.Profile.Name, p.Ordering.String()
	}
	var appBytes int64
	for i := range run.clients {
		c := &run.clients[i]
		res.Completed += c.completed
		res.Errors += c.errors
		appBytes += c.appBytes
	}
	if err := run.firstErr(); err != nil {
		res.FirstError = err.Error()
	}
	var loadOps int64
	for i := range load.clients {
		loadOps += load.clients[i].completed
	}
	elapsed := run.end - run.start
	res.RunTimeMS = float64(elapsed) / float64(time.Millisecond)
	res.ThroughputOps = rate(res.Completed, elapsed)
	res.LoadRunTimeMS = float64(load.end-load.start) / float64(time.Millisecond)
	res.LoadThroughputOps = rate(loadOps, load.end-load.start)

	res.setLatencies(run.hists)
	res.setRemote(r.pool, before, after, elapsed)
	res.AppBytesPerOp = per(uint64(appBytes), res.Completed)
	return res
}

// setWarmup records the warm-up phase: its operations and its round trips
// per operation between the two snapshots.
func (res *Result) setWarmup(warm phase, before, after snapshot) {
	for i := range warm.clients {
		res.WarmupOps += warm.clients[i].completed
		res.WarmupErrors += warm.clients[i].errors
	}
	d := after.stats.Sub(before.stats)
	res.WarmupRTTPerOp = per(d.RoundTrips, res.WarmupOps)
}

// setLatencies merges the compute nodes' histograms into the overall
// percentiles and YCSB's per-operation blocks.
func (res *Result) setLatencies(hists []*histSet) {
	overall := newHist()
	var overallSum int64
	var merged [numOpKinds][2]*hdrhistogram.Histogram
	var sums [numOpKinds][2]int64
	var returns [numOpKinds][numStatuses]int64
	for _, hs := range hists {
		if hs.overall != nil {
			overall.Merge(hs.overall)
			overallSum += hs.sumOverall
		}
		for k := range numOpKinds {
			for f, h := range [2]*hdrhistogram.Histogram{hs.ok[k], hs.failed[k]} {
				if h == nil {
					continue
				}
				if merged[k][f] == nil {
					merged[k][f] = newHist()
				}
				merged[k][f].Merge(h)
			}
			sums[k][0] += hs.sumOK[k]
			sums[k][1] += hs.sumFail[k]
			for st := range numStatuses {
				returns[k][st] += hs.returns[k][st]
			}
		}
	}
	if overall.TotalCount() > 0 {
		res.AvgUS = us(overallSum) / float64(overall.TotalCount())
		res.P50US = us(overall.ValueAtQuantile(50))
		res.P95US = us(overall.ValueAtQuantile(95))
		res.P99US = us(overall.ValueAtQuantile(99))
		res.P999US = us(overall.ValueAtQuantile(99.9))
		res.MaxUS = us(overall.Max())
	}
	for k := range numOpKinds {
		for f, suffix := range [2]string{"", "-FAILED"} {
			h := merged[k][f]
			if h == nil && (f == 1 || returns[k] == [numStatuses]int64{}) {
				continue
			}
			o := OpResult{Name: k.String() + suffix}
			if h != nil {
				o.Count = h.TotalCount()
				o.AvgUS = us(sums[k][f]) / float64(o.Count)
				o.MinUS, o.MaxUS = us(h.Min()), us(h.Max())
				o.P50US, o.P95US = us(h.ValueAtQuantile(50)), us(h.ValueAtQuantile(95))
				o.P99US, o.P999US = us(h.ValueAtQuantile(99)), us(h.ValueAtQuantile(99.9))
			}
			if f == 0 {
				for st := range numStatuses {
					if n := returns[k][st]; n > 0 {
						o.Returns = append(o.Returns, ReturnCount{Code: st.String(), Count: n})
					}
				}
			}
			res.Operations = append(res.Operations, o)
		}
	}

}

// setRemote sets the per-operation remote I/O, the cache hit ratio and the
// NIC utilisation of the run phase, which lasted elapsed.
func (res *Result) setRemote(pool *remote.Pool, before, after snapshot, elapsed time.Duration) {
	d := after.stats.Sub(before.stats)
	n := res.Completed
	res.RTTPerOp = per(d.RoundTrips, n)
	res.VerbsPerOp = per(d.Verbs(), n)
	res.ReadBytesPerOp = per(d.ReadBytes, n)
	res.WriteBytesPerOp = per(d.WriteBytes, n)
	res.CASFailuresPerOp = per(d.CASFailures, n)
	res.RPCsPerOp = per(d.RPCs, n)
	if after.caches {
		res.CacheHitRatio = ratio(float64(after.hits-before.hits), float64(after.looks-before.looks))
		res.CacheBytesPerKey = ratio(float64(after.cacheBytes), float64(after.reporters)*float64(res.Records))
	}
	if p := pool.Config().Sim; p != nil && elapsed > 0 && len(after.report.MemoryNodes) > 0 {
		secs := elapsed.Seconds()
		var iops, bw float64
		for i, a := range after.report.MemoryNodes {
			var b remote.NICReport
			if i < len(before.report.MemoryNodes) {
				b = before.report.MemoryNodes[i]
			}
			iops = max(iops, float64(a.Verbs-b.Verbs)/secs/p.Profile.MNIOPS)
			bytes := max(a.TxBytes-b.TxBytes, a.RxBytes-b.RxBytes)
			bw = max(bw, float64(bytes)/secs/p.Profile.Bandwidth)
		}
		res.MNIOPSUtil, res.MNBWUtil = &iops, &bw
	}
}

func rate(ops int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(ops) / d.Seconds()
}

// WriteText writes res in YCSB's text format ("[OVERALL], RunTime(ms),
// …"), one measurement per line, followed by the remote I/O, cache and NIC
// measurements in the same format. Latencies are printed with nanosecond
// precision because virtual latencies are a few microseconds.
func (res *Result) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	line := func(block, name string, v any) {
		var s string
		switch v := v.(type) {
		case float64:
			s = strconv.FormatFloat(v, 'f', -1, 64)
			if v != float64(int64(v)) {
				s = strconv.FormatFloat(v, 'f', 3, 64)
			}
		default:
			s = fmt.Sprint(v)
		}
		fmt.Fprintf(bw, "[%s], %s, %s\n", block, name, s)
	}
	// The run's parameters first, so that no figure travels without them.
	line("SETUP", "Index", res.Index)
	line("SETUP", "Workload", res.Workload)
	line("SETUP", "Keys", res.Keys)
	line("SETUP", "Records", res.Records)
	line("SETUP", "ValueSize", res.ValueSize)
	line("SETUP", "Nodes(MN×CN×clients)", fmt.Sprintf("%d×%d×%d", res.MNs, res.CNs, res.Clients))
	line("SETUP", "CacheMB", res.CacheMB)
	line("SETUP", "Mode", res.Mode)
	if res.NIC != "" {
		line("SETUP", "Simulator", res.NIC+" "+res.Ordering+" (virtual time)")
	}
	line("SETUP", "Seed", res.Seed)
	line("OVERALL", "RunTime(ms)", res.RunTimeMS)
	line("OVERALL", "Throughput(ops/sec)", res.ThroughputOps)
	line("OVERALL", "Operations", res.Completed)
	if res.Errors > 0 {
		line("OVERALL", "Errors", res.Errors)
	}
	if res.LoadRunTimeMS > 0 {
		line("LOAD", "RunTime(ms)", res.LoadRunTimeMS)
		line("LOAD", "Throughput(ops/sec)", res.LoadThroughputOps)
	}
	if res.WarmupOps > 0 || res.WarmupErrors > 0 {
		line("WARMUP", "Operations", res.WarmupOps)
		if res.WarmupErrors > 0 {
			line("WARMUP", "Errors", res.WarmupErrors)
		}
		line("WARMUP", "RoundTripsPerOp", res.WarmupRTTPerOp)
	}
	for _, o := range res.Operations {
		line(o.Name, "Operations", o.Count)
		if o.Count > 0 {
			line(o.Name, "AverageLatency(us)", o.AvgUS)
			line(o.Name, "MinLatency(us)", o.MinUS)
			line(o.Name, "MaxLatency(us)", o.MaxUS)
			line(o.Name, "50thPercentileLatency(us)", o.P50US)
			line(o.Name, "95thPercentileLatency(us)", o.P95US)
			line(o.Name, "99thPercentileLatency(us)", o.P99US)
			line(o.Name, "99.9PercentileLatency(us)", o.P999US)
		}
		for _, rc := range o.Returns {
			line(o.Name, "Return="+rc.Code, rc.Count)
		}
	}
	line("REMOTE", "RoundTripsPerOp", res.RTTPerOp)
	line("REMOTE", "MNBytesPerKey", res.MNBytesPerKey)
	line("REMOTE", "VerbsPerOp", res.VerbsPerOp)
	line("REMOTE", "ReadBytesPerOp", res.ReadBytesPerOp)
	line("REMOTE", "WriteBytesPerOp", res.WriteBytesPerOp)
	line("REMOTE", "CASFailuresPerOp", res.CASFailuresPerOp)
	line("REMOTE", "AppBytesPerOp", res.AppBytesPerOp)
	if res.CacheHitRatio != nil {
		line("CACHE", "HitRatio", *res.CacheHitRatio)
	}
	if res.CacheBytesPerKey != nil {
		line("CACHE", "BytesPerKey", *res.CacheBytesPerKey)
	}
	if res.MNIOPSUtil != nil {
		line("MN-NIC", "IOPSUtilization", *res.MNIOPSUtil)
		line("MN-NIC", "BandwidthUtilization", *res.MNBWUtil)
	}
	if c := res.CrashResult; c != nil {
		line("CRASH", "Rate(per sec)", c.CrashRate)
		line("CRASH", "Crashes", c.Crashes)
		line("CRASH", "CrashedOperations", c.CrashedOps)
		line("CRASH", "RecoveredLocks", c.RecoveredLocks)
		line("CRASH", "LostAcknowledged", c.LostAcknowledged)
		verify := c.Verify
		if verify != "ok" {
			verify = strconv.Quote(verify)
		}
		line("CRASH", "Verify", verify)
	}
	if res.FirstError != "" {
		line("OVERALL", "FirstError", strconv.Quote(res.FirstError))
	}
	return bw.Flush()
}
