package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

func init() {
	// In-memory indexes, so that the commands are tested without the real
	// ones (TestDefaultComparison runs those).
	indexes["mem"] = index{open: ycsbtest.NewOpener}
	indexes["mem2"] = index{open: ycsbtest.NewOpener}
}

// small are flags that keep a run to a few milliseconds.
var small = []string{"--records", "400", "--ops", "600", "--cns", "2", "--clients", "2", "--mns", "2"}

// exec runs dmbench in-process and returns its stdout.
func exec(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := dmbench(context.Background(), args, &out, &errOut)
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

func mustExec(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec(t, args...)
	if err != nil {
		t.Fatalf("dmbench %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func runArgs(extra ...string) []string {
	return append(append([]string{"run", "--index", "mem"}, small...), extra...)
}

func TestRunJSONFields(t *testing.T) {
	out := mustExec(t, runArgs("--workload", "b", "--json")...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, out)
	}
	for _, f := range []string{"index", "workload", "mode", "records", "ops", "mns", "cns", "clients",
		"throughput_ops", "p50_us", "p99_us", "rtt_per_op", "verbs_per_op", "read_bytes_per_op",
		"write_bytes_per_op", "cache_hit_ratio", "mn_iops_util", "mn_bw_util"} {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %q", f)
		}
	}
	want := map[string]any{"index": "mem", "workload": "b", "mode": "sim", "records": 400.0, "ops": 600.0,
		"mns": 2.0, "cns": 2.0, "clients": 2.0, "completed": 600.0, "errors": 0.0, "keys": "int", "value_size": 8.0}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	for _, f := range []string{"throughput_ops", "p50_us", "p99_us", "rtt_per_op", "mn_iops_util", "cache_hit_ratio"} {
		if v, ok := m[f].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", f, m[f])
		}
	}
}

func TestRunIsDeterministicInSim(t *testing.T) {
	for _, extra := range [][]string{{"--json"}, {"--workload", "e", "--keys", "email"}} {
		a := mustExec(t, runArgs(extra...)...)
		b := mustExec(t, runArgs(extra...)...)
		if a != b {
			t.Errorf("dmbench run %v differs between two runs:\n%s\n%s", extra, a, b)
		}
		c := mustExec(t, runArgs(append(extra, "--seed", "2")...)...)
		if a == c {
			t.Errorf("dmbench run %v gives the same output for seeds 1 and 2", extra)
		}
	}
}

func TestRunFlags(t *testing.T) {
	for _, c := range []struct {
		flags []string
		field string
		want  any
	}{
		{[]string{"--workload", "load"}, "workload", "load"},
		{[]string{"--workload", "la"}, "workload", "la"},
		{[]string{"--workload", "30-"}, "workload", "30-"},
		{[]string{"--keys", "email"}, "keys", "email"},
		{[]string{"--records", "100"}, "records", 100.0},
		{[]string{"--ops", "50"}, "completed", 50.0},
		{[]string{"--value-size", "64"}, "value_size", 64.0},
		{[]string{"--mns", "3"}, "mns", 3.0},
		{[]string{"--cns", "1"}, "cns", 1.0},
		{[]string{"--clients", "5"}, "clients", 5.0},
		{[]string{"--cache-mb", "16"}, "cache_mb", 16.0},
		{[]string{"--cache-mb", "0"}, "cache_mb", 0.0},
		{[]string{"--mode", "local"}, "mn_iops_util", nil},
		{[]string{"--nic", "cx6"}, "nic", "cx6"},
		{[]string{"--ordering", "strict"}, "ordering", "strict"},
		{[]string{"--zipf", "0.5"}, "errors", 0.0},
		{[]string{"--seed", "9"}, "seed", 9.0},
		{[]string{"--mn-mb", "32"}, "errors", 0.0},
	} {
		out := mustExec(t, runArgs(append(c.flags, "--json")...)...)
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: %v", c.flags, err)
		}
		if m[c.field] != c.want {
			t.Errorf("%v: %s = %v, want %v", c.flags, c.field, m[c.field], c.want)
		}
	}
	for _, bad := range [][]string{
		{"--index", "btree"}, {"--workload", "g"}, {"--keys", "string"}, {"--mode", "rdma"},
		{"--nic", "cx7"}, {"--ordering", "random"}, {"--clients", "0"}, {"--value-size", "0"},
		{"--records", "-1"}, {"--nosuchflag"}, {"--load-trace", "x"}, {"extra"},
	} {
		if _, err := exec(t, runArgs(bad...)...); err == nil {
			t.Errorf("dmbench run %v succeeded", bad)
		}
	}
	if _, err := exec(t, "frobnicate"); err == nil {
		t.Error("unknown command accepted")
	}
}

