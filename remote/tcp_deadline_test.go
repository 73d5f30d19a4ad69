package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// TestTCPBatchBy checks batch-by frames as wire.go describes them: a
// deadline on the server's clock (the welcome's), then a batch. One whose
// deadline is still ahead executes; one past it executes nothing and
// answers ErrLate, or, unsignaled, a late frame with its id (an
// unsignaled one in time is not answered); one too short for its
// deadline breaks the protocol (the connection is closed).
func TestTCPBatchBy(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	r := authed(t, ts.addr)
	if r.clock == 0 {
		t.Fatal("the welcome's clock reads 0")
	}
	const w = 8192
	by := func(deadline uint64, vs ...verb) []byte {
		return append(le64(deadline), batchPayload(vs...)...)
	}
	read := func() []byte {
		res := r.mustDo(rdV(w, 8))
		return res[:8]
	}
	call := func(payload []byte) rawReply {
		t.Helper()
		r.id++
		r.mustSend(rawFrame(rawVersion, rawBatchBy, rawSignaled, r.id, payload))
		f, err := r.read(5 * time.Second)
		if err != nil {
			t.Fatalf("no answer to a batch-by frame: %v", err)
		}
		if f.typ != rawBatchOK || f.id != r.id {
			t.Fatalf("answer to batch-by frame %d: frame %d of type %d, want type %d", r.id, f.id, f.typ, rawBatchOK)
		}
		return f
	}
	f := call(by(r.clock+uint64(time.Minute), wrV(w, []byte("in time!"))))
	if code, msg, _, err := f.status(); err != nil || code != codeOK {
		t.Fatalf("a batch-by frame in time: status %d %q, %v", code, msg, err)
	}
	if got := read(); string(got) != "in time!" {
		t.Fatalf("a batch-by frame in time: the word reads %q", got)
	}
	f = call(by(r.clock, wrV(w, []byte("too late"))))
	if code, msg, _, err := f.status(); err != nil || code != codeLate {
		t.Fatalf("a late batch-by frame: status %d %q, %v; want %d (ErrLate)", code, msg, err, codeLate)
	}
	if got := read(); string(got) != "in time!" {
		t.Fatalf("a late batch-by frame executed: the word reads %q", got)
	}
	// Unsignaled: the late one answers a late frame naming its id, and the
	// one in time runs without an answer (the READ's reply comes first).
	r.mustSend(rawFrame(rawVersion, rawBatchBy, 0, 77, by(r.clock, wrV(w, []byte("late too")))))
	f, err := r.read(5 * time.Second)
	if err != nil || f.typ != rawLate || f.id != 77 {
		t.Fatalf("a late unsignaled batch-by frame of id 77: answer of type %d, id %d, %v; want a late frame (type %d) of id 77", f.typ, f.id, err, rawLate)
	}
	if got := read(); string(got) != "in time!" {
		t.Fatalf("a late unsignaled batch-by frame executed: the word reads %q", got)
	}
	r.mustSend(rawFrame(rawVersion, rawBatchBy, 0, 78, by(r.clock+uint64(time.Minute), wrV(w, []byte("unsignal")))))
	if got := read(); string(got) != "unsignal" {
		t.Fatalf("an unsignaled batch-by frame in time: the word reads %q", got)
	}
	c := authed(t, ts.addr)
	c.mustSend(rawFrame(rawVersion, rawBatchBy, rawSignaled, 1, []byte{1, 2, 3}))
	if f, err := c.read(5 * time.Second); err == nil {
		t.Errorf("a batch-by frame too short for its deadline: the server answered a frame of type %d instead of closing the connection", f.typ)
	}
	if got := read(); string(got) != "unsignal" {
		t.Fatalf("a refused batch-by frame executed: the word reads %q", got)
	}
	r.id++
	r.mustSend(rawFrame(rawVersion, rawClock, rawSignaled, r.id, nil))
	f, err = r.read(5 * time.Second)
	if err != nil || f.typ != rawClock || f.id != r.id {
		t.Fatalf("a clock frame: answer of type %d, id %d, %v", f.typ, f.id, err)
	}
	code, _, rest, err := f.status()
	if err != nil || code != codeOK || len(rest) != 8 || binary.LittleEndian.Uint64(rest) <= r.clock {
		t.Fatalf("a clock frame: status %d, %d bytes (%x), %v; want the server's clock, past the welcome's %d", code, len(rest), rest, err, r.clock)
	}
}

