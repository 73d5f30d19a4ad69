//go:build fabric

package remote_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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
	const window = 3 * time.Second
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Tags: "fabric", Args: []string{"--provider", "sockets"}})
	p, err := remote.NewPool(remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: memnodetest.Addrs(nodes),
		Token: memnodetest.Token, Provider: "sockets", DialTimeout: timeout, Timeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	clients, a := dialledClients(t, p, 4)

	nodes[0].Pause()
	ops, failed, slow := stoppedLoad(t, clients, a, timeout, window)
	t.Logf("%d FAAs in %v on the stopped node, %d failed, %d took over Timeout/2", ops, window, failed, slow)
	// The 8 in flight when it stopped, and a probe per back-off (100 ms
	// doubling: 5 or 6 in the window); 24 bounds any schedule, where
	// without the shared health every verb of every client waits out a
	// Timeout (about 8 × 3 s / 0.4 s = 60, 42 measured).
	if slow > 24 {
		t.Errorf("%d FAAs took over Timeout/2 on the stopped node", slow)
	}
	if failed < int64(len(clients)) {
		t.Errorf("only %d FAAs failed", failed)
	}

	nodes[0].Resume()
	waitRecovered(t, clients, a)
}

// TestFabricNodeRestart: a memory node restarted with its file at the same
// control address and with a new fabric endpoint port (as memnode without
// --fabric-listen after kill -9) is used again by every client of the
// pool: the endpoint (address, region bases and keys) is fetched again
// after the node failed, with the contents it had. Before, each batch
// dialled the endpoint of the first server until the pool was closed.
func TestFabricNodeRestart(t *testing.T) {
	const timeout = 500 * time.Millisecond
	file := filepath.Join(t.TempDir(), "mn")
	fab := &remote.FabricServerConfig{Provider: "sockets", Addr: "127.0.0.1:0"}
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip, File: file, Fabric: fab})
	p, err := remote.NewPool(remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: []string{ts.addr},
		Token: testToken, Provider: "sockets", DialTimeout: timeout, Timeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	clients, a := dialledClients(t, p, 2)
	old := ts.srv.Fabric()
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if _, err := c.FAA(ctx, a, 1); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("client %d: FAA on the closed server: %v, want ErrUnavailable", i, err)
		}
	}

	restarted := serveAt(t, ts.addr, remote.ServerConfig{File: file, Fabric: fab})
	if restarted.srv.Fabric() == old {
		t.Skipf("the restarted server has its old fabric endpoint again (%s)", old)
	}
	start := time.Now()
	waitRecovered(t, clients, a)
	t.Logf("%s, then %s: every client reached it again within %v", old, restarted.srv.Fabric(), time.Since(start).Round(time.Millisecond))
	v, err := clients[len(clients)-1].FAA(ctx, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(2 * len(clients)); v != want {
		t.Errorf("counter %d after the restart, want %d (every FAA before the close, one per client after)", v, want)
	}
}

// TestFabricContextOnStoppedNode is TestTCPContextOnStoppedNode for the
// fabric transport's data path: on a memnode process stopped by SIGSTOP, a
// verb whose context has a deadline far shorter than FabricConfig.Timeout
// returns the context's error at about the deadline (it waited for the
// Timeout, the endpoint's watchdog, before); a READ leaves its client
// working, an FAA crashes it (it may still land). With one endpoint that
// the clients share, a READ queued behind another's on it, whose deadline
// broke the endpoint, is not posted there and returns by its own deadline
// without crashing its client (its redial is cut by the deadline too). The
// node is not judged down by deadlines its callers set: once it continues,
// the next verbs succeed at once. A context without a deadline, cancelled
// after the same time, ends its verbs the same way with context.Canceled
// (they waited for the Timeout before fabric.Conn.DoContext).
func TestFabricContextOnStoppedNode(t *testing.T) {
	const timeout = 3 * time.Second
	const deadline = 300 * time.Millisecond
	for _, tc := range []struct {
		end   string
		conns int
	}{{"deadline", 2}, {"deadline", 1}, {"cancel", 2}, {"cancel", 1}} {
		conns := tc.conns
		want := context.DeadlineExceeded
		if tc.end == "cancel" {
			want = context.Canceled
		}
		t.Run(fmt.Sprintf("%s/conns=%d", tc.end, conns), func(t *testing.T) {
			nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 4 << 20, Tags: "fabric", Args: []string{"--provider", "sockets"}})
			p, err := remote.NewPool(remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: memnodetest.Addrs(nodes),
				Token: memnodetest.Token, Provider: "sockets", Conns: conns, DialTimeout: timeout, Timeout: timeout}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			cn := p.NewComputeNode()
			clients := []*remote.Client{cn.NewClient(), cn.NewClient()}
			ctx := context.Background()
			a, err := clients[0].Alloc(ctx, 64)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range clients {
				if _, err := c.FAA(ctx, a, 0); err != nil {
					t.Fatal(err)
				}
			}
			// With two endpoints, a READ and an FAA, each on its own; with
			// one, two READs on it.
			names := []string{"READ", "FAA"}
			if conns == 1 {
				names[1] = "READ"
			}
			nodes[0].Pause()
			defer nodes[0].Resume()
			errs := make([]error, 2)
			took := make([]time.Duration, 2)
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Go(func() {
					dctx, cancel := context.WithTimeout(ctx, deadline)
					if tc.end == "cancel" {
						dctx, cancel = context.WithCancel(ctx)
						time.AfterFunc(deadline, cancel)
					}
					defer cancel()
					t0 := time.Now()
					if names[i] == "FAA" {
						_, errs[i] = c.FAA(dctx, a, 1)
					} else {
						errs[i] = c.Read(dctx, a, make([]byte, 8))
					}
					took[i] = time.Since(t0)
				})
			}
			wg.Wait()
			for i, c := range clients {
				t.Logf("%s %d ended by its context's %s after %v on the stopped node: %v after %v", names[i], i, tc.end, deadline, errs[i], took[i])
				if !errors.Is(errs[i], want) {
					t.Errorf("%s %d: %v, want the context's error", names[i], i, errs[i])
				}
				if took[i] > deadline+timeout/4 {
					t.Errorf("%s %d returned after %v, its deadline %v (Timeout %v)", names[i], i, took[i], deadline, timeout)
				}
				if crashed := c.Crashed(); crashed != (names[i] == "FAA") {
					t.Errorf("%s %d given up: client crashed: %v", names[i], i, crashed)
				}
			}
			nodes[0].Resume()
			c := cn.NewClient()
			t0 := time.Now()
			if v, err := c.FAA(ctx, a, 0); err != nil || v > 1 {
				t.Fatalf("FAA after the node continued: %d, %v; want 0 or 1 (the FAA given up may have landed)", v, err)
			}
			if d := time.Since(t0); d > timeout/2 {
				t.Errorf("the first FAA after the node continued took %v: the node was judged down", d)
			}
		})
	}
}

