//go:build fabric

package fabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failBound is how long a failure may take to be reported: the batch
// watchdog plus slack for a loaded 2-core machine.
const failBound = testTimeout + 2*time.Second

// TestAccessErrors forges regions and keys outside what the server
// registered: every verb gets ErrAccess from the target, and the same
// connection (except with verbs, where it breaks) and other connections
// keep working.
func TestAccessErrors(t *testing.T) {
	s, mem := startServer(t, 4096)
	c := dial(t, s.Addr())
	other := dial(t, s.Addr())
	r := s.Regions()[0]
	forged := r
	forged.Len = 1 << 40
	badKey := r
	badKey.Key += 1000
	tests := []struct {
		name string
		op   Op
	}{
		{"read-past-end", Op{Kind: OpRead, Region: forged, Off: 4096, Buf: make([]byte, 8)}},
		{"read-straddling-end", Op{Kind: OpRead, Region: forged, Off: 4090, Buf: make([]byte, 16)}},
		{"write-far-away", Op{Kind: OpWrite, Region: forged, Off: 1 << 30, Buf: make([]byte, 64)}},
		{"cas-past-end", Op{Kind: OpCAS, Region: forged, Off: 8192, Compare: 0, Swap: 1}},
		{"faa-past-end", Op{Kind: OpFAA, Region: forged, Off: 4096, Swap: 1}},
		{"bad-key-read", Op{Kind: OpRead, Region: badKey, Off: 0, Buf: make([]byte, 8)}},
		{"bad-key-faa", Op{Kind: OpFAA, Region: badKey, Off: 0, Swap: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := word(mem[0], 0)
			ops := []Op{{Kind: OpFAA, Region: r, Swap: 1}, tc.op, {Kind: OpFAA, Region: r, Swap: 1}}
			err := c.Do(ops)
			if !errors.Is(err, ErrAccess) {
				t.Fatalf("Do = %v, want ErrAccess", err)
			}
			if !strings.Contains(err.Error(), "op 1:") {
				t.Errorf("error %q does not name op 1", err)
			}
			if ops[0].Old != before {
				t.Errorf("the FAA before the failure returned %d, want %d", ops[0].Old, before)
			}
			if c.Provider() == "verbs" {
				// The queue pair is in the error state: the Conn is
				// broken, the others are not.
				if err := c.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}}); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("verbs: Do after an access error = %v, want ErrUnavailable", err)
				}
				c = dial(t, s.Addr())
			}
			for _, cc := range []*Conn{c, other} {
				op := []Op{{Kind: OpFAA, Region: r, Swap: 1}}
				if err := cc.Do(op); err != nil {
					t.Fatalf("Do after an access error: %v", err)
				}
			}
		})
	}
}

// TestDialErrors checks Dial's failures and Do on a closed Conn.
func TestDialErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	l.Close() // nobody listens there any more
	tests := []struct {
		name string
		cfg  DialConfig
		want error
	}{
		{"refused", DialConfig{Provider: "sockets", Addr: free, Timeout: time.Second}, ErrUnavailable},
		{"no-port", DialConfig{Provider: "sockets", Addr: "127.0.0.1"}, ErrInvalid},
		{"no-host", DialConfig{Provider: "sockets", Addr: ":1234"}, ErrInvalid},
		{"no-such-provider", DialConfig{Provider: "nosuchprov", Addr: free}, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := Dial(tc.cfg)
			if !errors.Is(err, tc.want) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("Dial = %v, want %v", err, tc.want)
			}
			if d := time.Since(start); d > failBound {
				t.Errorf("Dial took %v", d)
			}
		})
	}
	s, _ := startServer(t, 4096)
	c := dial(t, s.Addr())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := c.Do([]Op{{Kind: OpFAA, Region: s.Regions()[0], Swap: 1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Do on a closed Conn = %v, want ErrClosed", err)
	}
}

// TestListenErrors checks Listen's refusals.
func TestListenErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ServerConfig
		regions [][]byte
		want    error
	}{
		{"empty-region", ServerConfig{Provider: "sockets", Addr: "127.0.0.1:0"}, [][]byte{nil}, ErrInvalid},
		{"bad-address", ServerConfig{Provider: "sockets", Addr: "127.0.0.1"}, nil, ErrInvalid},
		{"no-such-provider", ServerConfig{Provider: "nosuchprov", Addr: "127.0.0.1:0"}, nil, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Listen(tc.cfg, tc.regions)
			if !errors.Is(err, tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("Listen = %v, want %v", err, tc.want)
			}
		})
	}
}

