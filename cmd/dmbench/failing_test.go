package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

func init() {
	indexes["failing"] = index{open: failing}
}

var errInjected = errors.New("injected failure")

// failing returns an Opener of in-memory indexes whose Gets fail for keys
// with an odd first byte.
func failing() ycsb.Opener {
	open := ycsbtest.NewOpener()
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
		ix, err := open(cn, cfg)
		return failingIndex{ix}, err
	}
}

type failingIndex struct{ smart.Index }

func (f failingIndex) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if key[0]&1 == 1 {
		return nil, false, errInjected
	}
	return f.Index.Get(ctx, key)
}

// compare and factor print their results and exit non-zero, naming the
// first failure, when operations failed, as run does (issue 10, item 3).
// Binary keys are printed in hex.
func TestFailedOperationsFailTheCommand(t *testing.T) {
	out, err := exec(t, append([]string{"compare", "--indexes", "mem,failing", "--workloads", "c", "--clients", "1"}, small[:6]...)...)
	for _, want := range []string{"operations failed in 1 of 2 runs; first: failing on c with 2×1 clients",
		"the first with: READ 0x", errInjected.Error()} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("compare with a failing index: %v, want an error naming %q", err, want)
		}
	}
	if !strings.Contains(out, "mem/failing") {
		t.Errorf("compare printed no table:\n%s", out)
	}

	smartWith = func(smart.Options) ycsb.Opener { return failing() }
	defer func() { smartWith = smartOpener }()
	saved := indexes["sherman"]
	indexes["sherman"] = index{open: ycsbtest.NewOpener}
	defer func() { indexes["sherman"] = saved }()
	out, err = exec(t, append([]string{"factor", "--workloads", "c"}, small...)...)
	if err == nil || !strings.Contains(err.Error(), "operations failed in 10 of 11 runs; first: ART on c") {
		t.Errorf("factor with failing SMART steps: %v", err)
	}
	if !strings.Contains(out, "+compaction after the load") {
		t.Errorf("factor printed no table:\n%s", out)
	}
	if _, err := exec(t, "amplification", "--indexes", "failing", "--records", "300", "--ops", "200"); err == nil ||
		!strings.Contains(err.Error(), errInjected.Error()) {
		t.Errorf("amplification with a failing index: %v", err)
	}
	if _, err := exec(t, runArgs("--workload", "c")...); err != nil {
		t.Errorf("run of the mem index: %v", err)
	}
	if _, err := exec(t, append([]string{"run", "--index", "failing", "--workload", "c"}, small...)...); err == nil ||
		!strings.Contains(err.Error(), "operations failed; first: READ 0x") {
		t.Errorf("run of a failing index: %v", err)
	}
}
