package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// reject runs dmbench with a cancelled context (so that a run the checks
// let through by mistake stops at once) and returns its error.
func reject(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	return dmbench(ctx, args, &out, &errOut)
}

// Inputs that cannot fit fail before anything is allocated, naming the
// estimate and the limit (issue 10, item 1).
func TestRejectsRunsThatDoNotFit(t *testing.T) {
	defer func(saved int64) { memoryLimit = saved }(memoryLimit)
	memoryLimit = 16 << 30 // the machine of these tests
	for _, c := range []struct {
		args   []string
		want   error
		phrase string
	}{
		{[]string{"run", "--mn-mb", "100000000"}, ycsb.ErrTooLarge, "memory nodes of 2 × 95.4 TiB = 190.7 TiB exceed the 16.0 GiB of physical memory"},
		{[]string{"run", "--mn-mb", "1e15"}, nil, `invalid value "1e15" for flag -mn-mb`},
		{[]string{"run", "--mn-mb", "9000000000000"}, nil, "--mn-mb 9000000000000: want 0 (enough for the run) up to"},
		{[]string{"run", "--value-size", "1099511627776", "--records", "10", "--ops", "10"}, smart.ErrValueTooLarge, "smart stores at most 65536"},
		{[]string{"run", "--index", "sherman", "--value-size", "5000"}, smart.ErrValueTooLarge, "sherman stores at most 4096"},
		{[]string{"run", "--index", "mem", "--value-size", "1099511627776"}, ycsb.ErrTooLarge, "32 clients × 4.0 TiB"},
		{[]string{"run", "--records", "10000000000"}, ycsb.ErrTooLarge, "977.9 GiB of records on the memory nodes for 10000000000 records"},
		{[]string{"run", "--cns", "1000", "--clients", "1000"}, ycsb.ErrTooLarge, "1000000 clients × 36.1 KiB), more than the 16.0 GiB"},
		{[]string{"run", "--index", "sherman", "--cns", "1000", "--clients", "1000"}, ycsb.ErrTooLarge, "1000 compute nodes × "},
		{[]string{"run", "--warmup-ops", "-2"}, nil, "--warmup-ops -2: want -1 (none), 0 (the default) or a count"},
		{[]string{"run", "--ops", "100000000000"}, ycsb.ErrTooLong, "more than the limit of 24h0m0s; lower --records or --ops, or raise --max-runtime"},
		// The estimate is never printed below the limit (it was rounded to
		// minutes: "at least 0s").
		{[]string{"run", "--records", "100000", "--ops", "100000", "--max-runtime", "1ms"}, ycsb.ErrTooLong,
			"its 600000 operations take at least 600ms at 1000000 operations/s, more than the limit of 1ms"},
		{[]string{"compare", "--indexes", "mem,mem2", "--workloads", "a,c", "--clients", "1", "--records", "100000", "--ops", "100000",
			"--max-runtime", "1s"}, ycsb.ErrTooLong, "the 4 runs take at least 2.4s together, more than --max-runtime 1s"},
		{[]string{"compare", "--workloads", "a,c", "--ops", "20000000000"}, ycsb.ErrTooLong, "the 12 runs take at least"},
		{[]string{"factor", "--ops", "10000000000"}, ycsb.ErrTooLong, "the 44 runs take at least"},
		{[]string{"amplification", "--ops", "30000000000"}, ycsb.ErrTooLong, "the 4 runs take at least"},
		{[]string{"run", "--index", "mem", "--mn-mb", "32", "--records", "100000000"}, remote.ErrOutOfMemory, "raise --mn-mb"},
		// The memory of memnode servers is their --bytes, and earlier runs'
		// indexes stay on them: --mn-mb cannot raise it.
		{[]string{"run", "--index", "mem", "--mode", "tcp", "--memnodes", "127.0.0.1:1", "--mn-mb", "32", "--records", "100000000"},
			remote.ErrOutOfMemory, "more than their 1 × 32.0 MiB; the memory nodes are the memnode servers' (their --bytes), " +
				"which keep the index of every earlier run until they restart: restart them with a larger --bytes"},
		{[]string{"run", "--index", "mem", "--mode", "shm", "--shm-dir", "/nonexistent", "--mns", "1", "--mn-mb", "32", "--records", "100000000"},
			remote.ErrOutOfMemory, "the memory nodes are the files of --shm-dir"},
	} {
		err := reject(t, c.args...)
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("dmbench %s: %v, want %v naming %q", strings.Join(c.args, " "), err, c.want, c.phrase)
		}
	}
}

