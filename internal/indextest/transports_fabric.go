//go:build fabric

package indextest

import (
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

func init() {
	Transports = append(Transports, Transport{Name: "fabric", Config: FabricConfig, Slow: true})
	pausedTransports = append(pausedTransports, pausedTransport{name: "fabric",
		opts: memnodetest.Options{Tags: "fabric", Args: []string{"--provider", "sockets"}},
		config: func(addrs []string, timeout time.Duration) remote.Config {
			return remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: addrs, Token: memnodetest.Token,
				Provider: "sockets", DialTimeout: timeout, Timeout: timeout}}
		}})
}

// FabricConfig starts two memnode processes built with the fabric tag and
// serving the sockets provider on 127.0.0.1 (stopped when the test ends),
// and returns the battery's pool configuration reaching them over the
// fabric transport.
func FabricConfig(t testing.TB) *remote.Config {
	c := localConfig()
	nodes := memnodetest.Start(t, c.MemoryNodes, memnodetest.Options{Bytes: c.NodeBytes, Tags: "fabric",
		Args: []string{"--provider", "sockets"}})
	c.MemoryNodes, c.NodeBytes = 0, 0
	c.Fabric = &remote.FabricConfig{MemoryNodes: memnodetest.Addrs(nodes), Token: memnodetest.Token, Provider: "sockets"}
	return &c
}