// waitEndpoints waits until the server counts want endpoints.
func waitEndpoints(t *testing.T, s *Server, want int) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for s.Endpoints() != want {
		if time.Now().After(deadline) {
			t.Fatalf("server has %d endpoints, want %d", s.Endpoints(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientKilled SIGKILLs a client process in the middle of its batches:
// the server drops its endpoint and keeps serving the others, old and new.
func TestClientKilled(t *testing.T) {
	s, mem := startServer(t, 64<<10)
	r := s.Regions()[0]
	c := dial(t, s.Addr())
	waitEndpoints(t, s, 1)
	// Connections opened by earlier rounds stay open: closing one right
	// after connecting can hit the sockets provider's accept race (see
	// docs/fabric-engine.md), which would leave a stale endpoint counted.
	for round := range 2 {
		ch := startChild(t, "hammer", childArgs{addr: s.Addr(), region: r, off: 8192})
		if got := ch.line(t, failBound); got != "ready" {
			t.Fatalf("child said %q", got)
		}
		waitEndpoints(t, s, 2+round)
		time.Sleep(20 * time.Millisecond) // let it post more batches
		if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = ch.cmd.Wait()
		waitEndpoints(t, s, 1+round)
		op := []Op{{Kind: OpFAA, Region: r, Swap: 1}}
		if err := c.Do(op); err != nil || op[0].Old != uint64(round) {
			t.Fatalf("round %d: FAA on the surviving connection: old %d, %v", round, op[0].Old, err)
		}
		fresh := dial(t, s.Addr())
		if err := fresh.Do([]Op{{Kind: OpRead, Region: r, Buf: make([]byte, 8)}}); err != nil {
			t.Fatalf("round %d: new connection: %v", round, err)
		}
		waitEndpoints(t, s, 2+round)
	}
	if word(mem[0], 0) != 2 {
		t.Errorf("counter %d, want 2", word(mem[0], 0))
	}
}

// TestServerClosed closes the server under a connected client: its next
// batch fails with ErrUnavailable in bounded time, and so does every later
// one.
func TestServerClosed(t *testing.T) {
	s, _ := startServer(t, 4096)
	c := dial(t, s.Addr())
	r := s.Regions()[0]
	if err := c.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	for i := range 2 {
		start := time.Now()
		err := c.Do([]Op{{Kind: OpRead, Region: r, Buf: make([]byte, 8)}})
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Do %d after Server.Close = %v, want ErrUnavailable", i, err)
		}
		if d := time.Since(start); d > failBound {
			t.Errorf("Do %d took %v", i, d)
		}
	}
}

// TestServerKilled SIGKILLs a server process: clients with batches in
// flight and clients starting new ones get ErrUnavailable in bounded time.
func TestServerKilled(t *testing.T) {
	ch, addr, r := startServerChild(t)
	idle := dial(t, addr)
	busy := dial(t, addr)
	if err := idle.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}}); err != nil {
		t.Fatal(err)
	}
	busyErr := make(chan error, 1)
	go func() {
		ops := make([]Op, 64)
		for i := range ops {
			ops[i] = Op{Kind: OpRead, Region: r, Buf: make([]byte, 4096)}
		}
		for {
			if err := busy.Do(ops); err != nil {
				busyErr <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := idle.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("idle client: Do = %v, want ErrUnavailable", err)
	}
	t.Logf("idle client: %v", err)
	select {
	case err := <-busyErr:
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("busy client: Do = %v, want ErrUnavailable", err)
		}
		t.Logf("busy client: %v", err)
	case <-time.After(failBound):
		t.Fatal("busy client: no error after the server was killed")
	}
	if d := time.Since(start); d > failBound {
		t.Errorf("failures took %v", d)
	}
	t.Logf("both clients failed within %v", time.Since(start).Round(time.Millisecond))
}

// TestServerStopped freezes a server process with SIGSTOP, so that its
// connections stay open but nothing completes: the batch watchdog fails the
// batch with ErrUnavailable after BatchTimeout.
func TestServerStopped(t *testing.T) {
	ch, addr, r := startServerChild(t)
	const batchTimeout = 500 * time.Millisecond
	c := dialWatchdog(t, addr, batchTimeout)
	if err := c.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}}); err != nil {
		t.Fatal(err)
	}
	freeze(t, ch)
	start := time.Now()
	err := c.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}, {Kind: OpRead, Region: r, Buf: make([]byte, 64)}})
	d := time.Since(start)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Do on a stopped server = %v, want ErrUnavailable", err)
	}
	if d < batchTimeout*9/10 || d > batchTimeout+time.Second {
		t.Errorf("watchdog fired after %v, want about %v", d, batchTimeout)
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
}

