package remote_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
)

// stallProxy forwards TCP connections to a memory-node server until it is
// frozen: then the connections it forwards stop carrying bytes both ways,
// and the connections it accepts are read and never answered, as with a
// memnode process stopped by SIGSTOP (the kernel still accepts). It counts
// the connections accepted while frozen (the client's dials) and the
// largest number of them open at once.
type stallProxy struct {
	t       *testing.T
	l       net.Listener
	backend string

	mu       sync.Mutex
	frozen   chan struct{} // non-nil while frozen; thaw closes it
	conns    []net.Conn
	held     int // connections accepted while frozen, still open
	maxHeld  int
	accepted atomic.Int64 // every connection accepted
	stalled  atomic.Int64 // connections accepted while frozen
	wg       sync.WaitGroup
}

func newStallProxy(t *testing.T, backend string) *stallProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{t: t, l: l, backend: backend}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		p.thaw()
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.l.Addr().String() }

func (p *stallProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

func (p *stallProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
}

// track records an open connection, closed at the end of the test.
func (p *stallProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *stallProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.track(c)
		p.mu.Lock()
		frozen := p.frozen != nil
		if frozen {
			p.held++
			p.maxHeld = max(p.maxHeld, p.held)
		}
		p.mu.Unlock()
		if frozen {
			p.stalled.Add(1)
			p.wg.Go(func() { // read everything, answer nothing
				io.Copy(io.Discard, c)
				c.Close()
				p.mu.Lock()
				p.held--
				p.mu.Unlock()
			})
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.track(b)
		p.wg.Go(func() { p.pipe(b, c) })
		p.wg.Go(func() { p.pipe(c, b) })
	}
}

// pipe copies src to dst, holding every chunk while the proxy is frozen.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.frozen
			p.mu.Unlock()
			if gate != nil {
				<-gate
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// maxStalledOpen returns the largest number of connections accepted while
// frozen that were open at once.
func (p *stallProxy) maxStalledOpen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxHeld
}

// downPool opens a pool on addr with DialTimeout and Timeout both timeout,
// closed at the end of the test.
func downPool(t *testing.T, addr string, timeout time.Duration) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{addr}, Token: testToken,
		DialTimeout: timeout, Timeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestTCPNodeStopsAnswering: a memory node that stops answering under the
// load of 16 clients on 2 compute nodes (all with context.Background) fails
// every verb with ErrUnavailable within about Timeout, the verbs pending on
// it when it stopped included; the verbs after it was found down fail at
// once instead of each redialling and waiting out a timeout: over the
// whole window the client dials the node only as often as the back-off
// lets it (a few times, not once per verb), one dial at a time. Once it
// answers again the pool works again.
func TestTCPNodeStopsAnswering(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const window = 1500 * time.Millisecond
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	px := newStallProxy(t, ts.addr)
	p := downPool(t, px.addr(), timeout)
	clients, a := dialledClients(t, p, 8)

	px.freeze()
	ops, failed, slow := stoppedLoad(t, clients, a, timeout, window)
	dials := px.stalled.Load()
	t.Logf("%d FAAs in %v on the stopped node, %d failed, %d took over Timeout/2; %d dials (at most %d at once)",
		ops, window, failed, slow, dials, px.maxStalledOpen())
	// Back-off from 100 ms, doubling: 4 or 5 probes in the window; 16 bounds
	// any schedule, where a redial per verb would make hundreds.
	if dials > 16 {
		t.Errorf("%d dials of the stopped node in %v by %d clients", dials, window, len(clients))
	}
	if n := px.maxStalledOpen(); n > 1 {
		t.Errorf("%d dials of the stopped node in flight at once, want 1", n)
	}
	if failed < int64(len(clients)) {
		t.Errorf("only %d FAAs failed", failed)
	}

	px.thaw()
	waitRecovered(t, clients, a)
}

// dialledClients returns perCN clients on each of two compute nodes of p
// and a word of p's memory node 0 on which every client has run an FAA, so
// that each has its connections dialled.
func dialledClients(t *testing.T, p *remote.Pool, perCN int) ([]*remote.Client, remote.Addr) {
	t.Helper()
	ctx := context.Background()
	var clients []*remote.Client
	for range 2 {
		cn := p.NewComputeNode()
		for range perCN {
			clients = append(clients, cn.NewClient())
		}
	}
	a, err := clients[0].Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		if _, err := c.FAA(ctx, a, 1); err != nil {
			t.Fatal(err)
		}
	}
	return clients, a
}