// Flags that used to be accepted silently (issue 10, item 4).
func TestRejectsBadFlags(t *testing.T) {
	blankTrace := filepath.Join(t.TempDir(), "blank")
	if err := os.WriteFile(blankTrace, []byte("\n  \n\t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		phrase string
	}{
		{[]string{"run", "--cache-mb", "-1"}, "--cache-mb -1: want 0 (no cache) up to"},
		{[]string{"run", "--cache-mb", "NaN"}, "--cache-mb NaN"},
		{[]string{"run", "--ordering", "strict", "--mode", "local"}, "--ordering strict applies to --mode sim only"},
		// Flags that other modes dropped silently.
		{[]string{"run", "--ordering", "strict", "--mode", "shm", "--shm-dir", "/nonexistent"}, "--ordering strict applies to --mode sim only: shm mode"},
		{[]string{"run", "--ordering", "strict", "--mode", "tcp", "--memnodes", "127.0.0.1:1"}, "--ordering strict applies to --mode sim only: tcp mode"},
		{[]string{"run", "--mns", "3", "--mode", "tcp", "--memnodes", "127.0.0.1:1"}, "--mns 3, but --memnodes lists 1 memory nodes"},
		{[]string{"compare", "--mns", "1", "--mode", "fabric", "--memnodes", "127.0.0.1:1,127.0.0.1:2"}, "--mns 1, but --memnodes lists 2 memory nodes"},
		{[]string{"compare", "--indexes", "smart,smart"}, `--indexes lists "smart" twice`},
		{[]string{"compare", "--indexes", ""}, "--indexes is empty"},
		// Every list flag refuses an empty element (--indexes and
		// --workloads skipped it, --memnodes dialled it), through list.
		{[]string{"compare", "--indexes", " , "}, `--indexes " , " has an empty element`},
		{[]string{"compare", "--indexes", "smart,,sherman"}, `--indexes "smart,,sherman" has an empty element`},
		{[]string{"compare", "--clients", "4,,8"}, `--clients "4,,8" has an empty element`},
		{[]string{"compare", "--workloads", "a,,c"}, `--workloads "a,,c" has an empty element`},
		{[]string{"amplification", "--indexes", "mem,"}, `--indexes "mem," has an empty element`},
		{[]string{"factor", "--workloads", ",c"}, `--workloads ",c" has an empty element`},
		{[]string{"run", "--mode", "tcp", "--memnodes", "127.0.0.1:1,,127.0.0.1:2"}, `--memnodes "127.0.0.1:1,,127.0.0.1:2" has an empty element`},
		{[]string{"run", "--mode", "fabric", "--memnodes", "127.0.0.1:1,127.0.0.1:1"}, `--memnodes lists "127.0.0.1:1" twice`},
		{[]string{"compare", "--workloads", "a,A"}, `--workloads lists "A" twice`},
		{[]string{"compare", "--workloads", "a,g"}, `--workloads: ycsb: unknown workload "g"`},
		{[]string{"compare", "--clients", "4,x"}, `--clients: "x" is not a positive integer`},
		// --parallel below 1 ran as 1.
		{[]string{"compare", "--parallel", "0"}, "--parallel 0: want at least 1"},
		{[]string{"compare", "--parallel", "-1"}, "--parallel -1: want at least 1"},
		{[]string{"factor", "--parallel", "0"}, "--parallel 0: want at least 1"},
		{[]string{"factor", "--parallel", "-1"}, "--parallel -1: want at least 1"},
		{[]string{"compare", "--workloads", "a,c,a"}, `--workloads lists "a" twice`},
		{[]string{"compare", "--clients", "4,16,4"}, `--clients lists "4" twice`},
		{[]string{"amplification", "--indexes", "mem,mem"}, `--indexes lists "mem" twice`},
		{[]string{"factor", "--workloads", "c,c"}, `--workloads lists "c" twice`},
		{[]string{"run", "--zipf", "5"}, "--zipf 5: want 0 < θ < 1"},
		{[]string{"run", "--zipf", "1"}, "--zipf 1: want 0 < θ < 1"},
		{[]string{"run", "--zipf", "0"}, "--zipf 0: want 0 < θ < 1"},
		{[]string{"compare", "--zipf", "-0.5"}, "--zipf -0.5: want 0 < θ < 1"},
		{[]string{"gen", "--zipf", "5"}, "--zipf 5: want 0 < θ < 1"},
		{[]string{"run", "--max-runtime", "-1s"}, "--max-runtime must not be negative"},
		// The memory-node limits of the index, before anything is allocated.
		{[]string{"run", "--mns", "257"}, "257 memory nodes, smart addresses at most 256"},
		{[]string{"run", "--index", "smart-paper", "--mns", "300"}, "300 memory nodes, smart-paper addresses at most 256"},
		{[]string{"run", "--index", "sherman", "--mns", "65537"}, "65537 memory nodes, more than a pool addresses (65536)"},
		{[]string{"--ops", "5"}, `run "dmbench run --ops 5" for one run or "dmbench compare --ops 5" for a comparison`},
		{[]string{"--indexes", "smart", "--clients", "4"}, `"dmbench compare --indexes smart --clients 4"`},
		// Empty traces name their file (an empty run trace ran YCSB-A).
		{[]string{"run", "--run-trace", "/dev/null"}, "--run-trace /dev/null: ycsb: the trace has no operations"},
		{[]string{"run", "--run-trace", blankTrace, "--load-trace", blankTrace}, "--run-trace " + blankTrace + ": ycsb: the trace has no operations"},
	} {
		err := reject(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("dmbench %s: %v, want an error naming %q", strings.Join(c.args, " "), err, c.phrase)
		}
	}
}

// A flag error is printed once, by the flag set with the usage text; main
// only sets the exit status (issue 10, item 3).
func TestFlagErrorsPrintedOnce(t *testing.T) {
	for _, args := range [][]string{{"run", "--nosuchflag"}, {"compare", "--records", "x"}, {"gen", "-zipf"}} {
		var out, errOut bytes.Buffer
		err := dmbench(context.Background(), args, &out, &errOut)
		var usage usageError
		if !errors.As(err, &usage) {
			t.Errorf("dmbench %v: %v, want a usageError", args, err)
			continue
		}
		if n := strings.Count(errOut.String(), err.Error()); n != 1 {
			t.Errorf("dmbench %v printed %q %d times:\n%s", args, err, n, errOut.String())
		}
		if !strings.Contains(errOut.String(), "usage: dmbench "+args[0]) {
			t.Errorf("dmbench %v: no usage text:\n%s", args, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := dmbench(context.Background(), []string{"run", "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("dmbench run -h: %v, want flag.ErrHelp", err)
	}
}

// An error of the command line exits with status 2, printed once; a run
// that fails or does not fit exits with 1; -h with 0.
func TestExitStatus(t *testing.T) {
	longKey := filepath.Join(t.TempDir(), "longk.txt")
	if err := os.WriteFile(longKey, []byte("INSERT "+strings.Repeat("k", 300)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "-h"}, 0},
		{[]string{"compare", "--help"}, 0},
		{[]string{"help"}, 0},
		{[]string{"-h"}, 0},
		{[]string{"run", "--nosuchflag"}, 2},
		{[]string{"run", "--records", "x"}, 2},
		{[]string{"run", "--records", "-5"}, 2},
		{[]string{"run", "--clients", "0"}, 2},
		{[]string{"run", "--value-size", "0"}, 2},
		{[]string{"run", "--workload", "g"}, 2},
		{[]string{"run", "--index", "foo"}, 2},
		{[]string{"run", "--zipf", "1.5"}, 2},
		{[]string{"run", "--keys", "string"}, 2},
		{[]string{"run", "--mode", "rdma"}, 2},
		{[]string{"run", "--mns", "257"}, 2},
		{[]string{"run", "--index", "sherman", "--value-size", "5000"}, 2},
		{[]string{"run", "--value-size", "65537"}, 2},
		// Refused by ycsb.Run (a trace key longer than the index stores)
		// or by Validate only after its options were checked (a workload
		// that reads, without records): they exited with 1.
		{[]string{"run", "--run-trace", longKey, "--keys", "email"}, 2},
		{[]string{"run", "--index", "sherman", "--run-trace", longKey, "--load-trace", longKey, "--keys", "email"}, 2},
		{[]string{"run", "--records", "0"}, 2},
		{[]string{"compare", "--records", "0", "--workloads", "c"}, 2},
		{[]string{"gen", "--records", "0", "--workload", "e"}, 2},
		{[]string{"run", "--load-trace", "x"}, 2},
		{[]string{"run", "--run-trace", "/nonexistent/trace"}, 2},
		{[]string{"run", "--run-trace", "/dev/null"}, 2},
		{[]string{"run", "extra"}, 2},
		{[]string{"compare", "--clients", "1,1"}, 2},
		{[]string{"compare", "--clients", "4,,8"}, 2},
		{[]string{"compare", "--indexes", "smart,,sherman"}, 2},
		{[]string{"compare", "--parallel", "0"}, 2},
		{[]string{"factor", "--parallel", "-1"}, 2},
		{[]string{"run", "--run-trace", "/dev/null", "--records", "10"}, 2},
		{[]string{"compare", "--indexes", "smart,foo"}, 2},
		{[]string{"factor", "--workloads", "c,c"}, 2},
		{[]string{"amplification", "--indexes", "mem,mem"}, 2},
		{[]string{"gen", "--workload", "g"}, 2},
		{[]string{"gen", "--zipf", "5"}, 2},
		{[]string{"bogus"}, 2},
		{[]string{"--records", "10"}, 2},
		{[]string{"run", "--ops", "100000000000"}, 1},
		{[]string{"run", "--records", "100000", "--ops", "100000", "--max-runtime", "1ms"}, 1},
		{[]string{"run", "--records", "10000000000"}, 1},
		{[]string{"run", "--index", "mem", "--mn-mb", "32", "--records", "100000000"}, 1},
		{[]string{"compare", "--workloads", "a,c", "--ops", "20000000000"}, 1},
	} {
		var stderr bytes.Buffer
		err := reject(t, c.args...)
		if got := exitStatus(err, &stderr); got != c.want {
			t.Errorf("dmbench %s: exit status %d (%v), want %d", strings.Join(c.args, " "), got, err, c.want)
		}
		if c.want != 0 && !strings.Contains(stderr.String(), err.Error()) {
			var usage usageError
			if !errors.As(err, &usage) || !usage.printed {
				t.Errorf("dmbench %s: the error is not printed: %q", strings.Join(c.args, " "), stderr.String())
			}
		}
	}
	// A run whose operations failed (not cancelled).
	_, err := exec(t, append([]string{"run", "--index", "failing", "--workload", "c"}, small...)...)
	if got := exitStatus(err, new(bytes.Buffer)); got != 1 {
		t.Errorf("a run whose operations failed: exit status %d (%v), want 1", got, err)
	}
	if got := exitStatus(nil, new(bytes.Buffer)); got != 0 {
		t.Errorf("success: exit status %d", got)
	}
}

// Flags without a command fail with status 2 and suggest the commands that
// take them, spelled as each command spells them: every suggested command
// parses (dmbench --index smart-paper suggested compare --index, which
// compare does not have).
func TestFlagsHint(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--index", "smart-paper"}, []string{"run --index smart-paper", "compare --indexes smart-paper"}},
		{[]string{"-index=smart", "--workload", "e", "--compact"}, []string{"run -index=smart --workload e --compact", "compare -indexes=smart --workloads e --compact"}},
		{[]string{"--indexes", "sherman", "--records", "1000"}, []string{"run --index sherman --records 1000", "compare --indexes sherman --records 1000"}},
		{[]string{"--run-trace", "x", "--index", "sherman"}, []string{"run --run-trace x --index sherman"}},
		{[]string{"--out", "dir", "--warmup-ops", "-1"}, []string{"compare --out dir --warmup-ops -1"}},
		{[]string{"--out", "dir", "--run-trace", "x"}, nil},
	} {
		err := reject(t, c.args...)
		if got := exitStatus(err, new(bytes.Buffer)); got != 2 {
			t.Errorf("dmbench %s: exit status %d (%v), want 2", strings.Join(c.args, " "), got, err)
			continue
		}
		msg := err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, `"dmbench `+w+`"`) {
				t.Errorf("dmbench %s: %q does not suggest dmbench %s", strings.Join(c.args, " "), msg, w)
			}
			if err := reject(t, append(strings.Fields(w), "-h")...); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("dmbench %s: the suggested dmbench %s does not parse: %v", strings.Join(c.args, " "), w, err)
			}
		}
		if strings.Count(msg, `" for `) != len(c.want) {
			t.Errorf("dmbench %s: %q suggests other commands than %q", strings.Join(c.args, " "), msg, c.want)
		}
	}
}