// dialWatchdog dials the server at addr with a batch watchdog of
// batchTimeout; the Conn is closed when the test ends.
func dialWatchdog(t *testing.T, addr string, batchTimeout time.Duration) *Conn {
	t.Helper()
	cfg := testDialConfig(addr)
	cfg.BatchTimeout = batchTimeout
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freeze stops server child ch with SIGSTOP until the test ends, and
// returns once every thread of it is stopped.
func freeze(t *testing.T, ch *child) {
	t.Helper()
	if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.cmd.Process.Signal(syscall.SIGCONT) })
	waitStopped(t, ch.cmd.Process.Pid)
}

// waitStopped waits until every thread of process pid is stopped: a signal
// is delivered asynchronously, and a provider thread still running could
// complete the batch meant to time out.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			t.Fatalf("threads of %d: %v", pid, err)
		}
		stopped := 0
		for _, f := range stats {
			b, err := os.ReadFile(f)
			// The state follows the parenthesised command name.
			if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
				stopped++
			}
		}
		if stopped == len(stats) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: %d of %d threads stopped", pid, stopped, len(stats))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDoByDeadline: DoBy with a deadline that passed posts nothing and
// leaves the Conn usable; on a server frozen with SIGSTOP it fails with
// ErrDeadline at its deadline, well before the watchdog, and breaks the
// Conn: a later Do posts nothing and fails at once with ErrBroken and
// ErrUnavailable. A deadline after the watchdog's leaves the watchdog to
// fail the batch with ErrUnavailable.
func TestDoByDeadline(t *testing.T) {
	ch, addr, r := startServerChild(t)
	const batchTimeout, deadline = 2 * time.Second, 200 * time.Millisecond
	c, late := dialWatchdog(t, addr, batchTimeout), dialWatchdog(t, addr, batchTimeout)
	faa := []Op{{Kind: OpFAA, Region: r, Swap: 1}}
	if err := c.DoBy(faa, time.Now().Add(-time.Second)); !errors.Is(err, ErrDeadline) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("DoBy with a deadline passed = %v, want ErrDeadline alone", err)
	}
	if err := c.DoBy(faa, time.Now().Add(time.Minute)); err != nil || faa[0].Old != 0 {
		t.Fatalf("DoBy after a refused one = %v, old value %d; want nil, 0 (nothing of the refused one posted)", err, faa[0].Old)
	}
	freeze(t, ch)
	start := time.Now()
	err := c.DoBy([]Op{{Kind: OpFAA, Region: r, Swap: 1}, {Kind: OpRead, Region: r, Buf: make([]byte, 64)}}, start.Add(deadline))
	d := time.Since(start)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("DoBy on a stopped server = %v, want ErrDeadline", err)
	}
	if d < deadline*9/10 || d > deadline+batchTimeout/2 {
		t.Errorf("DoBy gave up after %v, want about %v (watchdog %v)", d, deadline, batchTimeout)
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	start = time.Now()
	if err := c.Do(faa); !errors.Is(err, ErrBroken) || !errors.Is(err, ErrUnavailable) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("Do after the deadline broke the Conn = %v after %v, want ErrBroken and ErrUnavailable at once", err, time.Since(start))
	}
	start = time.Now()
	err = late.DoBy(faa, start.Add(time.Minute))
	if d := time.Since(start); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDeadline) || d < batchTimeout*9/10 {
		t.Errorf("DoBy with a deadline after the watchdog's = %v after %v, want ErrUnavailable from the watchdog (%v)", err, d, batchTimeout)
	}
}

