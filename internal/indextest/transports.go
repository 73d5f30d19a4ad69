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
