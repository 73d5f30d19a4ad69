package sherman

import (
	"testing"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// TestIndexContractTransports runs the transport battery with the memory
// nodes in shared files (shm) and in memnode processes (tcp).
func TestIndexContractTransports(t *testing.T) {
	for _, tr := range []struct {
		name string
		cfg  func(testing.TB) *remote.Config
	}{{"shm", indextest.ShmConfig}, {"tcp", indextest.TCPConfig}} {
		t.Run(tr.name, func(t *testing.T) {
			tg := contractTarget("sherman-"+tr.name, Options{KeySize: 32, ValueSize: 64})
			tg.Config = tr.cfg(t)
			indextest.RunTransport(t, tg)
		})
	}
}