func TestRunText(t *testing.T) {
	out := mustExec(t, runArgs("--workload", "f")...)
	for _, want := range []string{"[OVERALL], RunTime(ms), ", "[OVERALL], Throughput(ops/sec), ",
		"[READ-MODIFY-WRITE], Operations, ", "[READ], 99thPercentileLatency(us), ", "[MN-NIC], IOPSUtilization, "} {
		if !strings.Contains(out, want) {
			t.Errorf("YCSB output lacks %q:\n%s", want, out)
		}
	}
}

func TestGenAndReplay(t *testing.T) {
	dir := t.TempDir()
	out := mustExec(t, "gen", "--workload", "e", "--keys", "email", "--records", "300", "--ops", "120", "--out", dir)
	load := filepath.Join(dir, "load_email_workloade")
	txn := filepath.Join(dir, "txn_email_workloade")
	if out != load+"\n"+txn+"\n" {
		t.Fatalf("gen printed %q", out)
	}
	// The cluster of small, without its --records and --ops: the traces
	// decide them.
	res := mustExec(t, append(append([]string{"run", "--index", "mem"}, small[4:]...), "--keys", "email", "--load-trace", load, "--run-trace", txn, "--json")...)
	var r ycsb.Result
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatal(err)
	}
	if r.Records != 300 || r.Ops != 120 || r.Completed != 120 || r.Workload != "trace" {
		t.Errorf("replay: records %d, ops %d, completed %d, workload %q", r.Records, r.Ops, r.Completed, r.Workload)
	}
	for _, o := range r.Operations {
		if strings.HasSuffix(o.Name, "-FAILED") {
			t.Errorf("replay: %d %s", o.Count, o.Name)
		}
	}
}

