package ycsb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
)

// TestCompactAfterLoad: Config.Compact compacts SMART once after the load
// (every record moved, Result.Compacted), its YCSB-E scans then take fewer
// verbs, the run is repeatable, and a Loaded of the compacted load serves
// only compacting runs (ErrLoadMismatch otherwise). Sherman, not an
// index.Compacter, gives the same Result with it as without.
func TestCompactAfterLoad(t *testing.T) {
	base := config(t, "e", ycsb.ModeSim)
	base.Records, base.Ops, base.WarmupOps = 5000, 500, 1000
	base.NodeBytes = 0
	base.Sim = remote.SimConfig{Ordering: remote.Strict}
	for _, name := range []string{"smart", "sherman"} {
		cfg := base
		cfg.Index, cfg.Open = name, trees[name]
		plain := run(t, cfg)
		cfg.Compact = true
		compacted := run(t, cfg)
		if name == "sherman" {
			if asJSON(t, plain) != asJSON(t, compacted) {
				t.Errorf("sherman: Compact changed the result:\n%s\n%s", asJSON(t, plain), asJSON(t, compacted))
			}
			continue
		}
		if compacted.Compacted < cfg.Records-1 || plain.Compacted != 0 { // the last leaf may be left alone
			t.Errorf("smart: Compacted = %d with Compact, %d without; want %d and 0", compacted.Compacted, plain.Compacted, cfg.Records)
		}
		t.Logf("smart: %.1f verbs per operation, %.1f compacted", plain.VerbsPerOp, compacted.VerbsPerOp)
		if compacted.VerbsPerOp*2 > plain.VerbsPerOp {
			t.Errorf("smart: YCSB-E takes %.1f verbs per operation compacted, %.1f not; want less than half", compacted.VerbsPerOp, plain.VerbsPerOp)
		}
		if again := run(t, cfg); asJSON(t, again) != asJSON(t, compacted) {
			t.Errorf("smart: two compacted runs differ:\n%s\n%s", asJSON(t, again), asJSON(t, compacted))
		}
		loaded, err := ycsb.Load(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.From = loaded
		if from := run(t, cfg); asJSON(t, from) != asJSON(t, compacted) {
			t.Errorf("smart: the compacted run from a Loaded differs:\n%s\n%s", asJSON(t, from), asJSON(t, compacted))
		}
		cfg.Compact = false
		if _, err := ycsb.Run(context.Background(), cfg); !errors.Is(err, ycsb.ErrLoadMismatch) {
			t.Errorf("smart: a run without Compact from a compacted Loaded: %v, want ErrLoadMismatch", err)
		}
	}
}