// TestCommandFlags: commandFlags, which flagsHint reads, matches the flags
// that run and compare define (read from their -h output): each flag of
// one command is the other's, renamed to one of the other's, or listed as
// foreign to the other; and every entry names flags that exist. A flag
// added to one command alone fails it until the table lists it.
func TestCommandFlags(t *testing.T) {
	flagsOf := func(cmd string) map[string]bool {
		var out, errOut bytes.Buffer
		if err := dmbench(context.Background(), []string{cmd, "-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("dmbench %s -h: %v", cmd, err)
		}
		names := map[string]bool{}
		for line := range strings.Lines(errOut.String() + out.String()) {
			if rest, ok := strings.CutPrefix(line, "  -"); ok {
				names[strings.Fields(rest)[0]] = true
			}
		}
		if len(names) == 0 {
			t.Fatalf("dmbench %s -h lists no flag", cmd)
		}
		return names
	}
	flags := map[string]map[string]bool{"run": flagsOf("run"), "compare": flagsOf("compare")}
	for cmd, other := range map[string]string{"run": "compare", "compare": "run"} {
		spell := commandFlags[cmd]
		for f := range flags[other] {
			to, renamed := spell.renamed[f]
			switch {
			case renamed && !flags[cmd][to]:
				t.Errorf("commandFlags[%q] renames --%s to --%s, which %s does not have", cmd, f, to, cmd)
			case !renamed && !flags[cmd][f] && !slices.Contains(spell.foreign, f):
				t.Errorf("--%s of %s: %s has no such flag, and commandFlags[%q] neither renames it nor lists it as foreign", f, other, cmd, cmd)
			}
		}
		for f := range spell.renamed {
			if !flags[other][f] {
				t.Errorf("commandFlags[%q] renames --%s, which %s does not have", cmd, f, other)
			}
		}
		for _, f := range spell.foreign {
			if !flags[other][f] || flags[cmd][f] {
				t.Errorf("commandFlags[%q] lists --%s as foreign: %s has it: %v, %s has it: %v", cmd, f, other, flags[other][f], cmd, flags[cmd][f])
			}
		}
	}
}