// TestTraceDecides checks dmbench run with traces: every flag that the
// traces decide is refused with --run-trace (it was ignored: --records
// 2000 loaded nothing), run -h says so, a replay is checked against the
// traces' sizes (it was checked against --records and --ops), and a run
// trace without a load trace says on stderr that the index starts empty.
func TestTraceDecides(t *testing.T) {
	dir := t.TempDir()
	mustExec(t, "gen", "--workload", "a", "--records", "300", "--ops", "500", "--out", dir)
	load, txn := filepath.Join(dir, "load_randint_workloada"), filepath.Join(dir, "txn_randint_workloada")
	values := map[string]string{"records": "300", "ops": "500", "workload": "c", "warmup-ops": "3", "warmup-keys": "9", "zipf": "0.5"}
	if len(values) != len(traceDecided) {
		t.Fatalf("traceDecided %v: give each a value here", traceDecided)
	}
	var help, errOut bytes.Buffer
	if err := dmbench(context.Background(), []string{"run", "-h"}, &help, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("dmbench run -h: %v", err)
	}
	_, runTraceHelp, _ := strings.Cut(errOut.String(), "  -run-trace")
	runTraceHelp, _, _ = strings.Cut(runTraceHelp, "\n  -")
	for _, name := range traceDecided {
		if !strings.Contains(runTraceHelp, "--"+name) {
			t.Errorf("run -h does not name --%s as refused with --run-trace: %q", name, runTraceHelp)
		}
		for _, traces := range [][]string{{"--run-trace", txn}, {"--load-trace", load, "--run-trace", txn}} {
			args := append(append([]string{"run", "--index", "mem"}, traces...), "--"+name, values[name])
			err := reject(t, args...)
			want := "--" + name + " with --run-trace: the traces decide"
			if err == nil || !strings.Contains(err.Error(), want) || exitStatus(err, new(bytes.Buffer)) != 2 {
				t.Errorf("dmbench %s: %v, want status 2 and %q", strings.Join(args, " "), err, want)
			}
		}
	}
	// 800 operations: within a --max-runtime that the default --records
	// and --ops (600000 operations with the warm-up) exceed.
	var r ycsb.Result
	out := mustExec(t, "run", "--index", "mem", "--load-trace", load, "--run-trace", txn, "--max-runtime", "100ms", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Records != 300 || r.Ops != 500 || r.WarmupOps != 0 || r.Workload != "trace" {
		t.Errorf("replay of both traces: records %d, ops %d, warm-up %d, workload %q", r.Records, r.Ops, r.WarmupOps, r.Workload)
	}
	var stdout, stderr bytes.Buffer
	if err := dmbench(context.Background(), []string{"run", "--index", "mem", "--run-trace", txn}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "[SETUP], Records, 0") || !strings.Contains(stderr.String(), "--run-trace without --load-trace: the index starts empty") {
		t.Errorf("a run trace alone:\n%s\nstderr: %s", stdout.String(), stderr.String())
	}
}

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"compare", "--indexes", "mem,mem2", "--workloads", "a,c", "--clients", "1,3", "--out", dir}, small[:6]...)
	out := mustExec(t, args...)
	for _, want := range []string{"setup: YCSB a, c, 400 records", "(Zipfian θ 0.99 where the workload is skewed)", "runs with the same load share it",
		"× {1, 3} clients per compute node", "mem/mem2", "columns: Mops/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "paper =") {
		t.Errorf("the paper's setup is explained without a paper ratio:\n%s", out)
	}
	if table, err := os.ReadFile(filepath.Join(dir, "table.txt")); err != nil || strings.Count(string(table), "\n") != 1+8+1+1+2 {
		t.Errorf("table.txt (%v):\n%s", err, table)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cmp comparison
	if err := json.Unmarshal(b, &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Results) != 8 || len(cmp.Ratios) != 2 || cmp.Ratios[0].Ratio <= 0 {
		t.Errorf("results.json: %d results, ratios %+v", len(cmp.Results), cmp.Ratios)
	}
	for _, f := range []string{"table.txt", "curves.png", "curves.svg", "curve-a.png", "curve-c.svg", "ratios.png", "ratios.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// --json prints what results.json holds.
	var again comparison
	if err := json.Unmarshal([]byte(mustExec(t, append(args, "--json")...)), &again); err != nil {
		t.Fatal(err)
	}
	x, _ := json.Marshal(cmp.Results)
	y, _ := json.Marshal(again.Results)
	if !bytes.Equal(x, y) {
		t.Error("compare --json differs from results.json")
	}
}

func TestFactor(t *testing.T) {
	smartWith = func(smart.Options) ycsb.Opener { return ycsbtest.NewOpener() }
	defer func() { smartWith = smartOpener }()
	saved := indexes["sherman"]
	indexes["sherman"] = index{open: ycsbtest.NewOpener}
	defer func() { indexes["sherman"] = saved }()
	dir := t.TempDir()
	out := mustExec(t, append([]string{"factor", "--workloads", "a,c", "--out", dir}, small...)...)
	for _, s := range factorSteps {
		if strings.Count(out, s.name) != 2 {
			t.Errorf("factor table lacks %q twice:\n%s", s.name, out)
		}
	}
	for _, f := range []string{"factor.json", "factor.txt", "factor.png", "factor.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestAmplification(t *testing.T) {
	out := mustExec(t, "amplification", "--indexes", "mem", "--records", "300", "--ops", "200", "--json")
	var rows []amplification
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	// The in-memory index moves the pair's bytes rounded up to 8.
	if len(rows) != 1 || rows[0].Read < 1 || rows[0].Read > 1.3 || rows[0].Write < 1 || rows[0].Write > 1.3 {
		t.Errorf("amplification of the in-memory index: %+v", rows)
	}
	if rows[0].ReadAppBytes < 64 || rows[0].WriteAppBytes < 64 {
		t.Errorf("object sizes %v, %v: want at least the 64-byte value", rows[0].ReadAppBytes, rows[0].WriteAppBytes)
	}
}

// TestAmplificationPaper checks that amplification prints its setup and a
// legend, as compare does, and sets Table 4.1's figures beside its own
// only when its keys and values are the paper's (it showed them with
// --keys int --value-size 8), saying why they are missing otherwise. SMART
// is the in-memory index here.
func TestAmplificationPaper(t *testing.T) {
	saved := indexes["smart"]
	indexes["smart"] = index{open: ycsbtest.NewOpener}
	defer func() { indexes["smart"] = saved }()
	for _, c := range []struct {
		flags []string
		paper bool
	}{
		{nil, true},
		{[]string{"--keys", "email", "--value-size", "64"}, true},
		{[]string{"--keys", "int", "--value-size", "8"}, false},
		{[]string{"--keys", "int"}, false},
		{[]string{"--value-size", "96"}, false},
	} {
		args := append([]string{"amplification", "--indexes", "smart,mem", "--records", "300", "--ops", "200"}, c.flags...)
		out := mustExec(t, args...)
		for _, want := range []string{"setup: YCSB read-only, update-only, 300 records", "each run loads its own index", "columns: object B = "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the output lacks %q:\n%s", c.flags, want, out)
			}
		}
		if strings.Contains(out, "Zipfian") {
			t.Errorf("%v: the setup of uniform runs names a Zipfian θ:\n%s", c.flags, out)
		}
		var smartRow []string
		for l := range strings.Lines(out) {
			if f := strings.Fields(l); len(f) == 10 && f[0] == "smart" {
				smartRow = f
			}
		}
		shown := len(smartRow) == 10 && smartRow[4] == "1.10" && smartRow[7] == "1.10"
		hidden := len(smartRow) == 10 && smartRow[4] == "-" && smartRow[7] == "-"
		if c.paper && (!shown || !strings.Contains(out, "paper = Table 4.1 of the SMART paper, measured with e-mail keys")) ||
			!c.paper && (!hidden || !strings.Contains(out, `paper = "-": Table 4.1 of the SMART paper measured e-mail keys`)) {
			t.Errorf("%v: the paper's figures shown: %v, want %v (row %q):\n%s", c.flags, shown, c.paper, smartRow, out)
		}
		var rows []amplification
		if err := json.Unmarshal([]byte(mustExec(t, append(args, "--json")...)), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || (rows[0].PaperRead != nil) != c.paper || rows[1].PaperRead != nil {
			t.Errorf("%v: --json rows %+v, want the paper's figures for smart: %v", c.flags, rows, c.paper)
		}
	}
}

func TestDefaultComparison(t *testing.T) {
	if testing.Short() {
		t.Skip("runs SMART and Sherman; skipped with -short")
	}
	out := mustExec(t)
	for _, want := range []string{"setup: YCSB a, c", "smart/sherman", "6.1×", "2.8×", "columns:", "paper = "} {
		if !strings.Contains(out, want) {
			t.Errorf("default comparison lacks %q:\n%s", want, out)
		}
	}
	// Every run is error-free, and SMART's largest point saturates the
	// memory nodes' NICs on C: the default shows the ratio at saturation.
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 14 || (f[1] != "smart" && f[1] != "sherman") {
			continue
		}
		rows++
		if f[13] != "0" {
			t.Errorf("a run of the default comparison has errors: %s", l)
		}
		if util, err := strconv.Atoi(strings.TrimSuffix(f[11], "%")); f[0] == "c" && f[1] == "smart" && f[2] == "8×32" && (err != nil || util < 90) {
			t.Errorf("SMART's YCSB-C point does not saturate the memory nodes (MN iops %s): %s", f[11], l)
		}
	}
	if rows != 8 {
		t.Errorf("%d runs in the default comparison's table, want 8:\n%s", rows, out)
	}
}

// TestWarmupKeys checks that --warmup-keys sizes each workload's warm-up by
// the keys its operations visit, and that it excludes --warmup-ops.
func TestWarmupKeys(t *testing.T) {
	for _, tc := range []struct {
		workload string
		want     float64
	}{
		{"a", 960},
		{"e", 20}, // ⌈960 / (0.05 + 0.95 × 50.5)⌉
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(mustExec(t, runArgs("--workload", tc.workload, "--warmup-keys", "960", "--json")...)), &m); err != nil {
			t.Fatal(err)
		}
		if m["warmup_ops"] != tc.want {
			t.Errorf("%s: warmup_ops %v, want %v", tc.workload, m["warmup_ops"], tc.want)
		}
	}
	if _, err := exec(t, runArgs("--warmup-keys", "960", "--warmup-ops", "5")...); err == nil {
		t.Error("--warmup-keys with --warmup-ops accepted")
	}
}

