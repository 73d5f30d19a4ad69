package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/dmindex/dmindex/ycsb"
)

// paperRatios are SMART's throughput over Sherman's on YCSB with integer
// keys, as the SMART paper states them for Figure 4.10 (LOAD is 100%
// insert, which is this tool's "load" and "la"). Figure and table numbers
// are those of the paper as Chapter 4 of Jiacheng Shen's thesis (CUHK,
// 2024); docs/results/README.md cites both.
var paperRatios = map[string]float64{"load": 1.6, "la": 1.6, "a": 6.1, "b": 2.4, "c": 2.8, "d": 2.4}

// comparison is the content of results.json.
type comparison struct {
	Command []string       `json:"command"`
	Results []*ycsb.Result `json:"results"`
	Ratios  []ratio        `json:"ratios,omitempty"`
}

// ratio compares the peak throughputs (over client counts) of two indexes
// on one workload.
type ratio struct {
	Workload    string   `json:"workload"`
	Numerator   string   `json:"numerator"`
	Denominator string   `json:"denominator"`
	NumPeakOps  float64  `json:"numerator_peak_ops"`
	DenPeakOps  float64  `json:"denominator_peak_ops"`
	Ratio       float64  `json:"ratio"`
	Paper       *float64 `json:"paper,omitempty"` // SMART/Sherman in the paper (int keys)
}

// compareCmd is "dmbench compare": every index on every workload at every
// client count, in one process, with one table, results.json and plots.
func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := defaultOptions()
	fs := newFlagSet("compare", "Runs every index on every workload at every client count and compares them.")
	idxList := fs.String("indexes", "smart,sherman", "comma-separated indexes ("+indexNames(" and ")+"); ratios are the first over the others")
	wlList := fs.String("workloads", "load,a,b,c,d", "comma-separated workloads (load, a–f, la, N-)")
	clList := fs.String("clients", "1,4,16", "comma-separated clients per compute node: one point of each curve per count")
	out := fs.String("out", "", "directory for results.json, table.txt and the PNG and SVG plots (none if empty)")
	asJSON := fs.Bool("json", false, "print results.json to stdout instead of the table")
	o.register(fs)
	o.registerParallel(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	idx, err := names("indexes", *idxList)
	if err != nil {
		return badUsage(err)
	}
	ws, err := workloads("workloads", *wlList)
	if err != nil {
		return badUsage(err)
	}
	clients, err := counts("clients", *clList)
	if err != nil {
		return badUsage(err)
	}
	var cfgs []ycsb.Config
	for _, w := range ws {
		for _, name := range idx {
			for _, k := range clients {
				cfg, err := o.config(name, w, k)
				if err != nil {
					return badUsage(err)
				}
				cfgs = append(cfgs, cfg)
			}
		}
	}
	if err := o.checkTotalRuntime(cfgs); err != nil {
		return err
	}
	cmp := comparison{Command: append([]string{"dmbench", "compare"}, args...)}
	cmp.Results, err = runPoints(ctx, cfgs, o.parallel, stderr, func(cfg ycsb.Config) string {
		return fmt.Sprintf("%s on %s with %d clients per CN", cfg.Index, cfg.Workload.Name, cfg.ClientsPerCN)
	}, func(cfg ycsb.Config) bool { return indexes[cfg.Index].inPool })
	if err != nil {
		return err
	}
	cmp.Ratios = peakRatios(cmp.Results, idx, ws, o.keys == "int")

	if *out != "" {
		if err := cmp.save(*out, idx, ws); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(cmp)
	} else {
		o.describeSetup(stdout, ws, clients, true)
		if err = cmp.writeTable(stdout); err == nil {
			note := ""
			if hasPaper(cmp.Ratios) {
				note = o.paperRatiosNote()
			}
			legend(stdout, compareColumns, note)
		}
	}
	if err != nil {
		return err
	}
	return failedOps(cmp.Results)
}

