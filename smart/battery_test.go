package smart_test

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// batteryTarget describes SMART opened with opts (Name replaced) to the
// module's generic index battery.
func batteryTarget(name string, opts smart.Options) indextest.Target {
	return indextest.Target{
		Name: name,
		Open: func(cn *remote.ComputeNode, n string) (smart.Index, error) {
			o := opts
			o.Name = n
			return smart.Open(cn, o)
		},
		Verify:      func(ctx context.Context, idx smart.Index) error { return idx.(*smart.Tree).Verify(ctx) },
		MaxKeyLen:   smart.MaxKeyLen,
		MaxValueLen: smart.MaxValueLen,
	}
}

// TestBattery runs the contract battery every index must pass.
func TestBattery(t *testing.T) {
	indextest.Run(t, batteryTarget("smart", smart.Options{}))
}

// TestBatteryVariants runs the battery's core against each protocol switch
// of the factor analysis: every variant must be as correct as the default.
func TestBatteryVariants(t *testing.T) {
	variants := map[string]smart.Options{
		"locked-internal":    {LockedInternal: true},
		"out-of-place-leaf":  {OutOfPlaceLeaves: true},
		"separate-lock":      {SeparateLock: true},
		"no-rdwc":            {NoReadDelegation: true, NoWriteCombining: true},
		"hash-cache":         {HashCache: true},
		"no-cache":           {CacheBytes: -1},
		"tiny-cache":         {CacheBytes: 4 << 10},
		"paper-ART-baseline": {LockedInternal: true, OutOfPlaceLeaves: true, NoReadDelegation: true, NoWriteCombining: true},
	}
	for name, opts := range variants {
		t.Run(name, func(t *testing.T) {
			tg := batteryTarget("smart-"+name, opts)
			indextest.RunOracle(t, tg)
			indextest.RunConcurrent(t, tg)
			indextest.RunLinearizable(t, tg)
		})
	}
}
