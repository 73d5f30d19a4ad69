package sherman

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
)

// TestIndexContractTransports runs the transport battery with the memory
// nodes in shared files (shm) and in memnode processes (tcp, and fabric in the fabric build).
func TestIndexContractTransports(t *testing.T) {
	for _, tr := range indextest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			tr.Run(t, contractTarget("sherman-"+tr.Name, Options{KeySize: 32, ValueSize: 64}))
		})
	}
}

// TestRestartsTransports: pools that come and go, as processes do, hand
// on the rest of their chunks over shm and tcp.
func TestRestartsTransports(t *testing.T) {
	for _, tr := range indextest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			tg := contractTarget("sherman-"+tr.Name, Options{KeySize: 32, ValueSize: 320})
			tg.Config = tr.Config(t)
			indextest.RunProcessRestarts(t, tg)
		})
	}
}