// failedOps returns an error naming the runs whose operations failed and
// the first failure, or nil: the results are printed either way, but a
// command whose runs had errors exits non-zero, as "dmbench run" does.
func failedOps(results []*ycsb.Result) error {
	var first *ycsb.Result
	failed := 0
	for _, r := range results {
		if r.Errors > 0 {
			failed++
			if first == nil {
				first = r
			}
		}
	}
	if first == nil {
		return nil
	}
	return fmt.Errorf("operations failed in %d of %d runs; first: %s on %s with %d×%d clients: %d of %d operations failed, the first with: %s",
		failed, len(results), first.Index, first.Workload, first.CNs, first.Clients, first.Errors, first.Ops, first.FirstError)
}

// peakRatios compares the first index with each other one on every
// workload, by peak throughput over the client counts.
func peakRatios(results []*ycsb.Result, idx []string, ws []ycsb.Workload, intKeys bool) []ratio {
	var out []ratio
	for _, w := range ws {
		for _, other := range idx[1:] {
			r := ratio{Workload: w.Name, Numerator: idx[0], Denominator: other,
				NumPeakOps: peak(results, idx[0], w.Name), DenPeakOps: peak(results, other, w.Name)}
			if r.DenPeakOps > 0 {
				r.Ratio = r.NumPeakOps / r.DenPeakOps
			}
			if p, ok := paperRatios[w.Name]; ok && intKeys && idx[0] == "smart" && other == "sherman" {
				r.Paper = &p
			}
			out = append(out, r)
		}
	}
	return out
}

func peak(results []*ycsb.Result, index, workload string) float64 {
	var best float64
	for _, r := range results {
		if r.Index == index && r.Workload == workload {
			best = max(best, r.ThroughputOps)
		}
	}
	return best
}

// writeTable prints one row per run, then the ratios.
func (c *comparison) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tindex\tclients\tMops/s\tp50 µs\tp99 µs\trtt/op\tverbs/op\tread B/op\twrite B/op\tcache hit\tMN iops\tMN bw\terrors\t")
	for _, r := range c.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d×%d\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.0f\t%s\t%s\t%s\t%d\t\n",
			r.Workload, r.Index, r.CNs, r.Clients, r.ThroughputOps/1e6, r.P50US, r.P99US,
			r.RTTPerOp, r.VerbsPerOp, r.ReadBytesPerOp, r.WriteBytesPerOp, optional(r.CacheHitRatio),
			percent(r.MNIOPSUtil), percent(r.MNBWUtil), r.Errors)
	}
	if len(c.Ratios) > 0 {
		fmt.Fprintln(tw) // an empty line ends the column blocks
		fmt.Fprintln(tw, "workload\tratio\tpeak Mops/s\tover\tpaper\t")
		for _, r := range c.Ratios {
			paper := "-"
			if r.Paper != nil {
				paper = fmt.Sprintf("%.1f×", *r.Paper)
			}
			fmt.Fprintf(tw, "%s\t%s/%s\t%.3f\t%.3f\t%.2f×\t%s\t\n", r.Workload, r.Numerator, r.Denominator,
				r.NumPeakOps/1e6, r.DenPeakOps/1e6, r.Ratio, paper)
		}
	}
	return tw.Flush()
}

// hasPaper reports whether a ratio is shown next to the paper's.
func hasPaper(rs []ratio) bool {
	for _, r := range rs {
		if r.Paper != nil {
			return true
		}
	}
	return false
}

func optional(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *v)
}

// percent prints a utilisation (the busiest memory node NIC's share of
// its limit) as a percentage.
func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100**v)
}

// save writes results.json, table.txt and the plots into dir.
func (c *comparison) save(dir string, idx []string, ws []ycsb.Workload) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "table.txt"))
	if err != nil {
		return err
	}
	if err := c.writeTable(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := plotCurves(dir, c.Results, idx, ws); err != nil {
		return err
	}
	if len(c.Ratios) > 0 {
		return plotRatios(dir, c.Ratios)
	}
	return nil
}
