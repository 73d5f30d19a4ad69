package remote_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// The wire format as documented at the top of remote/wire.go, rebuilt here
// from that comment so that these tests do not share code with the
// implementation they attack.
const (
	rawVersion       = 4
	rawMaxFrame      = 64 << 20
	rawMaxBatchVerbs = 1 << 16
	rawHeader        = 16 // length word + version + type + flags + id

	rawHello   = 1
	rawWelcome = 2
	rawBatch   = 3
	rawBatchOK = 4
	rawRPC     = 5
	rawRPCOK   = 6
	rawBatchBy = 8
	rawClock   = 9
	rawLate    = 10

	rawSignaled = 1

	kindRead, kindWrite, kindCAS, kindFAA = 1, 2, 3, 4

	rpcAlloc, rpcNamed, rpcJoin, rpcInfo = 1, 2, 3, 4

	onChipBit = 1 << 47
)

// Status codes of a reply: the position of the sentinel in wire.go's table.
const (
	codeOK = iota
	codeOutOfBounds
	codeMisaligned
	codeUnknownNode
	codeNilAddr
	codeOutOfMemory
	codeClosed
	codeBadRequest
	codeBadNode
	codeAuth
	codeUnavailable
	codeLate
)

const testToken = "adversarial-token"

// rawFrame builds one frame with an explicit protocol version.
func rawFrame(version, typ byte, flags uint16, id uint64, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(rawHeader-4+len(payload)))
	b = append(b, version, typ)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint64(b, id)
	return append(b, payload...)
}

// helloPayload is the payload of a hello frame presenting token.
func helloPayload(token string) []byte {
	return append(binary.LittleEndian.AppendUint16(nil, uint16(len(token))), token...)
}

// verb is one verb of a raw batch. n is the length field sent on the wire;
// data the bytes a WRITE carries (which a malformed frame may make differ
// from n).
type verb struct {
	kind     byte
	addr     uint64
	n        uint32
	data     []byte
	cmp, swp uint64
}

func rdV(addr uint64, n uint32) verb { return verb{kind: kindRead, addr: addr, n: n} }
func wrV(addr uint64, data []byte) verb {
	return verb{kind: kindWrite, addr: addr, n: uint32(len(data)), data: data}
}
func casV(addr uint64, c, s uint64) verb {
	return verb{kind: kindCAS, addr: addr, n: 8, cmp: c, swp: s}
}
func faaV(addr uint64, d uint64) verb { return verb{kind: kindFAA, addr: addr, n: 8, swp: d} }

// appendRawVerb appends v as the wire format lays out a verb of its kind;
// an unknown kind carries no operands.
func appendRawVerb(b []byte, v verb) []byte {
	b = append(b, v.kind)
	b = binary.LittleEndian.AppendUint64(b, v.addr)
	b = binary.LittleEndian.AppendUint32(b, v.n)
	switch v.kind {
	case kindWrite:
		b = append(b, v.data...)
	case kindCAS:
		b = binary.LittleEndian.AppendUint64(b, v.cmp)
		b = binary.LittleEndian.AppendUint64(b, v.swp)
	case kindFAA:
		b = binary.LittleEndian.AppendUint64(b, v.swp)
	}
	return b
}

// batchPayload is a batch of vs.
func batchPayload(vs ...verb) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(vs)))
	for _, v := range vs {
		b = appendRawVerb(b, v)
	}
	return b
}

