package indextest

import (
	"testing"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

// ShmConfig returns the battery's pool configuration on the shm transport,
// in a directory removed when the test ends.
func ShmConfig(t testing.TB) *remote.Config {
	c := localConfig()
	c.Shm = &remote.ShmConfig{Dir: t.TempDir()}
	return &c
}

// TCPConfig starts two memnode processes on 127.0.0.1 (stopped when the
// test ends) and returns the battery's pool configuration reaching them
// over the tcp transport. Every pool made from it shares their memory; the
// battery gives each subtest an index of its own.
func TCPConfig(t testing.TB) *remote.Config {
	c := localConfig()
	nodes := memnodetest.Start(t, c.MemoryNodes, memnodetest.Options{Bytes: c.NodeBytes})
	c.MemoryNodes, c.NodeBytes = 0, 0
	c.TCP = &remote.TCPConfig{MemoryNodes: memnodetest.Addrs(nodes), Token: memnodetest.Token}
	return &c
}

// Transport names a pool configuration of another transport than local.
type Transport struct {
	Name   string
	Config func(testing.TB) *remote.Config
	// Slow marks a transport too slow for the whole battery under -short
	// (the sockets provider's few thousand verbs per second): it then runs
	// RunBasic, RunErrors and RunConcurrent only.
	Slow bool
}

// Run runs the transport battery (RunTransport) for tg on pools of tr.
func (tr Transport) Run(t *testing.T, tg Target) {
	tg.Config = tr.Config(t)
	if !tr.Slow || !testing.Short() {
		RunTransport(t, tg)
		return
	}
	checkTarget(t, tg)
	t.Run("basic", func(t *testing.T) { RunBasic(t, tg) })
	t.Run("errors", func(t *testing.T) { RunErrors(t, tg) })
	t.Run("concurrent", func(t *testing.T) { RunConcurrent(t, tg) })
}

// Transports are the transports the battery runs over besides local and
// sim: shm and tcp, and fabric in a build with the fabric tag.
var Transports = []Transport{{Name: "shm", Config: ShmConfig}, {Name: "tcp", Config: TCPConfig}}
