//go:build fabric

package remote_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

// TestFabricNodeStopsAnswering is TestTCPNodeStopsAnswering for the fabric
// transport's data path: a memnode process stopped (SIGSTOP) under the load
// of 8 clients on 2 compute nodes fails every verb with ErrUnavailable
// within about Timeout, and once one batch found it down the others fail at
// once instead of each waiting out its own timeout on its endpoint (or a
// dial of a new one): over the window only a few verbs take longer than
// half a Timeout (the ones in flight when it stopped, and one probe per
// back-off), where each client's would without the node's shared health.
// Once it is continued the pool works again.
func TestFabricNodeStopsAnswering(t *testing.T) {
	const timeout = 400 * time.Millisecond
	const bound = timeout + 2*time.Second // generous: a verb waits at most Timeout
	const window = 3 * time.Second
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Tags: "fabric", Args: []string{"--provider", "sockets"}})
	p, err := remote.NewPool(remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: memnodetest.Addrs(nodes),
		Token: memnodetest.Token, Provider: "sockets", DialTimeout: timeout, Timeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	var clients []*remote.Client
	for range 2 {
		cn := p.NewComputeNode()
		for range 4 {
			clients = append(clients, cn.NewClient())
		}
	}
	a, err := clients[0].Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients { // every endpoint dialled
		if _, err := c.FAA(ctx, a, 1); err != nil {
			t.Fatal(err)
		}
	}

	nodes[0].Pause()
	start := time.Now()
	var ops, failed, slow atomic.Int64
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for time.Since(start) < window {
				t0 := time.Now()
				_, err := c.FAA(ctx, a, 1)
				d := time.Since(t0)
				ops.Add(1)
				if d > bound {
					t.Errorf("client %d: an FAA on the stopped node took %v (Timeout %v)", i, d, timeout)
				}
				if d > timeout/2 {
					slow.Add(1)
				}
				switch {
				case err == nil && time.Since(start) > bound:
					t.Errorf("client %d: an FAA succeeded %v after the node stopped", i, time.Since(start))
				case err != nil && !errors.Is(err, remote.ErrUnavailable):
					t.Errorf("client %d: FAA on the stopped node: %v, want ErrUnavailable", i, err)
				case err != nil:
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d FAAs in %v on the stopped node, %d failed, %d took over Timeout/2", ops.Load(), window, failed.Load(), slow.Load())
	// The 8 in flight when it stopped, and a probe per back-off (100 ms
	// doubling: 5 or 6 in the window); 24 bounds any schedule, where
	// without the shared health every verb of every client waits out a
	// Timeout (about 8 × 3 s / 0.4 s = 60, 42 measured).
	if n := slow.Load(); n > 24 {
		t.Errorf("%d FAAs took over Timeout/2 on the stopped node", n)
	}
	if failed.Load() < int64(len(clients)) {
		t.Errorf("only %d FAAs failed", failed.Load())
	}

	nodes[0].Resume()
	waitRecovered(t, clients, a)
}
