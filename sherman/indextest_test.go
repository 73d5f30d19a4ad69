package sherman

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// contractTarget describes Sherman opened with opts (Name replaced) to the
// module's generic index battery.
func contractTarget(name string, opts Options) indextest.Target {
	return indextest.Target{
		Name: name,
		Open: func(cn *remote.ComputeNode, name string) (index.Index, error) {
			o := opts
			o.Name = name
			return Open(cn, o)
		},
		Verify:      func(ctx context.Context, idx index.Index) error { return idx.(*Tree).Verify(ctx) },
		MaxKeyLen:   opts.KeySize,
		MaxValueLen: opts.ValueSize,
	}
}

// TestIndexContract runs the whole generic index battery against Sherman
// with 32-byte keys and 64-byte values (its fixed maxima).
func TestIndexContract(t *testing.T) {
	indextest.Run(t, contractTarget("sherman", Options{KeySize: 32, ValueSize: 64}))
}

// TestIndexContractSmallPages runs the local-mode batteries with six
// entries per page and a small index cache, so that the battery's workloads
// split pages, grow the root and evict cache entries all the time.
func TestIndexContractSmallPages(t *testing.T) {
	tg := contractTarget("sherman-span6", Options{KeySize: 32, ValueSize: 64, Span: 6, CacheBytes: 32 << 10})
	t.Run("basic", func(t *testing.T) { indextest.RunBasic(t, tg) })
	t.Run("errors", func(t *testing.T) { indextest.RunErrors(t, tg) })
	t.Run("keys", func(t *testing.T) { indextest.RunKeys(t, tg) })
	t.Run("oracle", func(t *testing.T) { indextest.RunOracle(t, tg) })
	t.Run("scan", func(t *testing.T) { indextest.RunScan(t, tg) })
	t.Run("concurrent", func(t *testing.T) { indextest.RunConcurrent(t, tg) })
}

// TestIndexContractRDWC runs the concurrency batteries with read delegation
// and write combining.
func TestIndexContractRDWC(t *testing.T) {
	tg := contractTarget("sherman-rdwc", Options{KeySize: 32, ValueSize: 64, RDWC: true})
	t.Run("basic", func(t *testing.T) { indextest.RunBasic(t, tg) })
	t.Run("concurrent", func(t *testing.T) { indextest.RunConcurrent(t, tg) })
	t.Run("linearizable", func(t *testing.T) { indextest.RunLinearizable(t, tg) })
}

// TestLinearizableSmallPages checks linearizability (porcupine, in local mode
// and in the simulator in both orderings) with four entries per page, so
// that hot keys split and move pages under contention, with and without
// RDWC.
func TestLinearizableSmallPages(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprint("rdwc=", shared), func(t *testing.T) {
			indextest.RunLinearizable(t, contractTarget("sherman-span4", Options{KeySize: 8, ValueSize: 16, Span: 4, RDWC: shared}))
		})
	}
}

// TestPausedMemoryNode: a memory node stopped under writers past the tcp
// transport's Timeout, then continued, leaves no key that cannot be
// written again (indextest.RunPausedNode), with a lease longer than the
// stop.
func TestPausedMemoryNode(t *testing.T) {
	indextest.RunPausedNode(t, contractTarget("sherman", Options{KeySize: 32, ValueSize: 64, Lease: 10 * time.Second}))
}

// TestExpiringContext: a Put or a Delete whose context ends at any point
// of its course completes, or fails with the context's error having
// changed nothing, and leaves no lock behind (indextest.RunExpiring).
func TestExpiringContext(t *testing.T) {
	const lease = 20 * time.Millisecond
	tg := contractTarget("sherman", Options{KeySize: 32, ValueSize: 64, Lease: lease})
	tg.Lease = lease
	indextest.RunExpiring(t, tg)
}

// TestDeadlineOnPausedNode: a Get or a Scan with a 300 ms deadline returns
// by about then while the registry's memory node is stopped
// (indextest.RunDeadlineOnPausedNode).
func TestDeadlineOnPausedNode(t *testing.T) {
	indextest.RunDeadlineOnPausedNode(t, contractTarget("sherman", Options{KeySize: 32, ValueSize: 64}))
}
