package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/dmindex/dmindex/ycsb"
)

// runCmd is "dmbench run": one index, one workload, one client count.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := defaultOptions()
	fs := newFlagSet("run", "Runs one workload against one index and prints YCSB's text format or --json.")
	index := fs.String("index", "smart", "index: "+indexNames(" or "))
	workload := fs.String("workload", "a", "workload: load, a, b, c, d, e, f, la, or N- (N% insert, the rest reads)")
	clients := fs.Int("clients", 8, "clients per compute node")
	asJSON := fs.Bool("json", false, "print one JSON object instead of YCSB's text format")
	loadTrace := fs.String("load-trace", "", "index-microbench load file to replay instead of generating records (needs --run-trace)")
	runTrace := fs.String("run-trace", "", "index-microbench transaction file to replay instead of --workload")
	o.register(fs)
	o.registerCrash(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	cfg, err := runConfig(&o, *index, *workload, *clients, *loadTrace, *runTrace)
	if err != nil {
		return badUsage(err)
	}
	bar := newProgress(stderr, phaseOps(cfg))
	bar.track(&cfg, fmt.Sprintf("%s %s", cfg.Index, cfg.Workload.Name))
	res, err := ycsb.Run(ctx, cfg)
	bar.finish()
	if err != nil {
		return o.withHint(err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d operations failed; first: %s", res.Errors, res.Ops, res.FirstError)
	}
	if c := res.CrashResult; c != nil && (c.LostAcknowledged > 0 || c.Verify != "ok") {
		return fmt.Errorf("after %d crashes, %d keys lost an acknowledged write; verify: %s", c.Crashes, c.LostAcknowledged, c.Verify)
	}
	return nil
}

// runConfig is the run of dmbench run's flags: index on workload with
// clients clients per compute node, or the traces if runTrace is set.
func runConfig(o *options, index, workload string, clients int, loadTrace, runTrace string) (ycsb.Config, error) {
	w, err := ycsb.Preset(workload)
	if err != nil {
		return ycsb.Config{}, err
	}
	cfg, err := o.config(index, w, clients)
	if err != nil {
		return ycsb.Config{}, err
	}
	if runTrace == "" {
		if loadTrace != "" {
			return ycsb.Config{}, fmt.Errorf("--load-trace needs --run-trace")
		}
		return cfg, nil
	}
	if cfg.RunTrace, err = readTrace(runTrace, cfg.Keys); err != nil {
		return ycsb.Config{}, fmt.Errorf("--run-trace %w", err)
	}
	cfg.Workload.Name = "trace"
	if loadTrace != "" {
		if cfg.LoadTrace, err = readTrace(loadTrace, cfg.Keys); err != nil {
			return ycsb.Config{}, fmt.Errorf("--load-trace %w", err)
		}
	}
	return cfg, nil
}

// readTrace reads the trace file path; an error names the file.
func readTrace(path string, keys ycsb.KeyType) ([]ycsb.Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ops, err := ycsb.ReadTrace(f, keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}