// rpcPayload is an rpc request as wire.go lays it out. index is the 8
// bytes of the node index (u32) and the pool's node count (u32): see
// place.
func rpcPayload(kind byte, size, align, orSize, orAlign, pool, index uint64, flags byte, name string) []byte {
	b := []byte{kind}
	for _, v := range []uint64{size, align, orSize, orAlign, pool, index} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// place is the index field of a join: node index of a pool of nodes memory
// nodes.
func place(index, nodes uint64) uint64 { return index | nodes<<32 }

// rawReply is one frame received from a server.
type rawReply struct {
	typ     byte
	flags   uint16
	id      uint64
	payload []byte
}

// status splits a reply payload into its status code, message and the rest.
func (f rawReply) status() (code byte, msg string, rest []byte, err error) {
	p := f.payload
	if len(p) < 1 {
		return 0, "", nil, errors.New("reply without a status")
	}
	if p[0] == codeOK {
		return 0, "", p[1:], nil
	}
	if len(p) < 3 {
		return 0, "", nil, fmt.Errorf("status %d without a message length", p[0])
	}
	n := int(binary.LittleEndian.Uint16(p[1:]))
	if len(p) < 3+n {
		return 0, "", nil, fmt.Errorf("status %d with a message of %d bytes in %d", p[0], n, len(p)-3)
	}
	return p[0], string(p[3 : 3+n]), p[3+n:], nil
}

// rawConn is a hostile client: it speaks frames it builds itself.
type rawConn struct {
	t     testing.TB
	nc    net.Conn
	br    *bufio.Reader
	id    uint64
	clock uint64 // the server's clock, from its welcome
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// authed returns a raw connection that presented the right token.
func authed(t testing.TB, addr string) *rawConn {
	t.Helper()
	r := dialRaw(t, addr)
	if code, msg := r.hello(testToken); code != codeOK {
		t.Fatalf("hello with the right token: status %d %q", code, msg)
	}
	return r
}

func (r *rawConn) send(b []byte) error {
	r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := r.nc.Write(b)
	return err
}

func (r *rawConn) mustSend(b []byte) {
	r.t.Helper()
	if err := r.send(b); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// read reads one frame within timeout.
func (r *rawConn) read(timeout time.Duration) (rawReply, error) {
	r.nc.SetReadDeadline(time.Now().Add(timeout))
	var h [rawHeader]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return rawReply{}, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n < rawHeader-4 || n > rawMaxFrame {
		return rawReply{}, fmt.Errorf("server sent a frame of length %d", n)
	}
	if h[4] != rawVersion {
		return rawReply{}, fmt.Errorf("server sent protocol version %d", h[4])
	}
	f := rawReply{typ: h[5], flags: binary.LittleEndian.Uint16(h[6:]), id: binary.LittleEndian.Uint64(h[8:]),
		payload: make([]byte, n-(rawHeader-4))}
	if _, err := io.ReadFull(r.br, f.payload); err != nil {
		return rawReply{}, fmt.Errorf("truncated frame from the server: %w", err)
	}
	return f, nil
}

// hello presents token and returns the welcome's status.
func (r *rawConn) hello(token string) (byte, string) {
	r.t.Helper()
	r.mustSend(rawFrame(rawVersion, rawHello, 0, 0, helloPayload(token)))
	f, err := r.read(5 * time.Second)
	if err != nil {
		r.t.Fatalf("no welcome: %v", err)
	}
	if f.typ != rawWelcome {
		r.t.Fatalf("answer to hello has type %d, want %d", f.typ, rawWelcome)
	}
	code, msg, rest, err := f.status()
	if err != nil {
		r.t.Fatalf("welcome: %v", err)
	}
	if code == codeOK {
		if len(rest) != 8 {
			r.t.Fatalf("welcome: %d bytes after the status, want the server's clock (8)", len(rest))
		}
		r.clock = binary.LittleEndian.Uint64(rest)
	}
	return code, msg
}

// call sends one signaled frame and returns its reply; ok is false if the
// server closed the connection instead of answering.
func (r *rawConn) call(typ byte, payload []byte) (f rawReply, ok bool) {
	r.t.Helper()
	r.id++
	id := r.id
	if err := r.send(rawFrame(rawVersion, typ, rawSignaled, id, payload)); err != nil {
		return rawReply{}, false
	}
	f, err := r.read(5 * time.Second)
	if err != nil {
		if isTimeout(err) {
			r.t.Fatalf("no answer to frame %d within 5 s", id)
		}
		return rawReply{}, false
	}
	want := map[byte]byte{rawBatch: rawBatchOK, rawRPC: rawRPCOK}[typ]
	if f.typ != want || f.id != id {
		r.t.Fatalf("answer to frame %d of type %d: frame %d of type %d", id, typ, f.id, f.typ)
	}
	return f, true
}

// do runs a signaled batch and returns its status and results; ok is false
// if the server closed the connection instead.
func (r *rawConn) do(vs ...verb) (code byte, msg string, results []byte, ok bool) {
	r.t.Helper()
	f, ok := r.call(rawBatch, batchPayload(vs...))
	if !ok {
		return 0, "", nil, false
	}
	code, msg, results, err := f.status()
	if err != nil {
		r.t.Fatalf("batch reply: %v", err)
	}
	return code, msg, results, true
}

// mustDo runs a batch that must succeed and returns its results.
func (r *rawConn) mustDo(vs ...verb) []byte {
	r.t.Helper()
	code, msg, res, ok := r.do(vs...)
	if !ok {
		r.t.Fatal("connection closed on a valid batch")
	}
	if code != codeOK {
		r.t.Fatalf("valid batch refused: status %d %q", code, msg)
	}
	return res
}

// expectClosed reads until the server closes the connection and returns the
// frames it sent first; it fails if the connection stays open for timeout.
func (r *rawConn) expectClosed(timeout time.Duration) []rawReply {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	var got []rawReply
	for {
		f, err := r.read(time.Until(deadline))
		if err == nil {
			got = append(got, f)
			continue
		}
		if isTimeout(err) {
			r.t.Fatalf("connection still open after %v (frames received: %d)", timeout, len(got))
		}
		return got
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// testServer is an in-process memory-node server on 127.0.0.1.
type testServer struct {
	srv  *remote.Server
	addr string
	log  *syncBuffer
}

// startServer serves cfg (Token, and without a File a 1 MiB main region
// and a 4 KiB on-chip region by default) on a free port of 127.0.0.1 until
// the end of the test; Serve must return nil after Close.
func startServer(t testing.TB, cfg remote.ServerConfig) *testServer {
	t.Helper()
	return serveAt(t, "127.0.0.1:0", cfg)
}

// serveAt is startServer listening on addr (a server restarted where
// another was).
func serveAt(t testing.TB, addr string, cfg remote.ServerConfig) *testServer {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.Bytes == 0 && cfg.File == "" {
		cfg.Bytes = 1 << 20
	}
	if cfg.OnChipBytes == 0 && cfg.File == "" {
		cfg.OnChipBytes = 4096
	}
	ts := &testServer{log: &syncBuffer{}}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := remote.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10 s of Close")
		}
	})
	ts.srv, ts.addr = srv, l.Addr().String()
	return ts
}

// syncBuffer collects a server's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tcpPool opens a pool on the servers at addrs, closed at the end of the
// test.
func tcpPool(t testing.TB, addrs ...string) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: addrs, Token: testToken,
		DialTimeout: 3 * time.Second, Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// canary is memory a legitimate client filled with a known pattern: a
// block of the main region and the whole on-chip region.
type canary struct {
	c      *remote.Client
	main   remote.Addr
	mainB  []byte
	chipB  []byte
	chipSz int
}

const canaryBytes = 4096

func newCanary(t testing.TB, p *remote.Pool) *canary {
	t.Helper()
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	a, err := c.AllocOn(ctx, 0, canaryBytes, 4096)
	if err != nil {
		t.Fatal(err)
	}
	k := &canary{c: c, main: a, mainB: make([]byte, canaryBytes), chipSz: p.Config().OnChipBytes}
	for i := range k.mainB {
		k.mainB[i] = byte(0xA5 ^ i*7)
	}
	k.chipB = make([]byte, k.chipSz)
	for i := range k.chipB {
		k.chipB[i] = byte(0x3C ^ i*13)
	}
	if err := c.Write(ctx, a, k.mainB); err != nil {
		t.Fatal(err)
	}
	if k.chipSz > 0 {
		if err := c.Write(ctx, remote.OnChip(0, 0), k.chipB); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// off is the canary block's offset in the main region.
func (k *canary) off() uint64 { return k.main.Offset() }

// word returns the canary's i-th 8-byte word.
func (k *canary) word(i int) uint64 { return binary.LittleEndian.Uint64(k.mainB[8*i:]) }

// check fails the test if a byte of the canary changed.
func (k *canary) check(t testing.TB, after string) {
	t.Helper()
	ctx := context.Background()
	got := make([]byte, canaryBytes)
	if err := k.c.Read(ctx, k.main, got); err != nil {
		t.Fatalf("after %s: reading the canary: %v", after, err)
	}
	if i := firstDiff(got, k.mainB); i >= 0 {
		t.Fatalf("after %s: main-region canary byte %d is %#x, want %#x", after, i, got[i], k.mainB[i])
	}
	if k.chipSz > 0 {
		got = make([]byte, k.chipSz)
		if err := k.c.Read(ctx, remote.OnChip(0, 0), got); err != nil {
			t.Fatalf("after %s: reading the on-chip canary: %v", after, err)
		}
		if i := firstDiff(got, k.chipB); i >= 0 {
			t.Fatalf("after %s: on-chip canary byte %d is %#x, want %#x", after, i, got[i], k.chipB[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
