package smart_test

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/smart"
)

// TestBatteryShm runs the contract battery's real-time parts with the
// pools on the shared-memory transport (memory nodes in mapped files); the
// simulated parts do not depend on the transport and run in TestBattery.
func TestBatteryShm(t *testing.T) {
	tg := batteryTarget("smart-shm", smart.Options{}).OnShm()
	t.Run("basic", func(t *testing.T) { indextest.RunBasic(t, tg) })
	t.Run("errors", func(t *testing.T) { indextest.RunErrors(t, tg) })
	t.Run("keys", func(t *testing.T) { indextest.RunKeys(t, tg) })
	t.Run("oracle", func(t *testing.T) { indextest.RunOracle(t, tg) })
	t.Run("scan", func(t *testing.T) { indextest.RunScan(t, tg) })
	t.Run("concurrent", func(t *testing.T) { indextest.RunConcurrent(t, tg) })
	t.Run("linearizable", func(t *testing.T) { indextest.RunLinearizable(t, tg) })
}
