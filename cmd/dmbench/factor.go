package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot/vg"

	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// factorSteps are the configurations of the paper's Figure 4.14: a naive
// ART on DM (ROWEX-like locked internal nodes, out-of-place leaves, no
// RDWC), then SMART's techniques added one at a time. The rear-embedded
// lock comes in two steps: the release as a second WRITE in the data's
// batch (which saves the third round trip), then the release inside the
// data WRITE (which saves a verb per update). The paper's steps keep its
// 256-slot internal nodes (PaperNodes); the last two steps are this
// project's departures: nodes allocated by size class
// (docs/smart-node-growth.md), then inserts of new keys decided on the
// cache's snapshot of their node (docs/smart-protocol.md), then one
// compaction after the load (Tree.Compact: leaves laid out in key order,
// so that scans read runs of them with one READ).
var factorSteps = []struct {
	name    string
	opts    smart.Options
	compact bool
}{
	{"ART", smart.Options{PaperNodes: true, LockedInternal: true, OutOfPlaceLeaves: true, Release: smart.ReleaseRoundTrip, NoReadDelegation: true, NoWriteCombining: true}, false},
	{"+lock-free internal", smart.Options{PaperNodes: true, OutOfPlaceLeaves: true, Release: smart.ReleaseRoundTrip, NoReadDelegation: true, NoWriteCombining: true}, false},
	{"+in-place leaf", smart.Options{PaperNodes: true, Release: smart.ReleaseRoundTrip, NoReadDelegation: true, NoWriteCombining: true}, false},
	{"+release in the batch", smart.Options{PaperNodes: true, Release: smart.ReleaseSecondWrite, NoReadDelegation: true, NoWriteCombining: true}, false},
	{"+rear-embedded lock", smart.Options{PaperNodes: true, NoReadDelegation: true, NoWriteCombining: true}, false},
	{"+read delegation", smart.Options{PaperNodes: true, NoWriteCombining: true}, false},
	{"+write combining", smart.Options{PaperNodes: true}, false},
	{"+nodes by size class", smart.Options{NoCachedInserts: true}, false},
	{"+inserts on cached snapshots", smart.Options{}, false},
	{"+compaction after the load", smart.Options{}, true},
}

// smartWith returns the Opener of SMART with the given switches (a
// variable so that tests can run the command on an in-memory index).
var smartWith = smartOpener

// factorCmd is "dmbench factor": SMART's techniques one by one on each
// workload, optionally next to Sherman.
func factorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := defaultOptions()
	fs := newFlagSet("factor", "Adds SMART's techniques one by one (the paper's Figure 4.14).")
	wlList := fs.String("workloads", "load,a,b,c", "comma-separated workloads")
	clients := fs.Int("clients", 8, "clients per compute node")
	withSherman := fs.Bool("sherman", true, "also run Sherman as the baseline")
	out := fs.String("out", "", "directory for factor.json, factor.txt and factor.{png,svg} (none if empty)")
	asJSON := fs.Bool("json", false, "print the results as JSON instead of the table")
	o.register(fs)
	o.registerParallel(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	ws, err := workloads("workloads", *wlList)
	if err != nil {
		return badUsage(err)
	}
	var series []string
	for _, s := range factorSteps {
		series = append(series, s.name)
	}
	if *withSherman {
		series = append(series, "sherman")
	}
	var cfgs []ycsb.Config
	for _, w := range ws {
		for i, name := range series {
			index := "sherman"
			if i < len(factorSteps) {
				index = "smart"
			}
			cfg, err := o.config(index, w, *clients)
			if err != nil {
				return badUsage(err)
			}
			if i < len(factorSteps) {
				cfg.Index, cfg.Open = name, smartWith(factorSteps[i].opts)
				cfg.Compact = cfg.Compact || factorSteps[i].compact
			}
			cfgs = append(cfgs, cfg)
		}
	}
	if err := o.checkTotalRuntime(cfgs); err != nil {
		return err
	}
	results, err := runPoints(ctx, cfgs, o.parallel, stderr, func(cfg ycsb.Config) string {
		return cfg.Index + " on " + cfg.Workload.Name
	}, func(ycsb.Config) bool { return true }) // SMART's steps and Sherman
	if err != nil {
		return err
	}

	if *out != "" {
		if err := saveFactor(*out, results, ws, series); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(results)
	} else {
		err = writeFactorTable(stdout, results)
	}
	if err != nil {
		return err
	}
	return failedOps(results)
}

// writeFactorTable prints one row per configuration and workload with the
// throughput gain of each SMART step over the step before.
func writeFactorTable(w io.Writer, results []*ycsb.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tconfiguration\tMops/s\t× previous\tp50 µs\tp99 µs\trtt/op\tbytes/op\terrors\t")
	for i, r := range results {
		gain := "-"
		if prev := i - 1; prev >= 0 && results[prev].Workload == r.Workload && results[prev].ThroughputOps > 0 &&
			strings.HasPrefix(r.Index, "+") {
			gain = fmt.Sprintf("%.2f", r.ThroughputOps/results[prev].ThroughputOps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%s\t%.2f\t%.2f\t%.2f\t%.0f\t%d\t\n", r.Workload, r.Index, r.ThroughputOps/1e6,
			gain, r.P50US, r.P99US, r.RTTPerOp, r.ReadBytesPerOp+r.WriteBytesPerOp, r.Errors)
	}
	return tw.Flush()
}

// saveFactor writes factor.json, factor.txt and factor.{png,svg}
// (throughput and p99 latency per workload, one bar per configuration).
func saveFactor(dir string, results []*ycsb.Result, ws []ycsb.Workload, series []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "factor.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var table strings.Builder
	if err := writeFactorTable(&table, results); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "factor.txt"), []byte(table.String()), 0o644); err != nil {
		return err
	}
	var cats []string
	for _, w := range ws {
		cats = append(cats, strings.ToUpper(w.Name))
	}
	tput := make([][]float64, len(series))
	p99 := make([][]float64, len(series))
	for s := range series {
		tput[s], p99[s] = make([]float64, len(ws)), make([]float64, len(ws))
		for c := range ws {
			r := results[c*len(series)+s]
			tput[s][c], p99[s][c] = r.ThroughputOps/1e6, r.P99US
		}
	}
	pt, err := groupedBars("throughput", "Mops/s", cats, series, tput)
	if err != nil {
		return err
	}
	pl, err := groupedBars("p99 latency", "µs", cats, series, p99)
	if err != nil {
		return err
	}
	width := max(panelW, vg.Points(float64(14*len(cats)*len(series)+80)))
	return save(dir, "factor", 2*width, panelH*1.3, pt, pl)
}