// TestDoContextCancel: DoContext with a context cancelled before the batch
// posts nothing (ErrCanceled and ErrNotPosted) and leaves the Conn usable;
// contexts cancelled right after their batch completed leave nothing for
// the next batch; on a server frozen with SIGSTOP, a batch whose context
// (without a deadline) is cancelled after 200 ms fails with ErrCanceled
// soon after, far before the watchdog, and breaks the Conn. Before
// DoContext, a cancellation was seen only when the watchdog ended the
// batch.
func TestDoContextCancel(t *testing.T) {
	ch, addr, r := startServerChild(t)
	const batchTimeout, after = 4 * time.Second, 200 * time.Millisecond
	c := dialWatchdog(t, addr, batchTimeout)
	faa := []Op{{Kind: OpFAA, Region: r, Swap: 1}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.DoContext(cancelled, faa); !errors.Is(err, ErrCanceled) || !errors.Is(err, ErrNotPosted) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("DoContext with a cancelled context = %v, want ErrCanceled and ErrNotPosted alone", err)
	}
	const n = 200
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		err := c.DoContext(ctx, faa)
		cancel()
		if err != nil || faa[0].Old != uint64(i) {
			t.Fatalf("batch %d: %v, old value %d; want nil, %d", i, err, faa[0].Old, i)
		}
	}
	freeze(t, ch)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(after, cancel)
	start := time.Now()
	err := c.DoContext(ctx, []Op{{Kind: OpFAA, Region: r, Swap: 1}, {Kind: OpRead, Region: r, Buf: make([]byte, 64)}})
	d := time.Since(start)
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	if !errors.Is(err, ErrCanceled) || errors.Is(err, ErrNotPosted) {
		t.Fatalf("DoContext on a stopped server, cancelled = %v, want ErrCanceled with operations outstanding", err)
	}
	if d < after*9/10 || d > batchTimeout/4 {
		t.Errorf("DoContext gave up after %v, want soon after its cancellation at %v (watchdog %v)", d, after, batchTimeout)
	}
	if err := c.Do(faa); !errors.Is(err, ErrBroken) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("Do after a cancellation broke the Conn = %v, want ErrBroken and ErrUnavailable", err)
	}
}

// startServerChild starts a server child process (one 4 KiB region) and
// returns it, the address it listens on and the region it registered.
func startServerChild(t testing.TB) (*child, string, Region) {
	t.Helper()
	ch := startChild(t, "server", childArgs{})
	f := strings.Fields(ch.line(t, failBound))
	if len(f) != 4 {
		t.Fatalf("server child said %q", f)
	}
	var r Region
	for i, p := range []*uint64{&r.Base, &r.Key, &r.Len} {
		v, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		*p = v
	}
	return ch, f[0], r
}
