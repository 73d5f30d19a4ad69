package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/dmindex/dmindex/ycsb"
)

// runPoints runs the independent runs cfgs, at most parallel (at least 1,
// as options.check requires of --parallel) at once in the simulator (its
// figures are virtual time and deterministic, so they are the same
// whatever runs beside them) and one at a time in the real-time modes
// (which measure wall time: runs side by side would slow each other).
// Runs of indexes whose whole state is in the pool (inPool) with the same
// load phase (ycsb.Config.LoadKey) share one: it is loaded once
// (ycsb.Load) and each of them starts from it, which gives the results
// they give alone; at most parallel loaded indexes are held at once.
// Results come back in the order of cfgs; the first failing run's error,
// labelled by label, is returned.
func runPoints(ctx context.Context, cfgs []ycsb.Config, parallel int, stderr io.Writer, label func(ycsb.Config) string, inPool func(ycsb.Config) bool) ([]*ycsb.Result, error) {
	if len(cfgs) > 0 && cfgs[0].Mode != ycsb.ModeSim {
		parallel = 1
	}
	groups := loadGroups(cfgs, inPool)
	var total int64
	for _, g := range groups {
		for n, i := range g {
			total += phaseOps(cfgs[i])
			if n > 0 {
				total -= cfgs[i].Records // loaded once
			}
		}
	}
	for i := range cfgs {
		// Each run was checked against the machine when it was configured
		// (ycsb.Config.Validate); checked again when it starts, it would
		// count the memory of the runs beside it as unavailable and fail.
		cfgs[i].MemoryLimit = -1
	}
	bar := newProgress(stderr, total)
	defer bar.finish()
	results := make([]*ycsb.Result, len(cfgs))
	errs := make([]error, len(cfgs))
	var mu sync.Mutex
	report := func(i int) { // a failure at once: a long comparison may run on for an hour
		if errs[i] != nil {
			mu.Lock()
			fmt.Fprintf(stderr, "dmbench: %s: %v\n", label(cfgs[i]), errs[i])
			mu.Unlock()
		}
	}
	runs := make(chan struct{}, parallel)  // runs and loads executing
	loads := make(chan struct{}, parallel) // loaded indexes held
	var wg sync.WaitGroup
	for _, g := range groups {
		for _, i := range g {
			bar.track(&cfgs[i], label(cfgs[i]))
		}
		if len(g) == 1 {
			i := g[0]
			runs <- struct{}{}
			wg.Go(func() {
				defer func() { <-runs }()
				results[i], errs[i] = ycsb.Run(ctx, cfgs[i])
				report(i)
			})
			continue
		}
		loads <- struct{}{}
		runs <- struct{}{}
		wg.Go(func() {
			defer func() { <-loads }()
			loaded, err := ycsb.Load(ctx, cfgs[g[0]])
			<-runs
			if err != nil {
				for _, i := range g {
					errs[i] = fmt.Errorf("loading: %w", err)
					report(i)
				}
				return
			}
			var gw sync.WaitGroup
			for _, i := range g {
				runs <- struct{}{}
				gw.Go(func() {
					defer func() { <-runs }()
					cfg := cfgs[i]
					cfg.From = loaded
					results[i], errs[i] = ycsb.Run(ctx, cfg)
					report(i)
				})
			}
			gw.Wait()
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

// loadGroups splits the indexes of cfgs into groups that share a load
// phase, in the order of their first member; a run that cannot share one
// is a group of its own.
func loadGroups(cfgs []ycsb.Config, inPool func(ycsb.Config) bool) [][]int {
	var groups [][]int
	at := map[ycsb.LoadKey]int{}
	for i, cfg := range cfgs {
		key, ok := cfg.LoadKey()
		if !ok || !inPool(cfg) {
			groups = append(groups, []int{i})
			continue
		}
		if g, seen := at[key]; seen {
			groups[g] = append(groups[g], i)
			continue
		}
		at[key] = len(groups)
		groups = append(groups, []int{i})
	}
	return groups
}