// stoppedLoad runs FAAs on a from every client, with context.Background,
// for window after the memory node stopped answering, and checks each:
// it fails with ErrUnavailable (it may succeed only within Timeout and a
// margin of the stop) and returns within that bound. An FAA that failed
// leaves its client crashed (Client.Crashed), which is replaced in clients
// by a new client of its compute node, a millisecond later. It returns how
// many FAAs ran, how many failed and how many took over half a Timeout.
func stoppedLoad(t *testing.T, clients []*remote.Client, a remote.Addr, timeout, window time.Duration) (ops, failed, slow int64) {
	t.Helper()
	bound := timeout + 2*time.Second // generous: a verb waits at most Timeout
	ctx := context.Background()
	start := time.Now()
	var nops, nfailed, nslow, ncrashed atomic.Int64
	var wg sync.WaitGroup
	defer func() {
		t.Logf("%d clients crashed by an FAA that failed", ncrashed.Load())
	}()
	for i := range clients {
		wg.Go(func() {
			c := clients[i]
			defer func() { clients[i] = c }()
			for time.Since(start) < window {
				t0 := time.Now()
				_, err := c.FAA(ctx, a, 1)
				d := time.Since(t0)
				nops.Add(1)
				if d > bound {
					t.Errorf("client %d: an FAA on the stopped node took %v (Timeout %v)", i, d, timeout)
				}
				if d > timeout/2 {
					nslow.Add(1)
				}
				switch {
				case err == nil && time.Since(start) > bound:
					t.Errorf("client %d: an FAA succeeded %v after the node stopped", i, time.Since(start))
				case err != nil && !errors.Is(err, remote.ErrUnavailable):
					t.Errorf("client %d: FAA on the stopped node: %v, want ErrUnavailable", i, err)
				case err != nil:
					nfailed.Add(1)
				}
				if err != nil && !c.Crashed() {
					t.Errorf("client %d: an FAA failed with %v and left its client working", i, err)
				}
				if c.Crashed() {
					ncrashed.Add(1)
					c = c.ComputeNode().NewClient()
					time.Sleep(time.Millisecond) // a client per failure: not a million
				}
			}
		})
	}
	wg.Wait()
	return nops.Load(), nfailed.Load(), nslow.Load()
}

// waitRecovered waits until every client's FAA on a succeeds again (the
// node's back-off is at most a few seconds). A client that an FAA of
// unknown outcome crashed is replaced by a new client of its compute node.
func waitRecovered(t *testing.T, clients []*remote.Client, a remote.Addr) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for i, c := range clients {
		for {
			if c.Crashed() {
				c = c.ComputeNode().NewClient()
				clients[i] = c
			}
			_, err := c.FAA(ctx, a, 1)
			if err == nil {
				break
			}
			if !errors.Is(err, remote.ErrUnavailable) {
				t.Fatalf("client %d: FAA after the node came back: %v", i, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("client %d: the node came back but FAAs still fail: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestTCPNodeRestart: a memory node whose server closes fails verbs at
// once with ErrUnavailable (connection refused, then the back-off); a
// server restarted on the same address with the same file is reached again
// by every client of the pool, with the contents it had.
func TestTCPNodeRestart(t *testing.T) {
	const timeout = 500 * time.Millisecond
	file := filepath.Join(t.TempDir(), "mn")
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip, File: file})
	srv, addr := ts.srv, ts.addr
	p := downPool(t, addr, timeout)
	ctx := context.Background()
	clients, a := dialledClients(t, p, 4)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := clients[i]
			defer func() { clients[i] = c }()
			for range 200 {
				if c.Crashed() {
					// A failed FAA stops its client (Client.Crashed).
					c = c.ComputeNode().NewClient()
				}
				t0 := time.Now()
				_, err := c.FAA(ctx, a, 1)
				if !errors.Is(err, remote.ErrUnavailable) {
					t.Errorf("client %d: FAA on the closed server: %v, want ErrUnavailable", i, err)
					return
				}
				if d := time.Since(t0); d > timeout+2*time.Second {
					t.Errorf("client %d: FAA on the closed server took %v", i, d)
				}
			}
		})
	}
	wg.Wait()

	serveAt(t, addr, remote.ServerConfig{File: file})
	waitRecovered(t, clients, a)
	v, err := clients[len(clients)-1].FAA(ctx, a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(2 * len(clients)); v != want {
		t.Errorf("counter %d after the restart, want %d (every FAA before the close, one per client after)", v, want)
	}
}

// TestTCPNodeRestartWithoutFile: a memory node restarted on its address
// without its file (empty memory, in no pool) is refused by the pool's
// check, and every call fails with an error wrapping ErrUnavailable and,
// once a dial reached the new server, ErrBadNode: the probe that meets it
// first as the calls refused after it while the node is down.
func TestTCPNodeRestartWithoutFile(t *testing.T) {
	const timeout = 500 * time.Millisecond
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := downPool(t, ts.addr, timeout)
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	a, err := c.Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Close(); err != nil {
		t.Fatal(err)
	}
	serveAt(t, ts.addr, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	badNode := 0
	for deadline := time.Now().Add(10 * time.Second); badNode < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no call failed with ErrBadNode within 10 s of the restart (%d did)", badNode)
		}
		if c.Crashed() {
			c = c.ComputeNode().NewClient() // a failed FAA stops its client (remote.Client.Crashed)
		}
		_, err := c.FAA(ctx, a, 1)
		switch {
		case err == nil:
			t.Fatal("an FAA succeeded on a memory node restarted without its contents")
		case !errors.Is(err, remote.ErrUnavailable):
			t.Fatalf("FAA on a memory node restarted without its file: %v, want ErrUnavailable", err)
		case errors.Is(err, remote.ErrBadNode):
			badNode++
		case badNode > 0:
			t.Fatalf("FAA after one failed with ErrBadNode: %v, want ErrBadNode kept in the chain", err)
		}
	}
}

