package ycsb_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// trees opens the module's two trees for the runner's tests.
var trees = map[string]ycsb.Opener{
	"smart": func(cn *remote.ComputeNode, ic ycsb.IndexConfig) (index.Index, error) {
		return smart.Open(cn, smart.Options{Name: ic.Name, CacheBytes: ic.CacheBytes})
	},
	"sherman": func(cn *remote.ComputeNode, ic ycsb.IndexConfig) (index.Index, error) {
		return sherman.Open(cn, sherman.Options{Name: ic.Name, KeySize: ic.KeySize, ValueSize: ic.ValueSize, CacheBytes: ic.CacheBytes})
	},
}

// TestLoadedGivesTheSameResult checks the contract of Config.From: runs of
// several workloads started from one Loaded, concurrently and again
// afterwards, give byte for byte the Results of the same runs loading
// their own index, for both trees, InOrder and Strict.
func TestLoadedGivesTheSameResult(t *testing.T) {
	for _, name := range []string{"smart", "sherman"} {
		for _, ordering := range []remote.Ordering{remote.InOrder, remote.Strict} {
			t.Run(name+"/"+ordering.String(), func(t *testing.T) {
				base := config(t, "c", ycsb.ModeSim)
				base.Index, base.Open = name, trees[name]
				base.Records, base.Ops, base.WarmupOps = 5000, 2000, 1000
				base.NodeBytes = 0 // each run sizes its own pool
				base.Sim = remote.SimConfig{Ordering: ordering}
				var cfgs []ycsb.Config
				for _, wl := range []string{"a", "d", "e"} {
					cfg := base
					cfg.Workload = preset(t, wl)
					if wl == "e" {
						cfg.Ops = 300 // and a run phase of another length
					}
					cfgs = append(cfgs, cfg)
				}
				want := make([]string, len(cfgs))
				for i, cfg := range cfgs {
					want[i] = asJSON(t, run(t, cfg))
				}
				loaded, err := ycsb.Load(context.Background(), base)
				if err != nil {
					t.Fatal(err)
				}
				if loaded.Records() != base.Records || loaded.Bytes() <= 0 || loaded.LoadTime() <= 0 {
					t.Fatalf("Loaded: %d records, %d bytes, load time %v", loaded.Records(), loaded.Bytes(), loaded.LoadTime())
				}
				for round := range 2 {
					got := make([]string, len(cfgs))
					var wg sync.WaitGroup
					for i, cfg := range cfgs {
						cfg.From = loaded
						wg.Go(func() {
							res, err := ycsb.Run(context.Background(), cfg)
							if err != nil {
								t.Error(err)
								return
							}
							got[i] = asJSON(t, res)
						})
					}
					wg.Wait()
					for i := range cfgs {
						if got[i] != want[i] {
							t.Errorf("round %d, workload %s from the Loaded:\n%s\nloading its own:\n%s", round, cfgs[i].Workload.Name, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

// TestLoadErrors checks what Load and Config.From refuse.
func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	base := config(t, "c", ycsb.ModeSim)
	loaded, err := ycsb.Load(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*ycsb.Config)
		want   error
	}{
		{"more records", func(c *ycsb.Config) { c.Records++ }, ycsb.ErrLoadMismatch},
		{"another seed", func(c *ycsb.Config) { c.Seed++ }, ycsb.ErrLoadMismatch},
		{"more clients", func(c *ycsb.Config) { c.ClientsPerCN++ }, ycsb.ErrLoadMismatch},
		{"another value size", func(c *ycsb.Config) { c.ValueSize = 16 }, ycsb.ErrLoadMismatch},
		{"strict ordering", func(c *ycsb.Config) { c.Sim.Ordering = remote.Strict }, ycsb.ErrLoadMismatch},
		// Another Opener under the same name: its index would not see the
		// loaded records (a run of NOT_FOUND).
		{"another opener", func(c *ycsb.Config) { c.Open = trees["smart"] }, ycsb.ErrLoadMismatch},
		{"crash injection", func(c *ycsb.Config) { c.CrashRate = 1000 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Workload = preset(t, "a")
			tc.change(&cfg)
			cfg.From = loaded
			_, err := ycsb.Run(ctx, cfg)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Run from a mismatched Loaded: %v, want %v", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		change func(*ycsb.Config)
	}{
		{"load workload", func(c *ycsb.Config) { c.Workload = preset(t, "load") }},
		{"shm", func(c *ycsb.Config) { c.Mode, c.NodeBytes = ycsb.ModeShm, 0 }},
		{"crash injection", func(c *ycsb.Config) { c.CrashRate = 1000 }},
		{"no opener", func(c *ycsb.Config) { c.Open = nil }},
	} {
		t.Run("Load/"+tc.name, func(t *testing.T) {
			cfg := base
			tc.change(&cfg)
			if _, err := ycsb.Load(ctx, cfg); err == nil {
				t.Fatal("Load accepted it")
			}
		})
	}
}

func preset(t *testing.T, name string) ycsb.Workload {
	t.Helper()
	w, err := ycsb.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func asJSON(t *testing.T, res *ycsb.Result) string {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
