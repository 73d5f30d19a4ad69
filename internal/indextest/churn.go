package indextest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// RunChurn checks that an index reuses the memory it frees: on a pool of
// one 4 MiB memory node, it inserts and deletes the same 16 keys for
// 10,000 rounds (2,000 with -short), the values alternating between a
// small and a large size class from round to round, so that every round
// frees and allocates a leaf per key, on a simulated pool (virtual time,
// the same on every machine). The bytes the compute node's allocator hands
// out must stop growing: in the second half of the rounds they may grow by
// a quarter of what the first half took, where an index that never reuses
// memory doubles them (or fills the pool). Every round must read back what
// it wrote, and Verify must pass.
func RunChurn(t *testing.T, tg Target) {
	checkTarget(t, tg)
	rounds := 10_000
	if testing.Short() {
		rounds = 2_000
	}
	// In the simulator: reclamation runs on the clock, and virtual time
	// makes how far it lags behind the rounds the same on every machine.
	p := newPool(t, remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20, Sim: &remote.SimConfig{Seed: 1}})
	idx := tg.open(t, p.NewComputeNode(), "indextest/churn")
	ctx := t.Context()
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = tg.fitKey(fmt.Appendf(nil, "churn-key-%02d", i))
	}
	sizes := [2]int{tg.vlen(8), tg.vlen(200)}
	var mid uint64
	for r := range rounds {
		val := bytes.Repeat([]byte{byte(r)}, sizes[r%2])
		for _, k := range keys {
			if err := idx.Put(ctx, k, val); err != nil {
				t.Fatalf("round %d: Put(%q): %v (allocated %d bytes)", r, k, err, p.Stats().AllocBytes)
			}
		}
		for _, k := range keys {
			v, ok, err := idx.Get(ctx, k)
			if err != nil || !ok || !bytes.Equal(v, val) {
				t.Fatalf("round %d: Get(%q) = %d bytes, %v, %v; want the %d bytes just written", r, k, len(v), ok, err, len(val))
			}
			if found, err := idx.Delete(ctx, k); err != nil || !found {
				t.Fatalf("round %d: Delete(%q) = %v, %v", r, k, found, err)
			}
		}
		if r == rounds/2 {
			mid = p.Stats().AllocBytes
		}
	}
	end := p.Stats().AllocBytes
	t.Logf("%d rounds of %d keys: %d bytes allocated after %d rounds, %d at the end", rounds, len(keys), mid, rounds/2, end)
	if end > mid+mid/4 {
		t.Errorf("memory keeps growing: %d bytes allocated after %d rounds, %d after %d", mid, rounds/2, end, rounds)
	}
	tg.verify(t, ctx, idx, "after the churn")
}