// TestTCPCloseNodeStopped: closing a SMART or a Sherman tree with many
// sessions (each leaves the registry with a WRITE) while its memory node
// does not answer returns within about one Timeout, not one per session,
// and dials the node at most a few times; closing the pool then returns
// at once.
func TestTCPCloseNodeStopped(t *testing.T) {
	const timeout = 500 * time.Millisecond
	const sessions = 32
	type tree interface {
		Put(ctx context.Context, k, v []byte) error
		Close() error
	}
	open := map[string]func(cn *remote.ComputeNode) (tree, error){
		"smart":   func(cn *remote.ComputeNode) (tree, error) { return smart.Open(cn, smart.Options{}) },
		"sherman": func(cn *remote.ComputeNode) (tree, error) { return sherman.Open(cn, sherman.Options{}) },
	}
	for _, kind := range []string{"smart", "sherman"} {
		t.Run(kind, func(t *testing.T) {
			ts := startServer(t, remote.ServerConfig{Bytes: 16 << 20, OnChipBytes: advChip})
			px := newStallProxy(t, ts.addr)
			p := downPool(t, px.addr(), timeout)
			ctx := context.Background()
			var trees []tree
			for range 2 {
				tr, err := open[kind](p.NewComputeNode())
				if err != nil {
					t.Fatal(err)
				}
				trees = append(trees, tr)
			}
			// Concurrent writers leave each tree with many idle sessions.
			var wg sync.WaitGroup
			for w := range sessions {
				wg.Go(func() {
					tr := trees[w%len(trees)]
					for i := range 20 {
						k := fmt.Appendf(nil, "key-%02d-%03d", w, i)
						if err := tr.Put(ctx, k, []byte("value!!!")); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}

			px.freeze()
			start := time.Now()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for _, tr := range trees {
					tr.Close()
				}
				p.Close()
			}()
			// One Timeout for the WRITE posted on a live connection, and
			// perhaps a probe's DialTimeout; a redial per session would take
			// 16 of them per tree.
			const bound = 4*timeout + 2*time.Second
			select {
			case <-done:
			case <-time.After(bound):
				t.Fatalf("closing two trees of %d sessions and the pool took over %v (Timeout %v)", sessions, bound, timeout)
			}
			d := time.Since(start)
			dials := px.stalled.Load()
			t.Logf("trees and pool closed in %v; %d dials of the stopped node", d, dials)
			if dials > 2 {
				t.Errorf("%d dials of the stopped node while closing", dials)
			}
		})
	}
}

// pausedClientEnv holds the address of the memory node that
// TestTCPClientPaused's child process reads from; set only in that child.
const pausedClientEnv = "DMINDEX_PAUSED_CLIENT_MEMNODE"

// TestTCPClientPaused: a compute node's process stopped (SIGSTOP) for
// longer than TCPConfig.Timeout while its clients read from a healthy
// memory node, then continued, loses no verb: the replies that came while
// it was stopped are taken when it runs again. Before, every call's timer
// fired at once when the process continued, ahead of the link's reader,
// and the node was judged down (a new-user pass: thousands of operations
// failed in the second after SIGCONT). The reading process is this test
// binary run again (TestTCPClientPausedChild).
func TestTCPClientPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a process for 2 s")
	}
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	cmd := exec.Command(os.Args[0], "-test.run", "^TestTCPClientPausedChild$", "-test.v")
	cmd.Env = append(os.Environ(), pausedClientEnv+"="+ts.addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	var report string
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "reading":
			time.Sleep(200 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // twice the child's Timeout
			if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(line, "reads "):
			report = line
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v (%s)", err, report)
	}
	t.Log(report)
	var n, failed int
	if _, err := fmt.Sscanf(report, "reads %d failed %d", &n, &failed); err != nil {
		t.Fatalf("child reported %q", report)
	}
	if failed > 0 || n == 0 {
		t.Errorf("%d of %d READs failed around a stop of twice the Timeout", failed, n)
	}
}

// TestTCPClientPausedChild is TestTCPClientPaused's reading process: four
// clients read one word of the memory node in a loop for 3 s, and it
// prints how many READs failed.
func TestTCPClientPausedChild(t *testing.T) {
	addr := os.Getenv(pausedClientEnv)
	if addr == "" {
		t.Skip("run by TestTCPClientPaused")
	}
	p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{addr}, Token: testToken, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cn := p.NewComputeNode()
	ctx := context.Background()
	a, err := cn.NewClient().Alloc(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(3 * time.Second)
	for range 4 {
		c := cn.NewClient()
		wg.Go(func() {
			buf := make([]byte, 8)
			for time.Now().Before(end) {
				n.Add(1)
				if err := c.Read(ctx, a, buf); err != nil {
					if failed.Add(1) == 1 {
						t.Logf("first failure: %v", err)
					}
				}
			}
		})
	}
	fmt.Println("reading")
	wg.Wait()
	fmt.Printf("reads %d failed %d\n", n.Load(), failed.Load())
}
