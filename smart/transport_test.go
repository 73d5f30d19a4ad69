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

// TestRestartsTransports: pools that come and go, as processes do, hand
// on what their compute node holds over shm and tcp.
func TestRestartsTransports(t *testing.T) {
	for _, tr := range indextest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			tg := target("smart-"+tr.Name, smart.Options{Reclaim: true})
			tg.Config = tr.Config(t)
			indextest.RunProcessRestarts(t, tg)
		})
	}
}
