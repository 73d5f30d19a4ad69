package smart_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// target describes SMART opened with opts (Name replaced) to the module's
// index battery.
func target(name string, opts smart.Options) indextest.Target {
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
	indextest.Run(t, target("smart", smart.Options{}))
}

// TestBatteryVariants runs the battery's core against each protocol switch
// of the factor analysis: every variant must be as correct as the default.
func TestBatteryVariants(t *testing.T) {
	variants := map[string]smart.Options{
		"locked-internal":      {LockedInternal: true},
		"out-of-place-leaf":    {OutOfPlaceLeaves: true},
		"release-round-trip":   {Release: smart.ReleaseRoundTrip},
		"release-second-write": {Release: smart.ReleaseSecondWrite},
		"no-rdwc":              {NoReadDelegation: true, NoWriteCombining: true},
		"hash-cache":           {HashCache: true},
		"no-cache":             {CacheBytes: -1},
		"tiny-cache":           {CacheBytes: 4 << 10},
		"paper-ART-baseline":   {LockedInternal: true, OutOfPlaceLeaves: true, NoReadDelegation: true, NoWriteCombining: true},
	}
	for name, opts := range variants {
		t.Run(name, func(t *testing.T) {
			tg := target("smart-"+name, opts)
			indextest.RunOracle(t, tg)
			indextest.RunConcurrent(t, tg)
			indextest.RunLinearizable(t, tg)
		})
	}
}

// TestBatteryMixedOptions runs the concurrent parts of the battery with
// compute nodes that differ in every option that Open does not record in
// the tree (Options.LockedInternal is recorded: mixing it is refused): those
// options are the compute node's own business, so any mix must be as
// correct as one setting everywhere.
func TestBatteryMixedOptions(t *testing.T) {
	local := []smart.Options{
		{},
		{OutOfPlaceLeaves: true},
		{Release: smart.ReleaseRoundTrip, NoReadDelegation: true},
		{NoWriteCombining: true, HashCache: true, Release: smart.ReleaseSecondWrite},
		{CacheBytes: -1, OutOfPlaceLeaves: true, Release: smart.ReleaseRoundTrip},
	}
	tg := target("smart-mixed", smart.Options{})
	tg.Open = func(cn *remote.ComputeNode, n string) (smart.Index, error) {
		o := local[cn.ID()%len(local)]
		o.Name = n
		return smart.Open(cn, o)
	}
	indextest.RunConcurrent(t, tg)
	indextest.RunLinearizable(t, tg)
}

// TestBatteryReclaim runs the battery's concurrent, linearizability and
// simulator parts on trees that reclaim memory, with an interval short
// enough that leaves are reused while other clients still hold cached
// slots naming them, and that compute nodes are judged dead by the others
// and must renew their pins (I8): 1 ms in real time (a 10 ms lease, which
// compute nodes stalled by the scheduler under -race still overrun), 20 µs
// in the simulator's virtual time (a 200 µs lease that long operations
// overrun). Each run must have reused leaves, or it proved nothing.
func TestBatteryReclaim(t *testing.T) {
	variants := map[string]smart.Options{
		"default":                 {},
		"out-of-place-tiny-cache": {OutOfPlaceLeaves: true, CacheBytes: 4 << 10},
	}
	for name, opts := range variants {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var trees []*smart.Tree
			tg := target("smart-reclaim-"+name, opts)
			tg.Open = func(cn *remote.ComputeNode, n string) (smart.Index, error) {
				o := opts
				o.Name, o.Reclaim, o.ReclaimInterval = n, true, time.Millisecond
				if cn.Pool().Config().Sim != nil {
					o.ReclaimInterval = 20 * time.Microsecond // virtual time: no scheduler stalls
				}
				tr, err := smart.Open(cn, o)
				if err == nil {
					mu.Lock()
					trees = append(trees, tr)
					mu.Unlock()
				}
				return tr, err
			}
			indextest.RunOracle(t, tg)
			indextest.RunConcurrent(t, tg)
			indextest.RunLinearizable(t, tg)
			t.Run("sim", func(t *testing.T) { indextest.RunSim(t, tg) })
			stg := tg
			stg.Lease = 10 * 20 * time.Microsecond // the simulator's, ten intervals
			t.Run("stalls", func(t *testing.T) { indextest.RunStalls(t, stg) })
			var st index.Stats
			for _, tr := range trees {
				st = st.Add(tr.Stats())
			}
			t.Logf("%d trees: %v", len(trees), st)
			if st.Reused == 0 || st.Retired == 0 {
				t.Errorf("no leaf was reused (retired %d, reused %d): the run did not exercise reclamation", st.Retired, st.Reused)
			}
		})
	}
}

// TestPausedMemoryNode: a memory node stopped under writers past the tcp
// transport's Timeout, then continued, leaves no key that cannot be
// written again (indextest.RunPausedNode), with a lease longer than the
// stop.
func TestPausedMemoryNode(t *testing.T) {
	indextest.RunPausedNode(t, target("smart", smart.Options{Lease: 10 * time.Second}))
}

// TestExpiringContext: a Put or a Delete whose context ends at any point
// of its course completes, or fails with the context's error having
// changed nothing, and leaves no lock behind (indextest.RunExpiring), in
// the default protocol and the variants that lock or write differently.
func TestExpiringContext(t *testing.T) {
	const lease = 20 * time.Millisecond
	for _, v := range []struct {
		name string
		opts smart.Options
	}{
		{"default", smart.Options{}},
		{"out-of-place-leaf", smart.Options{OutOfPlaceLeaves: true}},
		{"locked-internal", smart.Options{LockedInternal: true}},
		{"paper-nodes", smart.Options{PaperNodes: true, CacheBytes: -1}},
		{"reclaim", smart.Options{Reclaim: true, ReclaimInterval: lease / 4}},
	} {
		v.opts.Lease = lease
		tg := target("smart", v.opts)
		tg.Lease = lease
		t.Run(v.name, func(t *testing.T) { indextest.RunExpiring(t, tg) })
	}
}

// TestDeadlineOnPausedNode: a Get or a Scan with a 300 ms deadline returns
// by about then while the registry's memory node is stopped
// (indextest.RunDeadlineOnPausedNode).
func TestDeadlineOnPausedNode(t *testing.T) {
	indextest.RunDeadlineOnPausedNode(t, target("smart", smart.Options{}))
}