// run -h lists every index --index accepts, from the table the parser
// uses.
func TestIndexHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := dmbench(context.Background(), []string{"run", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("dmbench run -h: %v", err)
	}
	var help string
	for l := range strings.Lines(errOut.String()) {
		if strings.Contains(l, "index: ") {
			help = l
		}
	}
	for name := range indexes {
		if !strings.Contains(help, name+",") && !strings.Contains(help, name+" ") {
			t.Errorf("run -h does not list index %q: %q", name, help)
		}
		if _, err := lookup(name); err != nil {
			t.Errorf("index %q: %v", name, err)
		}
	}
	for _, want := range []string{"smart-noredo", "smart-paper", "smart-reclaim", "sherman-noredo"} {
		if !strings.Contains(help, want) {
			t.Errorf("run -h lacks %q: %q", want, help)
		}
	}
}

// In tcp mode --mn-mb may state the memnode servers' size (it was refused:
// "more than their 0 × 64.0 MiB") and --mns their count, which the result
// reports; a --mns other than the servers listed is refused. The server
// runs on 127.0.0.1 and is stopped by pid when the test ends.
func TestRunOnMemnode(t *testing.T) {
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 64 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"run", "--index", "smart", "--mode", "tcp", "--memnodes", nodes[0].Addr, "--token", memnodetest.Token,
		"--records", "200", "--ops", "500", "--cns", "1", "--clients", "2", "--json"}
	for _, extra := range [][]string{{"--mn-mb", "64"}, {"--mns", "1"}, nil} {
		var out, errOut bytes.Buffer
		if err := dmbench(ctx, append(base, extra...), &out, &errOut); err != nil {
			t.Fatalf("dmbench run --mode tcp %v: %v\n%s", extra, err, errOut.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out.String())
		}
		if m["mns"] != 1.0 || m["completed"] != 500.0 || m["errors"] != 0.0 {
			t.Errorf("%v: mns %v, completed %v, errors %v", extra, m["mns"], m["completed"], m["errors"])
		}
	}
	var out, errOut bytes.Buffer
	if err := dmbench(ctx, append(base, "--mns", "3"), &out, &errOut); err == nil || !strings.Contains(err.Error(), "--mns 3, but --memnodes lists 1") {
		t.Errorf("--mns 3 with one memnode server: %v", err)
	}
}
