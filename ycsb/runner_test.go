package ycsb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

func config(t *testing.T, workload string, mode ycsb.Mode) ycsb.Config {
	t.Helper()
	w, err := ycsb.Preset(workload)
	if err != nil {
		t.Fatal(err)
	}
	return ycsb.Config{
		Index: "mem", Open: ycsbtest.NewOpener(), Workload: w, Keys: ycsb.KeyInt,
		Records: 2000, Ops: 3000, MemoryNodes: 2, ComputeNodes: 2, ClientsPerCN: 3,
		NodeBytes: 64 << 20, Mode: mode, Seed: 7,
	}
}

func run(t *testing.T, cfg ycsb.Config) *ycsb.Result {
	t.Helper()
	res, err := ycsb.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunCountsEveryOperation(t *testing.T) {
	for _, mode := range []ycsb.Mode{ycsb.ModeSim, ycsb.ModeLocal} {
		for _, wl := range []string{"a", "c", "d", "e", "f", "la", "load", "50-"} {
			res := run(t, config(t, wl, mode))
			wantOps := int64(3000)
			if wl == "load" {
				wantOps = 2000
			}
			if res.Completed != wantOps || res.Errors != 0 || res.Ops != wantOps {
				t.Errorf("%v %s: completed %d of %d with %d errors (%s)", mode, wl, res.Completed, res.Ops, res.Errors, res.FirstError)
			}
			if res.ThroughputOps <= 0 || res.P50US <= 0 || res.P99US < res.P50US {
				t.Errorf("%v %s: throughput %v, p50 %v, p99 %v", mode, wl, res.ThroughputOps, res.P50US, res.P99US)
			}
			// The fake index does one signaled batch per access.
			if res.RTTPerOp < 1 || res.VerbsPerOp < 1 || res.ReadBytesPerOp+res.WriteBytesPerOp == 0 {
				t.Errorf("%v %s: rtt/op %v, verbs/op %v, bytes/op %v+%v", mode, wl, res.RTTPerOp, res.VerbsPerOp,
					res.ReadBytesPerOp, res.WriteBytesPerOp)
			}
			if res.CacheHitRatio == nil || *res.CacheHitRatio < 0.7 || *res.CacheHitRatio > 0.8 {
				t.Errorf("%v %s: cache hit ratio %v, want about 0.75", mode, wl, res.CacheHitRatio)
			}
			// Every compute node reports the map's keys (the records and
			// the inserts) at CacheBytesPerKey each: per record, from
			// CacheBytesPerKey up to that much more per operation, warm-up included.
			lo, hi := float64(ycsbtest.CacheBytesPerKey), float64(ycsbtest.CacheBytesPerKey*(res.Records+res.WarmupOps+res.Ops))/float64(res.Records)
			if b := res.CacheBytesPerKey; b == nil || *b < lo || *b > hi {
				t.Errorf("%v %s: cache bytes per key %v, want %v to %v", mode, wl, deref(b), lo, hi)
			}
			var count int64
			for _, o := range res.Operations {
				if strings.HasSuffix(o.Name, "-FAILED") {
					t.Errorf("%v %s: %d failed %s (keys read before they were loaded or acknowledged)", mode, wl, o.Count, o.Name)
				}
				if o.Name != "READ" && o.Name != "UPDATE" || wl != "f" {
					count += o.Count
				}
			}
			if wl != "f" && count != wantOps {
				t.Errorf("%v %s: operation blocks count %d operations, want %d", mode, wl, count, wantOps)
			}
			if mode == ycsb.ModeLocal && res.MNIOPSUtil != nil {
				t.Errorf("local run reports NIC utilisation %v", *res.MNIOPSUtil)
			}
		}
	}
}

func TestReadModifyWriteBlocks(t *testing.T) {
	res := run(t, config(t, "f", ycsb.ModeSim))
	counts := make(map[string]int64)
	for _, o := range res.Operations {
		counts[o.Name] = o.Count
	}
	// YCSB measures the read and the update of a read-modify-write too.
	if counts["READ-MODIFY-WRITE"] == 0 || counts["READ"] <= counts["READ-MODIFY-WRITE"] ||
		counts["UPDATE"] != counts["READ-MODIFY-WRITE"] || counts["READ"]+counts["UPDATE"] != 3000+counts["UPDATE"] {
		t.Errorf("blocks of workload f: %v", counts)
	}
}

func TestSimRunIsDeterministic(t *testing.T) {
	for _, wl := range []string{"a", "d", "e"} {
		var out [2][]byte
		for i := range out {
			cfg := config(t, wl, ycsb.ModeSim)
			cfg.Keys = ycsb.KeyEmail
			b, err := json.Marshal(run(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			out[i] = b
		}
		if !bytes.Equal(out[0], out[1]) {
			t.Errorf("workload %s: two sim runs differ:\n%s\n%s", wl, out[0], out[1])
		}
	}
}

func TestTraceReplay(t *testing.T) {
	var load, txn bytes.Buffer
	for i := range 100 {
		load.WriteString("INSERT " + string(rune('a'+i%26)) + strings.Repeat("x", i/26+1) + "\n")
	}
	txn.WriteString("READ ax\nUPDATE bx\nSCAN cx 5\nINSERT zzz\nREAD nosuchkey\n")
	lops, err := ycsb.ReadTrace(&load, ycsb.KeyEmail)
	if err != nil {
		t.Fatal(err)
	}
	rops, err := ycsb.ReadTrace(&txn, ycsb.KeyEmail)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "c", ycsb.ModeSim)
	cfg.Workload.Name = ""
	cfg.Keys, cfg.LoadTrace, cfg.RunTrace = ycsb.KeyEmail, lops, rops
	res := run(t, cfg)
	if res.Records != 100 || res.Ops != 5 || res.Completed != 5 || res.Workload != "trace" {
		t.Fatalf("trace run: records %d, ops %d, completed %d, workload %q", res.Records, res.Ops, res.Completed, res.Workload)
	}
	var notFound int64
	for _, o := range res.Operations {
		for _, rc := range o.Returns {
			if rc.Code == "NOT_FOUND" {
				notFound += rc.Count
			}
		}
	}
	if notFound != 1 {
		t.Errorf("trace run: %d NOT_FOUND, want 1 (nosuchkey)", notFound)
	}
}

func TestWriteText(t *testing.T) {
	res := run(t, config(t, "a", ycsb.ModeSim))
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"[OVERALL], RunTime(ms), ", "[OVERALL], Throughput(ops/sec), ",
		"[READ], Operations, ", "[READ], AverageLatency(us), ", "[READ], 99thPercentileLatency(us), ",
		"[UPDATE], Return=OK, ", "[REMOTE], RoundTripsPerOp, ", "[CACHE], HitRatio, 0.75",
		"[SETUP], Index, mem", "[SETUP], Records, 2000", "[SETUP], Nodes(MN×CN×clients), 2×2×3", "[SETUP], Seed, 7",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	for line := range strings.Lines(out) {
		if f := strings.Split(strings.TrimSpace(line), ", "); len(f) != 3 || !strings.HasPrefix(f[0], "[") {
			t.Errorf("line %q is not [BLOCK], name, value", line)
		}
	}
}

func TestRunErrors(t *testing.T) {
	cfg := config(t, "a", ycsb.ModeSim)
	cfg.Open = nil
	if _, err := ycsb.Run(context.Background(), cfg); err == nil {
		t.Error("Run without an Opener succeeded")
	}
	cfg = config(t, "c", ycsb.ModeSim)
	cfg.Records = 0
	if _, err := ycsb.Run(context.Background(), cfg); err == nil {
		t.Error("reads over no records accepted")
	}
	// An Opener that returns no index and no error is an error of the run
	// (it was a panic in a client of the simulator).
	for _, mode := range []ycsb.Mode{ycsb.ModeSim, ycsb.ModeLocal} {
		cfg = config(t, "a", mode)
		cfg.Open = func(*remote.ComputeNode, ycsb.IndexConfig) (index.Index, error) { return nil, nil }
		if _, err := ycsb.Run(context.Background(), cfg); err == nil ||
			!strings.Contains(err.Error(), "opening mem on compute node 0: the Opener returned neither an index nor an error") {
			t.Errorf("%v: Run with an Opener returning (nil, nil): %v", mode, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ycsb.Run(ctx, config(t, "a", ycsb.ModeLocal)); err == nil {
		t.Error("Run with a cancelled context succeeded")
	}
}

// deref prints an optional figure.
func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
