package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/dmindex/dmindex/ycsb"
)

// runPoints runs the independent runs cfgs, at most parallel at once in the
// simulator (its figures are virtual time and deterministic, so they are
// the same whatever runs beside them) and one at a time in the real-time
// modes (which measure wall time: runs side by side would slow each other).
// Results come back in the order of cfgs; the first failing run's error,
// labelled by label, is returned.
func runPoints(ctx context.Context, cfgs []ycsb.Config, parallel int, stderr io.Writer, label func(ycsb.Config) string) ([]*ycsb.Result, error) {
	var total int64
	for _, cfg := range cfgs {
		total += phaseOps(cfg)
	}
	if parallel < 1 || len(cfgs) > 0 && cfgs[0].Mode != ycsb.ModeSim {
		parallel = 1
	}
	bar := newProgress(stderr, total)
	defer bar.finish()
	results := make([]*ycsb.Result, len(cfgs))
	errs := make([]error, len(cfgs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		bar.track(&cfg, label(cfg))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i], errs[i] = ycsb.Run(ctx, cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label(cfgs[i]), err)
		}
	}
	return results, nil
}

// parallelFlag is the default of --parallel: one run per core.
func parallelFlag() int { return runtime.GOMAXPROCS(0) }