// TestTCPDoByLateFrame: a DoBy batch whose frame reaches the memory node
// after the batch's deadline (held up between the client and the node,
// as a process stopped while it sends) executes nothing and returns
// ErrLate, and the client is not crashed. Before the memory nodes checked
// the deadline, only the client did, before the batch left: the WRITE
// landed 300 ms late, under a lease that may have passed to another client
// meanwhile (docs/recovery.md, "Stale writers").
func TestTCPDoByLateFrame(t *testing.T) {
	f := newProxied(t, 1, 0)
	ctx, c, a, hold := t.Context(), f.c, f.a[0], &f.hold
	if err := c.DoBy(ctx, []remote.Op{remote.Write(a, []byte("in time!"))}, c.Now()+time.Second); err != nil {
		t.Fatalf("DoBy in time: %v", err)
	}
	err := late(ctx, c, hold, remote.Write(a, []byte("too late")))
	if !errors.Is(err, remote.ErrLate) {
		t.Errorf("DoBy whose frame arrives 300 ms late, with 50 ms to go: %v, want ErrLate", err)
	}
	if c.Crashed() {
		t.Fatalf("the client crashed: %v", err)
	}
	buf := make([]byte, 8)
	if err := c.Read(ctx, a, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, []byte("in time!")) {
		t.Fatalf("the late batch executed: the word reads %q", buf)
	}
	// A batch without a deadline is not held to one.
	hold.Store(int64(100 * time.Millisecond))
	err = c.Do(ctx, []remote.Op{remote.Write(a, []byte("no limit"))})
	hold.Store(0)
	if err != nil {
		t.Fatalf("Do through the slow proxy: %v", err)
	}
}

// TestTCPPostByLateFrame: a PostBy batch whose frame reaches the memory
// node after the batch's deadline (held up between the client and the
// node) executes nothing there, and since PostBy returned before, its
// client crashes (a lock it released in the batch is still set, and others
// must take it over); another client of the same connection goes on. A
// PostBy in time executes and crashes nothing. Before, the node executed
// unsignaled batches whenever they came: a release 300 ms late freed a
// lock that a waiter may have taken over meanwhile.
func TestTCPPostByLateFrame(t *testing.T) {
	f := newProxied(t, 1, 0)
	ctx, c, a, hold := t.Context(), f.c, f.a[0], &f.hold
	other := f.p.NewComputeNode().NewClient()
	if err := c.PostBy(ctx, []remote.Op{remote.Write(a, []byte("in time!"))}, c.Now()+time.Second); err != nil {
		t.Fatalf("PostBy in time: %v", err)
	}
	read := func(r *remote.Client) string {
		t.Helper()
		buf := make([]byte, 8)
		if err := r.Read(ctx, a, buf); err != nil {
			t.Fatalf("Read: %v", err)
		}
		return string(buf)
	}
	if got := read(c); got != "in time!" || c.Crashed() {
		t.Fatalf("after a PostBy in time the word reads %q (crashed: %v)", got, c.Crashed())
	}
	hold.Store(int64(300 * time.Millisecond))
	if err := c.PostBy(ctx, []remote.Op{remote.Write(a, []byte("too late"))}, c.Now()+50*time.Millisecond); err != nil {
		t.Fatalf("PostBy with 50 ms to go: %v (it leaves in time)", err)
	}
	// The READ follows the held frame through the proxy and the node, and
	// its reply follows the late frame back.
	got := read(c)
	hold.Store(0)
	if got != "in time!" {
		t.Errorf("the late batch executed: the word reads %q", got)
	}
	if !c.Crashed() {
		t.Error("the client whose posted batch came late did not crash")
	}
	if err := c.Read(ctx, a, make([]byte, 8)); !errors.Is(err, remote.ErrCrashed) || errors.Is(err, remote.ErrLate) {
		t.Errorf("a call of the crashed client: %v, want ErrCrashed and not ErrLate", err)
	}
	if got := read(other); got != "in time!" || other.Crashed() {
		t.Errorf("another client of the connection reads %q (crashed: %v), want \"in time!\" and no crash", got, other.Crashed())
	}
}

// delayProxy forwards connections to addr through 127.0.0.1, holding each
// chunk a client sends for hold before passing it on (the replies pass at
// once). It returns its address; everything is closed when the test ends.
func delayProxy(t *testing.T, addr string, hold *atomic.Int64) string {
	t.Helper()
	return delayBothProxy(t, addr, hold, new(atomic.Int64))
}

