package sherman

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
)

// TestIndexContractShm runs the contract battery's real-time parts with
// the pools on the shared-memory transport (memory nodes in mapped files),
// with the default pages and with small ones that split all the time; the
// simulated parts do not depend on the transport and run in
// TestIndexContract.
func TestIndexContractShm(t *testing.T) {
	for _, tg := range []indextest.Target{
		contractTarget("sherman-shm", Options{KeySize: 32, ValueSize: 64}).OnShm(),
		contractTarget("sherman-shm-span6", Options{KeySize: 32, ValueSize: 64, Span: 6, CacheBytes: 32 << 10}).OnShm(),
	} {
		t.Run(tg.Name, func(t *testing.T) {
			t.Run("basic", func(t *testing.T) { indextest.RunBasic(t, tg) })
			t.Run("errors", func(t *testing.T) { indextest.RunErrors(t, tg) })
			t.Run("keys", func(t *testing.T) { indextest.RunKeys(t, tg) })
			t.Run("oracle", func(t *testing.T) { indextest.RunOracle(t, tg) })
			t.Run("scan", func(t *testing.T) { indextest.RunScan(t, tg) })
			t.Run("concurrent", func(t *testing.T) { indextest.RunConcurrent(t, tg) })
			t.Run("linearizable", func(t *testing.T) { indextest.RunLinearizable(t, tg) })
		})
	}
}
