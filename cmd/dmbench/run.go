package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

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
	loadTrace := fs.String("load-trace", "", "index-microbench load file whose operations load the index before --run-trace's "+
		"(needs --run-trace; to replay both phases of dmbench gen, give its load_… file here and its txn_… file as --run-trace)")
	runTrace := fs.String("run-trace", "", "index-microbench transaction file to replay as the run phase, after --load-trace's "+
		"(without it the index starts empty); the traces decide the records and operations, so "+traceDecidedFlags()+" are refused with it")
	o.register(fs)
	o.registerCrash(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	cfg, err := runConfig(&o, *index, *workload, *clients, *loadTrace, *runTrace)
	if err != nil {
		return badUsage(err)
	}
	if cfg.RunTrace != nil && cfg.LoadTrace == nil {
		fmt.Fprintln(stderr, "dmbench: --run-trace without --load-trace: the index starts empty (Records 0), "+
			"so reads find only the keys the run trace inserts; give the load file as --load-trace to replay both phases")
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

// traceDecided are the flags of dmbench run that the traces replace
// (ycsb.Config.RunTrace): the load trace's operations are the records, the
// run trace's the operations, and no workload is generated, so there is
// no warm-up (ycsb sets none) and no request distribution.
var traceDecided = []string{"records", "ops", "workload", "warmup-ops", "warmup-keys", "zipf"}

// traceDecidedFlags lists traceDecided as flags: "--records, --ops, … and
// --zipf".
func traceDecidedFlags() string {
	flags := make([]string, len(traceDecided))
	for i, name := range traceDecided {
		flags[i] = "--" + name
	}
	return strings.Join(flags[:len(flags)-1], ", ") + " and " + flags[len(flags)-1]
}

// runConfig is the run of dmbench run's flags: index on workload with
// clients clients per compute node, or the traces if runTrace is set, with
// which the flags of traceDecided, if given, are refused.
func runConfig(o *options, index, workload string, clients int, loadTrace, runTrace string) (ycsb.Config, error) {
	if runTrace == "" {
		if loadTrace != "" {
			return ycsb.Config{}, fmt.Errorf("--load-trace needs --run-trace")
		}
		w, err := ycsb.Preset(workload)
		if err != nil {
			return ycsb.Config{}, err
		}
		return o.config(index, w, clients)
	}
	for _, name := range traceDecided {
		if o.isSet(name) {
			return ycsb.Config{}, fmt.Errorf("--%s with --run-trace: the traces decide the records (the --load-trace's operations, "+
				"none without it) and the operations (the --run-trace's), with no workload generated, no warm-up and no Zipfian θ; omit --%s",
				name, name)
		}
	}
	cfg, err := o.unvalidated(index, ycsb.Workload{Name: "trace"}, clients)
	if err != nil {
		return ycsb.Config{}, err
	}
	if cfg.RunTrace, err = readTrace(runTrace, cfg.Keys); err != nil {
		return ycsb.Config{}, fmt.Errorf("--run-trace %w", err)
	}
	if loadTrace != "" {
		if cfg.LoadTrace, err = readTrace(loadTrace, cfg.Keys); err != nil {
			return ycsb.Config{}, fmt.Errorf("--load-trace %w", err)
		}
	}
	// As ycsb will set them; the progress bar counts them (phaseOps).
	cfg.Records, cfg.Ops, cfg.WarmupOps = int64(len(cfg.LoadTrace)), int64(len(cfg.RunTrace)), -1
	return cfg, o.withHint(cfg.Validate())
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
