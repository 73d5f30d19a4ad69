package indextest

import (
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// OnShm returns tg with its real-time tests on the shared-memory transport:
// each pool's memory nodes are files in a temporary directory of the test,
// mapped by this process. Its Open refuses pools of any transport but shm
// and the simulator, so a test that bypassed NewPool would fail.
func (tg Target) OnShm() Target {
	tg.NewPool = func(t testing.TB, cfg remote.Config) *remote.Pool {
		t.Helper()
		cfg.Shm = &remote.ShmConfig{Dir: t.TempDir()}
		return newPool(t, cfg)
	}
	open := tg.Open
	tg.Open = func(cn *remote.ComputeNode, name string) (smart.Index, error) {
		if tr := cn.Pool().Transport(); tr != "shm" && tr != "sim" {
			return nil, fmt.Errorf("indextest: pool of transport %q, want shm", tr)
		}
		return open(cn, name)
	}
	return tg
}
