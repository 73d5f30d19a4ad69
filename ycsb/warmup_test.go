package ycsb_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/ycsb"
)

// TestWarmupNotCounted checks that warm-up operations run between the load
// and the run phase and count in no figure but the warm-up's own.
func TestWarmupNotCounted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload string
		warmup   int64
		want     int64 // warm-up operations reported
	}{
		{"explicit", "a", 500, 500},
		{"default: the records per compute node", "c", 0, 4000}, // 2 compute nodes
		// YCSB E: 95% scans of 50.5 pairs on average, 5% inserts, so
		// ⌈4000 / (0.05 + 0.95 × 50.5)⌉ operations visit 4000 keys.
		{"default for scans: the records' worth of keys", "e", 0, 84},
		{"disabled", "a", -1, 0},
		{"none for a load", "load", 700, 0},
	} {
		cfg := config(t, tc.workload, ycsb.ModeSim)
		cfg.WarmupOps = tc.warmup
		res := run(t, cfg)
		var ops int64
		for _, o := range res.Operations {
			ops += o.Count
		}
		wantOps := cfg.Ops
		if tc.workload == "load" {
			wantOps = cfg.Records
		}
		if res.WarmupOps != tc.want || res.Completed != wantOps || ops != wantOps {
			t.Errorf("%s: %d warm-up operations (want %d), %d completed and %d in the operation blocks (want %d)",
				tc.name, res.WarmupOps, tc.want, res.Completed, ops, wantOps)
		}
		var text bytes.Buffer
		if err := res.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(text.String(), "[WARMUP], Operations, "); has != (tc.want > 0) {
			t.Errorf("%s: text output reports a warm-up: %v, want %v", tc.name, has, tc.want > 0)
		}
	}
}

// TestWarmupWarmsSMARTCache runs YCSB-C on SMART with and without warm-up:
// the warm-up's own round trips per search are the cold figure, and the
// measured searches after it cost fewer round trips than without it.
func TestWarmupWarmsSMARTCache(t *testing.T) {
	cfg := config(t, "c", ycsb.ModeSim)
	cfg.Index, cfg.Records, cfg.Ops = "smart", 20000, 5000
	cfg.Open = trees["smart"]
	cfg.WarmupOps = -1
	cold := run(t, cfg)
	cfg.WarmupOps = 0
	warm := run(t, cfg)
	if !(warm.RTTPerOp < cold.RTTPerOp && warm.WarmupRTTPerOp > warm.RTTPerOp) {
		t.Fatalf("round trips per search: %.3f without warm-up, %.3f after %d warm-up searches (which cost %.3f)",
			cold.RTTPerOp, warm.RTTPerOp, warm.WarmupOps, warm.WarmupRTTPerOp)
	}
	// A leaf of an 8-byte key and value takes 40 bytes (SMART's format
	// SMARTv4): the footprint per key counts at least that, and the same
	// load gives the same figure.
	if warm.MNBytesPerKey < 40 || warm.MNBytesPerKey != cold.MNBytesPerKey {
		t.Fatalf("memory-node bytes per key: %.1f and %.1f", cold.MNBytesPerKey, warm.MNBytesPerKey)
	}
	t.Logf("round trips per search: %.3f cold, %.3f warm (warm-up %d searches at %.3f)",
		cold.RTTPerOp, warm.RTTPerOp, warm.WarmupOps, warm.WarmupRTTPerOp)
}