// TestFabricDialsOnStoppedNode: on a memnode process stopped by SIGSTOP
// before any endpoint connection was dialled, 8 clients sharing a compute
// node's 2 endpoint slots each fail within about Timeout (the dial of a
// slot is given half of it, and the clients that need the slot meanwhile
// wait for that one dial), where they queued on the slot and dialled one
// after another, each for DialTimeout (20 s in all with Timeout 3 s, a
// new-user pass measured); clients whose context is cancelled after
// 300 ms return then with context.Canceled; once the node is found down,
// a READ with a 300 ms deadline returns by it, also when it is the one
// that fetches the node's endpoint again; and closing the pool takes about
// a Timeout at most.
func TestFabricDialsOnStoppedNode(t *testing.T) {
	const timeout = 2 * time.Second
	const clients = 8
	for _, mode := range []string{"background", "cancelled"} {
		t.Run(mode, func(t *testing.T) {
			nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 4 << 20, Tags: "fabric", Args: []string{"--provider", "sockets"}})
			p, err := remote.NewPool(remote.Config{Fabric: &remote.FabricConfig{MemoryNodes: memnodetest.Addrs(nodes),
				Token: memnodetest.Token, Provider: "sockets", DialTimeout: 5 * time.Second, Timeout: timeout}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			cn := p.NewComputeNode()
			a, err := cn.NewClient().Alloc(t.Context(), 64) // a control-plane call: no endpoint dialled
			if err != nil {
				t.Fatal(err)
			}
			nodes[0].Pause()
			defer nodes[0].Resume()
			var wg sync.WaitGroup
			for i := range clients {
				c := cn.NewClient()
				wg.Go(func() {
					ctx := context.Background()
					if mode == "cancelled" {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						time.AfterFunc(300*time.Millisecond, cancel)
					}
					t0 := time.Now()
					err := c.Read(ctx, a, make([]byte, 8))
					d := time.Since(t0)
					switch {
					case mode == "cancelled" && (!errors.Is(err, context.Canceled) || d > time.Second):
						t.Errorf("client %d: READ cancelled after 300 ms on the stopped node: %v after %v, want context.Canceled then", i, err, d)
					case mode == "background" && (!errors.Is(err, remote.ErrUnavailable) || d > timeout+timeout/2):
						t.Errorf("client %d: READ on the stopped node: %v after %v, want ErrUnavailable within about the Timeout (%v)", i, err, d, timeout)
					default:
						t.Logf("client %d: %v after %v", i, err, d.Round(time.Millisecond))
					}
				})
			}
			wg.Wait()
			if mode == "background" {
				// The node is down now: past its back-off, the next batch
				// fetches its endpoint again over the control connection,
				// which waits for the caller's deadline, not for the
				// transport's own (it took 1.5 s with a 300 ms deadline).
				for i := range 3 {
					time.Sleep(300 * time.Millisecond)
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					t0 := time.Now()
					err := cn.NewClient().Read(ctx, a, make([]byte, 8))
					d := time.Since(t0)
					cancel()
					t.Logf("READ %d with a deadline of 300 ms on the node found down: %v after %v", i, err, d.Round(time.Millisecond))
					if err == nil || d > 600*time.Millisecond {
						t.Errorf("READ %d with a deadline of 300 ms on the node found down: %v after %v", i, err, d)
					}
				}
			}
			t0 := time.Now()
			p.Close()
			if d := time.Since(t0); d > timeout+timeout/2 {
				t.Errorf("closing the pool with the node stopped took %v (Timeout %v)", d, timeout)
			}
		})
	}
}
