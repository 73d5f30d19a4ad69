package smart_test

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/smart"
)

// TestBatteryTransports runs the transport battery with the memory nodes in
// shared files (shm) and in memnode processes (tcp, and fabric in the fabric build).
func TestBatteryTransports(t *testing.T) {
	for _, tr := range indextest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			tr.Run(t, target("smart-"+tr.Name, smart.Options{}))
		})
	}
}
