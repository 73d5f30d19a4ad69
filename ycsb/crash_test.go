package ycsb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

// crashRate gives the small runs of config a few dozen crashes.
const crashRate = 20_000

func crashConfig(t *testing.T, workload string) ycsb.Config {
	t.Helper()
	cfg := config(t, workload, ycsb.ModeSim)
	cfg.CrashRate = crashRate
	return cfg
}

// A correct index loses nothing, whatever the workload: the check has no
// false positives under concurrency.
func TestCrashRunOfACorrectIndex(t *testing.T) {
	for _, wl := range []string{"a", "f", "load", "d", "e", "la"} {
		res := run(t, crashConfig(t, wl))
		c := res.CrashResult
		if c == nil {
			t.Fatalf("%s: no crash result", wl)
		}
		// The in-memory index posts one verb per operation: every crash
		// stops one operation.
		if c.Crashes == 0 || c.CrashedOps != int64(c.Crashes) || c.CrashRate != crashRate {
			t.Errorf("%s: %d crashes, %d crashed operations, rate %v", wl, c.Crashes, c.CrashedOps, c.CrashRate)
		}
		if c.LostAcknowledged != 0 || c.Verify != "ok" || c.RecoveredLocks != 0 {
			t.Errorf("%s: %d lost, verify %q, %d recovered locks", wl, c.LostAcknowledged, c.Verify, c.RecoveredLocks)
		}
		if res.Errors != 0 || res.Completed+c.CrashedOps != res.Ops {
			t.Errorf("%s: %d completed + %d crashed of %d, %d errors (%s)", wl, res.Completed, c.CrashedOps, res.Ops, res.Errors, res.FirstError)
		}
	}
	if res := run(t, config(t, "a", ycsb.ModeSim)); res.CrashResult != nil {
		t.Errorf("a run without crash injection reports %+v", *res.CrashResult)
	}
}

// An index that loses acknowledged writes after crashes is caught.
func TestCrashRunCatchesLostWrites(t *testing.T) {
	for _, c := range []struct {
		loss             ycsbtest.Loss
		workload, phrase string
	}{
		{ycsbtest.LossDrop, "a", "is missing; a write to it invoked at"},
		{ycsbtest.LossDrop, "load", "is missing; a write to it invoked at"},
		{ycsbtest.LossStale, "a", "holds the value of a write acknowledged at"},
		{ycsbtest.LossStale, "f", "holds the value of a write acknowledged at"},
		{ycsbtest.LossTear, "a", "holds a value no write of the run wrote to it (torn or misplaced)"},
	} {
		cfg := crashConfig(t, c.workload)
		cfg.Open = ycsbtest.NewLossyOpener(c.loss)
		res := run(t, cfg)
		cr := res.CrashResult
		if cr.Crashes == 0 || cr.LostAcknowledged == 0 || cr.LostAcknowledged > int64(cr.Crashes) ||
			!strings.Contains(cr.Verify, c.phrase) {
			t.Errorf("loss %d on %s: %d crashes, %d lost, verify %q; want some lost and verify naming %q",
				c.loss, c.workload, cr.Crashes, cr.LostAcknowledged, cr.Verify, c.phrase)
		}
	}
}

// verifying is the in-memory index whose Verify fails.
type verifying struct{ *ycsbtest.Index }

var errBroken = errors.New("broken structure")

func (verifying) Verify(context.Context) error { return errBroken }

func TestCrashRunReportsVerify(t *testing.T) {
	open := ycsbtest.NewOpener()
	cfg := crashConfig(t, "a")
	cfg.Open = func(cn *remote.ComputeNode, ic ycsb.IndexConfig) (index.Index, error) {
		ix, err := open(cn, ic)
		return verifying{ix.(*ycsbtest.Index)}, err
	}
	res := run(t, cfg)
	if res.Verify != "verify: "+errBroken.Error() || res.LostAcknowledged != 0 {
		t.Errorf("verify %q, %d lost; want the index's Verify error and nothing lost", res.Verify, res.LostAcknowledged)
	}
}

func TestCrashRunIsDeterministic(t *testing.T) {
	var out [2][]byte
	for i := range out {
		b, err := json.Marshal(run(t, crashConfig(t, "a")))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Errorf("two crash runs differ:\n%s\n%s", out[0], out[1])
	}
	for _, f := range []string{`"crash_rate":20000`, `"crashes":`, `"crashed_ops":`, `"recovered_locks":0`,
		`"lost_acknowledged":0`, `"verify":"ok"`} {
		if !bytes.Contains(out[0], []byte(f)) {
			t.Errorf("JSON lacks %s:\n%s", f, out[0])
		}
	}
	var back ycsb.Result
	if err := json.Unmarshal(out[0], &back); err != nil || back.CrashResult == nil || back.Verify != "ok" {
		t.Errorf("JSON does not decode back: %v, %+v", err, back.CrashResult)
	}
	b, _ := json.Marshal(run(t, config(t, "a", ycsb.ModeSim)))
	if bytes.Contains(b, []byte(`"crash`)) || bytes.Contains(b, []byte(`"verify"`)) {
		t.Errorf("a run without crash injection has crash fields:\n%s", b)
	}
}

func TestCrashRunText(t *testing.T) {
	var buf bytes.Buffer
	if err := run(t, crashConfig(t, "a")).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[CRASH], Rate(per sec), 20000\n", "[CRASH], Crashes, ", "[CRASH], CrashedOperations, ",
		"[CRASH], RecoveredLocks, 0\n", "[CRASH], LostAcknowledged, 0\n", "[CRASH], Verify, ok\n"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := run(t, config(t, "a", ycsb.ModeSim)).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "[CRASH]") {
		t.Errorf("text output of a run without crashes has [CRASH] lines:\n%s", buf.String())
	}
}

func TestCrashRateRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*ycsb.Config)
		phrase string
	}{
		{"negative", func(c *ycsb.Config) { c.CrashRate = -1 }, "crash rate -1: want 0 (no crashes) up to 1000000 per second of virtual time"},
		{"NaN", func(c *ycsb.Config) { c.CrashRate = math.NaN() }, "crash rate NaN"},
		{"infinite", func(c *ycsb.Config) { c.CrashRate = math.Inf(1) }, "crash rate +Inf"},
		{"too high", func(c *ycsb.Config) { c.CrashRate = ycsb.MaxCrashRate * 2 }, "crash rate 2e+06: want"},
		{"local", func(c *ycsb.Config) { c.Mode = ycsb.ModeLocal }, "crash injection needs the simulator (ModeSim), not mode local"},
		{"small values", func(c *ycsb.Config) { c.ValueSize = 4 }, "values of at least 8 bytes"},
	} {
		cfg := crashConfig(t, "a")
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("%s: Validate: %v, want an error naming %q", c.name, err, c.phrase)
		}
		if _, err := ycsb.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("%s: Run: %v, want an error naming %q", c.name, err, c.phrase)
		}
	}
	open := ycsbtest.NewOpener()
	cfg := crashConfig(t, "a")
	cfg.Open = func(cn *remote.ComputeNode, ic ycsb.IndexConfig) (index.Index, error) {
		ix, err := open(cn, ic)
		return struct{ index.Index }{ix}, err // hides Recover
	}
	if _, err := ycsb.Run(context.Background(), cfg); !errors.Is(err, ycsb.ErrNotRecoverable) ||
		!strings.Contains(err.Error(), "mem does not implement it") {
		t.Errorf("an index without Recover: %v, want ErrNotRecoverable naming the index", err)
	}
}

func TestCrashCheckInEstimate(t *testing.T) {
	cfg := crashConfig(t, "a")
	with, err := cfg.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	cfg.CrashRate = 0
	without, err := cfg.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	if without.CheckBytes != 0 || with.CheckBytes <= 0 || with.Bytes != without.Bytes+with.CheckBytes {
		t.Errorf("check bytes %d with crashes, %d without; totals %d and %d", with.CheckBytes, without.CheckBytes, with.Bytes, without.Bytes)
	}
}

// waitingForTrees names the crash runs of the trees that fail today, by
// "index/workload", with what the tree still lacks (issue 14 item 2).
// Remove an entry once its runs pass; a tree that does not implement
// index.Recoverer yet is skipped on its own.
var waitingForTrees = map[string]string{}

// The trees under crash injection (issue 14): YCSB-A and LOAD, InOrder and
// Strict, lose no acknowledged write, leave no lock, pass Verify, and keep
// at least half their crash-free throughput. Skipped while a tree does
// not implement index.Recoverer, and for the runs of waitingForTrees.
func TestCrashRunTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("runs SMART and Sherman under crash injection; skipped with -short")
	}
	for _, name := range []string{"smart", "sherman"} {
		for _, ordering := range []remote.Ordering{remote.InOrder, remote.Strict} {
			for _, wl := range []string{"a", "load"} {
				t.Run(name+"/"+ordering.String()+"/"+wl, func(t *testing.T) {
					if why, ok := waitingForTrees[name+"/"+wl]; ok {
						t.Skip("waiting for the tree: " + why)
					}
					cfg := config(t, wl, ycsb.ModeSim)
					cfg.Index, cfg.Open = name, trees[name]
					cfg.Records, cfg.Ops, cfg.WarmupOps = 20_000, 20_000, -1
					cfg.Sim = remote.SimConfig{Profile: remote.CX6(), Ordering: ordering}
					base := run(t, cfg)
					for _, rate := range []float64{100, 10_000} {
						cfg.CrashRate = rate
						res, err := ycsb.Run(context.Background(), cfg)
						if errors.Is(err, ycsb.ErrNotRecoverable) {
							t.Skipf("waiting for crash recovery in %s/ (issue 14 item 2): %v", name, err)
						}
						if err != nil {
							t.Fatal(err)
						}
						c := res.CrashResult
						t.Logf("rate %v: %.0f ops/s (crash-free %.0f, %.1f%%), %d crashes, %d crashed ops, %d recovered locks",
							rate, res.ThroughputOps, base.ThroughputOps, 100*res.ThroughputOps/base.ThroughputOps,
							c.Crashes, c.CrashedOps, c.RecoveredLocks)
						if c.LostAcknowledged != 0 || c.Verify != "ok" || res.Errors != 0 {
							t.Errorf("rate %v: %d acknowledged writes lost, verify %q, %d errors (%s)",
								rate, c.LostAcknowledged, c.Verify, res.Errors, res.FirstError)
						}
						// A client crash costs its compute node a replacement,
						// not the others a lease (1 s here: 20 times the
						// crash-free run): SMART's load ran at 3.4% of its
						// crash-free throughput when a mover's flag waited one.
						if res.ThroughputOps < base.ThroughputOps/2 {
							t.Errorf("rate %v: %.1f%% of the crash-free throughput, want at least half",
								rate, 100*res.ThroughputOps/base.ThroughputOps)
						}
					}
				})
			}
		}
	}
}