// delayBothProxy is delayProxy holding what the server sends for back.
func delayBothProxy(t *testing.T, addr string, hold, back *atomic.Int64) string {
	t.Helper()
	pipe := func(dst, src net.Conn, hold *atomic.Int64) {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(time.Duration(hold.Load()))
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	return serveTest(t, func(nc net.Conn) {
		defer nc.Close()
		up, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer up.Close()
		go func() {
			pipe(nc, up, back)
			nc.Close()
		}()
		pipe(up, nc, hold)
	}).Addr().String()
}

// TestTCPDoByNoDeadline: a DoBy whose deadline is effectively none
// (math.MaxInt64, as the trees pass for a takeover the registry already
// judged) executes over tcp. A first version converted it to the server's
// clock with an overflow, and every such batch came back ErrLate
// (TestPausedMemoryNode: locks never taken over).
func TestTCPDoByNoDeadline(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{ts.addr}, Token: testToken}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := p.NewComputeNode().NewClient()
	ctx := t.Context()
	a, err := c.Alloc(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DoBy(ctx, []remote.Op{remote.Write(a, []byte("no limit"))}, math.MaxInt64); err != nil {
		t.Fatalf("DoBy without a deadline: %v", err)
	}
}

// TestTCPSlowWelcome: a welcome that reaches the client late (a memory
// node stopped between reading its clock for it and sending it) would
// make every deadline converted with that reading early by the delay, and
// the node refuse every batch as late. The link keeps no clock reading
// from a handshake slower than a few milliseconds, so a batch in time
// runs, and asks for the clock again until a reading comes back fast: the
// memory node's check then holds on that link too (before, a link kept
// the client's check alone for its life).
func TestTCPSlowWelcome(t *testing.T) {
	f := newProxied(t, 1, 300*time.Millisecond)
	ctx, c, a, back := t.Context(), f.c, f.a[0], &f.back
	back.Store(0)
	if err := c.DoBy(ctx, []remote.Op{remote.Write(a, []byte("in time!"))}, c.Now()+100*time.Millisecond); err != nil {
		t.Fatalf("DoBy with 100 ms to go on a link whose welcome came 300 ms late: %v", err)
	}
	// The link's readings of the clock come 50, 100, 200, 400 ms … apart:
	// the node refuses late frames once one comes back fast (on a loaded
	// machine a reading can take more than 5 ms, so several tries).
	f.enforced(t)
}

// TestTCPDoByPartlyLate: a DoBy batch over two memory nodes whose part for
// one reaches it late, while the other executes its own in time, has an
// outcome that is neither all nor nothing: it fails with ErrUnavailable,
// not ErrLate (which says nothing was executed), and its client crashes
// (Client.Crashed), as after any batch whose outcome it cannot know.
func TestTCPDoByPartlyLate(t *testing.T) {
	f := newProxied(t, 2, 0)
	ctx, c, addrs, hold := t.Context(), f.c, f.a, &f.hold
	err := late(ctx, c, hold, remote.Write(addrs[0], []byte("too late")), remote.Write(addrs[1], []byte("in time!")))
	if !errors.Is(err, remote.ErrUnavailable) || errors.Is(err, remote.ErrLate) {
		t.Errorf("DoBy executed on one memory node and refused as late on the other: %v, want ErrUnavailable and not ErrLate", err)
	}
	if !c.Crashed() {
		t.Error("the client did not crash")
	}
	r := f.p.NewComputeNode().NewClient()
	for mn, want := range []string{"\x00\x00\x00\x00\x00\x00\x00\x00", "in time!"} {
		buf := make([]byte, 8)
		if err := r.Read(ctx, addrs[mn], buf); err != nil {
			t.Fatal(err)
		}
		if string(buf) != want {
			t.Errorf("memory node %d: the word reads %q, want %q", mn, buf, want)
		}
	}
}

// TestTCPDoByAfterSlowDial: a DoBy whose deadline passes while it waits
// for its connection to be dialled (here the welcome comes 300 ms late, as
// from a memory node stopped meanwhile) sends nothing and returns ErrLate.
// Before, the deadline was checked only before the wait, and the WRITE
// ran 550 ms past it (a new-user pass: 10 runs of 10).
func TestTCPDoByAfterSlowDial(t *testing.T) {
	f := newProxied(t, 1, 0)
	ctx, c, a, back, p := t.Context(), f.c, f.a[0], &f.back, f.p
	fresh := p.NewComputeNode().NewClient() // its connection is dialled by its first batch
	err := late(ctx, fresh, back, remote.Write(a, []byte("too late")))
	if !errors.Is(err, remote.ErrLate) || fresh.Crashed() {
		t.Errorf("DoBy whose connection came up after its deadline: %v (crashed: %v), want ErrLate", err, fresh.Crashed())
	}
	buf := make([]byte, 8)
	if err := c.Read(ctx, a, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) == "too late" {
		t.Fatal("the late batch executed")
	}
}

// TestTCPPostThenLateDoBy: a DoBy that the memory node refuses as late
// after the client posted verbs unsignaled on the same connection returns
// ErrLate without crashing the client: the node answered, so it ran the
// posted verbs first. Before, any error but a context's was taken for a
// broken connection that may have lost them, and the client crashed.
func TestTCPPostThenLateDoBy(t *testing.T) {
	f := newProxied(t, 1, 0)
	ctx, c, a, hold := t.Context(), f.c, f.a[0], &f.hold
	if err := c.Post(ctx, []remote.Op{remote.Write(a, []byte("posted!!"))}); err != nil {
		t.Fatal(err)
	}
	err := late(ctx, c, hold, remote.Write(a.Add(8), []byte("too late")))
	if !errors.Is(err, remote.ErrLate) || c.Crashed() {
		t.Fatalf("a late DoBy after a Post: %v (crashed: %v), want ErrLate", err, c.Crashed())
	}
	buf := make([]byte, 16)
	if err := c.Read(ctx, a, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf[:8]) != "posted!!" || string(buf[8:]) == "too late" {
		t.Fatalf("memory reads %q, want the posted WRITE and not the late one", buf)
	}
}

// TestTCPDoByLateWriteReadRan: a batch whose WRITE part one memory node
// refuses as late, while another ran only a READ, changed no memory: it
// returns ErrLate and its client does not crash.
func TestTCPDoByLateWriteReadRan(t *testing.T) {
	f := newProxied(t, 2, 0)
	ctx, c, addrs, hold := t.Context(), f.c, f.a, &f.hold
	err := late(ctx, c, hold, remote.Write(addrs[0], []byte("too late")), remote.Read(addrs[1], make([]byte, 8)))
	if !errors.Is(err, remote.ErrLate) || c.Crashed() {
		t.Fatalf("a late WRITE beside a READ that ran: %v (crashed: %v), want ErrLate", err, c.Crashed())
	}
}

// late runs ops on c with DoBy and 50 ms left to the deadline, while
// delay (a proxied fixture's hold or back) holds memory node 0's traffic
// that way for 300 ms: a batch that reaches the node, or whose
// connection comes up, after its deadline.
func late(ctx context.Context, c *remote.Client, delay *atomic.Int64, ops ...remote.Op) error {
	delay.Store(int64(300 * time.Millisecond))
	defer delay.Store(0)
	return c.DoBy(ctx, ops, c.Now()+50*time.Millisecond)
}

// proxied is a tcp pool whose memory node 0 is reached through a
// delayBothProxy (hold: what clients send; back: what the node answers)
// and, with two nodes, whose memory node 1 is reached directly, with one
// connection per compute node and memory node (the clients of a compute
// node share it); c is a client of it and a[i] 16 bytes it allocated on
// memory node i.
type proxied struct {
	p          *remote.Pool
	c          *remote.Client
	a          []remote.Addr
	hold, back atomic.Int64
}

// newProxied makes a proxied pool of nodes memory nodes whose proxy holds
// the node's answers for welcome while the pool connects, closed when the
// test ends. Without a welcome held, it returns once memory node 0
// refuses c's late batches: a link keeps the node's clock only from a
// handshake under 5 ms, which a loaded machine misses (then only the
// client checks deadlines until the link reads the clock again), and the
// tests of late batches are about a link that has it.
func newProxied(t *testing.T, nodes int, welcome time.Duration) *proxied {
	t.Helper()
	f := new(proxied)
	f.back.Store(int64(welcome))
	addrs := []string{delayBothProxy(t, startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip}).addr, &f.hold, &f.back)}
	if nodes > 1 {
		addrs = append(addrs, startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip}).addr)
	}
	var err error
	if f.p, err = remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: addrs, Token: testToken, Conns: 1, Timeout: 10 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.p.Close() })
	f.c = f.p.NewComputeNode().NewClient()
	for mn := range nodes {
		a, err := f.c.AllocOn(t.Context(), mn, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		f.a = append(f.a, a)
	}
	if welcome == 0 {
		f.enforced(t)
	}
	return f
}

// enforced waits until memory node 0 refuses a late batch of f.c (a
// WRITE to a word of its own), for up to 15 tries a second apart: the
// link's readings of the node's clock, which a probe's 300 ms hold would
// make slow, mostly come while the proxy holds nothing.
func (f *proxied) enforced(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	probe, err := f.c.AllocOn(ctx, 0, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	for range 15 {
		err := late(ctx, f.c, &f.hold, remote.Write(probe, []byte("probe!!!")))
		if errors.Is(err, remote.ErrLate) {
			return
		}
		if err != nil {
			t.Fatalf("a late probe: %v", err)
		}
		time.Sleep(time.Second)
	}
	t.Fatal("memory node 0 never refused a late batch in 15 tries (no fast reading of its clock)")
}
