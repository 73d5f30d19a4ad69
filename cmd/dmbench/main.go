package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	idx "github.com/dmindex/dmindex/index" // index is dmbench's table of indexes
	"github.com/dmindex/dmindex/ycsb"
)

const usage = `dmbench benchmarks range indexes on disaggregated memory with YCSB.

Usage:
  dmbench                  the default comparison: SMART vs Sherman on YCSB A and C, simulated,
                           at a scale where the memory nodes saturate (about a minute)
  dmbench run [flags]      one index, one workload; YCSB text output or --json
  dmbench compare [flags]  indexes × workloads × client counts: table, results.json, plots
  dmbench amplification    bytes moved per byte returned, for reads and writes (Table 4.1)
  dmbench factor [flags]   SMART's techniques added one by one (Figure 4.14)
  dmbench gen [flags]      write a workload as index-microbench trace files

Run "dmbench <command> -h" for the flags of a command.
`

// defaultCompare is what dmbench runs without arguments: a comparison that
// finishes in about a minute on two cores and whose larger client count
// saturates the memory nodes' NICs with SMART (so its ratio is the one the
// system has at that scale), with warm caches (the default warm-up).
var defaultCompare = []string{
	"--indexes", "smart,sherman", "--workloads", "a,c", "--clients", "8,32",
	"--records", "100000", "--ops", "200000", "--cns", "8",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	status := exitStatus(dmbench(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(status)
}

// exitStatus prints err on stderr, unless the flag set printed it already,
// and returns the exit status of the command (doc.go): 0 for success and
// -h, 2 for bad input (badInput), 1 for a run that failed or does not fit.
func exitStatus(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage) && usage.printed:
		return 2
	}
	fmt.Fprintln(stderr, "dmbench:", err)
	if badInput(err) {
		return 2
	}
	return 1
}

// badInput reports whether err is one that changing the flags or input
// files fixes, whatever the machine: an error of the command line
// (usageError), or a run that ycsb or the index refuses, before it starts or
// while it loads (ycsb.ErrInvalid, index.ErrKeyTooLong,
// index.ErrValueTooLarge). A run that does not fit this machine, its
// memory nodes or --max-runtime (ycsb.ErrTooLarge, ycsb.ErrTooLong,
// remote.ErrOutOfMemory) is not bad input, nor is a failed run.
func badInput(err error) bool {
	var usage usageError
	return errors.As(err, &usage) || errors.Is(err, ycsb.ErrInvalid) ||
		errors.Is(err, idx.ErrKeyTooLong) || errors.Is(err, idx.ErrValueTooLarge)
}

// dmbench runs the command line args, writing results to stdout and
// progress and diagnostics to stderr.
func dmbench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "dmbench: no command; running the default comparison, about a minute (\"dmbench help\" for more)")
		return compareCmd(ctx, defaultCompare, stdout, stderr)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCmd(ctx, rest, stdout, stderr)
	case "compare":
		return compareCmd(ctx, rest, stdout, stderr)
	case "amplification":
		return amplificationCmd(ctx, rest, stdout, stderr)
	case "factor":
		return factorCmd(ctx, rest, stdout, stderr)
	case "gen":
		return genCmd(rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if strings.HasPrefix(cmd, "-") {
		return badUsage(fmt.Errorf("flags need a command (the default comparison takes none): %s", flagsHint(args)))
	}
	fmt.Fprint(stderr, usage)
	return badUsage(fmt.Errorf("unknown command %q", cmd))
}

// commandFlags is, for run and compare, the spelling of the flags that the
// other command spells differently, and the flags that only the other
// command has.
var commandFlags = map[string]struct {
	renamed map[string]string
	foreign []string
}{
	"run":     {map[string]string{"indexes": "index", "workloads": "workload"}, []string{"out", "parallel"}},
	"compare": {map[string]string{"index": "indexes", "workload": "workloads"}, []string{"crash-rate", "load-trace", "run-trace"}},
}

// flagsHint is the advice for flags given without a command: args after
// "dmbench run" and "dmbench compare", each with the flags renamed that the
// command spells differently (--index of run is --indexes of compare), and
// neither command if one of the flags belongs only to the other.
func flagsHint(args []string) string {
	var hints []string
	for _, c := range []struct{ cmd, what string }{{"run", "one run"}, {"compare", "a comparison"}} {
		spell := commandFlags[c.cmd]
		out := append([]string{"dmbench", c.cmd}, args...)
		ok := true
		for i, a := range args {
			if !strings.HasPrefix(a, "-") {
				continue
			}
			dashes := "-"
			if strings.HasPrefix(a, "--") {
				dashes = "--"
			}
			name, value, hasValue := strings.Cut(strings.TrimPrefix(a, dashes), "=")
			if slices.Contains(spell.foreign, name) {
				ok = false
				break
			}
			if to, found := spell.renamed[name]; found {
				out[2+i] = dashes + to
				if hasValue {
					out[2+i] += "=" + value
				}
			}
		}
		if ok {
			hints = append(hints, fmt.Sprintf("%q for %s", strings.Join(out, " "), c.what))
		}
	}
	if len(hints) == 0 {
		return `no command takes all of them: see "dmbench run -h" and "dmbench compare -h"`
	}
	return "run " + strings.Join(hints, " or ")
}
