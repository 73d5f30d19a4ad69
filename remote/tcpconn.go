package remote

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// tcpConn is one connection slot to a memory node: the current link, dialled
// on first use and again after it breaks.
type tcpConn struct {
	t    *tcpTransport
	mn   int
	addr string

	mu     sync.Mutex // guards link, closed, and the send state of links
	link   *tcpLink   // nil while down
	gen    uint64     // generation of the latest link
	closed bool
}

// tcpLink is one TCP connection (one generation of a tcpConn). Senders
// append frames to out; the first sender that finds no write in progress
// becomes the writer and writes out until it is empty, so frames of
// concurrent senders leave in one system call (write combining). A reader
// goroutine hands each reply to its call.
type tcpLink struct {
	c   *tcpConn
	nc  net.Conn
	gen uint64

	out, spare []byte // guarded by c.mu
	writing    bool   // guarded by c.mu

	pmu     sync.Mutex
	pending map[uint64]*tcpCall
	nextID  uint64
	dead    error // set when the link failed; no call is registered after
}

// tcpCall is one request waiting for its reply.
type tcpCall struct {
	done     chan error
	timer    *time.Timer
	link     *tcpLink // the link it was sent on
	ops      []Op     // batch: where results go
	idx      []int32  // batch: the verbs of ops this node executes (nil: all)
	rpc      rpcReply
	isRPC    bool
	fabric   bool           // a frameFabric request
	endpoint fabricEndpoint // its reply
}

func newTCPCall() *tcpCall {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &tcpCall{done: make(chan error, 1), timer: t}
}

// call sends a two-sided request on the connection and waits for the reply.
func (c *tcpConn) call(_ context.Context, req *rpcRequest) (rpcReply, error) {
	return c.callWith(newTCPCall(), req)
}

func (c *tcpConn) callWith(call *tcpCall, req *rpcRequest) (rpcReply, error) {
	call.isRPC = true
	payload := appendRPC(nil, req)
	if _, err := c.write(call, frameHeader{typ: frameRPC, flags: flagSignaled}, len(payload), func(b []byte) []byte {
		return append(b, payload...)
	}, 0); err != nil {
		return rpcReply{}, err
	}
	if err := c.await(call); err != nil {
		return rpcReply{}, err
	}
	return call.rpc, nil
}

// post sends call's batch. If lastPosted is not 0, the client's previous
// batch to this node was unsignaled and sent on that link generation: if
// the connection was redialled since, those verbs may be lost, and the
// batch fails with ErrUnavailable instead of running after them as if they
// had executed. It returns the generation used.
func (c *tcpConn) post(call *tcpCall, signaled bool, lastPosted uint64) (uint64, error) {
	h := frameHeader{typ: frameBatch}
	if signaled {
		h.flags = flagSignaled
	}
	n, size := 0, 4
	each := func(f func(o *Op)) {
		if call.idx == nil {
			for i := range call.ops {
				f(&call.ops[i])
			}
			return
		}
		for _, i := range call.idx {
			f(&call.ops[i])
		}
	}
	each(func(o *Op) { n++; size += verbWireBytes(o) })
	if size > maxFrame {
		return 0, fmt.Errorf("%w: a batch of %d bytes to one memory node (at most %d)", ErrBadRequest, size, maxFrame)
	}
	rcall := call
	if !signaled {
		rcall = nil
	}
	return c.write(rcall, h, size, func(b []byte) []byte {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		each(func(o *Op) { b = appendVerb(b, o) })
		return b
	}, lastPosted)
}

// write sends one frame, registering call (if not nil) for its reply; enc
// appends the payload of size bytes. It returns the link generation used.
func (c *tcpConn) write(call *tcpCall, h frameHeader, size int, enc func([]byte) []byte, lastPosted uint64) (uint64, error) {
	c.mu.Lock()
	l, err := c.ensure()
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if lastPosted != 0 && lastPosted != l.gen {
		c.mu.Unlock()
		return 0, fmt.Errorf("%w: memory node %d: the connection failed after unsignaled verbs were posted; they may be lost", ErrUnavailable, c.mn)
	}
	if call != nil {
		if h.id, err = l.register(call); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		call.timer.Reset(c.t.cfg.Timeout)
	}
	start := len(l.out)
	var zero [headerBytes]byte
	l.out = enc(append(l.out, zero[:]...))
	putHeader(l.out[start:], size, h)
	if l.writing {
		c.mu.Unlock()
		return l.gen, nil
	}
	l.writing = true
	// Let the goroutines that are ready to send (typically those a burst of
	// replies just woke) append their frames first, so that they leave in
	// this write: on a busy compute node one system call then carries many
	// requests.
	c.mu.Unlock()
	runtime.Gosched()
	c.mu.Lock()
	for len(l.out) > 0 {
		data := l.out
		l.out, l.spare = l.spare[:0], nil
		c.mu.Unlock()
		l.nc.SetWriteDeadline(time.Now().Add(c.t.cfg.Timeout))
		_, err := l.nc.Write(data)
		c.mu.Lock()
		l.spare = data[:0]
		if err != nil {
			// The reader fails every pending call, this one included, and
			// the next sender dials a new link.
			l.out = l.out[:0]
			l.nc.Close()
			break
		}
	}
	l.writing = false
	c.mu.Unlock()
	return l.gen, nil
}

// register records call as waiting for the reply to a new request id.
func (l *tcpLink) register(call *tcpCall) (uint64, error) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if l.dead != nil {
		return 0, l.dead
	}
	l.nextID++
	l.pending[l.nextID] = call
	call.link = l
	return l.nextID, nil
}

// await waits for call's reply. A node that does not answer within the
// timeout has its connection closed, which fails every request pending on
// it with ErrUnavailable.
func (c *tcpConn) await(call *tcpCall) error {
	select {
	case err := <-call.done:
		call.timer.Stop()
		return err
	case <-call.timer.C:
		call.link.nc.Close()
		return <-call.done
	}
}

// ensure returns the live link, dialling one if there is none. Called with
// c.mu held.
func (c *tcpConn) ensure() (*tcpLink, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.link != nil {
		return c.link, nil
	}
	cfg := &c.t.cfg
	nc, err := net.DialTimeout("tcp", c.addr, cfg.DialTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	}
	var verify *rpcRequest
	if c.t.pool != 0 {
		// Every connection after the pool joined checks that the node is
		// still the one it joined: a server restarted without its file
		// would otherwise serve empty memory as if nothing had happened.
		verify = &rpcRequest{Kind: rpcJoin, Pool: c.t.pool, Index: c.mn, Nodes: len(c.t.addrs)}
	}
	if err := handshake(nc, cfg.Token, cfg.DialTimeout, verify); err != nil {
		nc.Close()
		return nil, fmt.Errorf("memory node %d (%s): %w", c.mn, c.addr, err)
	}
	c.gen++
	c.link = &tcpLink{c: c, nc: nc, gen: c.gen, pending: map[uint64]*tcpCall{}}
	go c.link.readLoop()
	return c.link, nil
}

// handshake authenticates a new connection and, if verify is set, sends
// it as a first request and returns its error.
func handshake(nc net.Conn, token string, timeout time.Duration, verify *rpcRequest) error {
	nc.SetDeadline(time.Now().Add(timeout))
	defer nc.SetDeadline(time.Time{})
	b := make([]byte, headerBytes, headerBytes+2+len(token))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(token)))
	b = append(b, token...)
	putHeader(b, 2+len(token), frameHeader{typ: frameHello})
	if verify != nil {
		p := appendRPC(nil, verify)
		var h [headerBytes]byte
		putHeader(h[:], len(p), frameHeader{typ: frameRPC, flags: flagSignaled})
		b = append(append(b, h[:]...), p...)
	}
	if _, err := nc.Write(b); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	status, _, err := readReply(nc, frameWelcome)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: the server closed the connection during the handshake", ErrAuth)
		}
		return fmt.Errorf("%w: handshake: %v", ErrUnavailable, err)
	}
	if status != nil || verify == nil {
		return status
	}
	status, _, err = readReply(nc, frameRPCOK)
	if err != nil {
		return fmt.Errorf("%w: handshake: %v", ErrUnavailable, err)
	}
	return status
}

// readReply reads one reply frame of type typ synchronously and returns its
// status and the rest of its payload.
func readReply(r io.Reader, typ uint8) (status error, rest []byte, err error) {
	var hdr [headerBytes]byte
	h, n, err := readHeader(r, hdr[:])
	if err != nil {
		return nil, nil, err
	}
	if h.typ != typ || n > 1<<20 {
		return nil, nil, fmt.Errorf("%w: reply of type %d and %d bytes, want type %d", ErrUnavailable, h.typ, n, typ)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	status, rest, err = decodeStatus(p)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return status, rest, nil
}

// shut closes the connection for good (Pool.Close).
func (c *tcpConn) shut() {
	c.mu.Lock()
	c.closed = true
	l := c.link
	c.mu.Unlock()
	if l != nil {
		l.nc.Close()
	}
}

// readLoop delivers the link's replies until it fails, then fails every
// pending call and takes the link down so that the next send redials.
func (l *tcpLink) readLoop() {
	br := bufio.NewReaderSize(l.nc, 64<<10)
	var hdr [headerBytes]byte
	var payload []byte
	var err error
	for {
		var h frameHeader
		var n int
		if h, n, err = readHeader(br, hdr[:]); err != nil {
			break
		}
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err = io.ReadFull(br, payload); err != nil {
			break
		}
		l.pmu.Lock()
		call := l.pending[h.id]
		delete(l.pending, h.id)
		l.pmu.Unlock()
		if call == nil {
			err = fmt.Errorf("%w: reply to unknown request %d", errBadFrame, h.id)
			break
		}
		call.done <- call.decode(h, payload)
	}
	l.nc.Close()
	c := l.c
	c.mu.Lock()
	if c.link == l {
		c.link = nil
	}
	closed := c.closed
	c.mu.Unlock()
	fail := fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	if closed {
		fail = ErrClosed
	}
	l.pmu.Lock()
	l.dead = fail
	for id, call := range l.pending {
		delete(l.pending, id)
		call.done <- fail
	}
	l.pmu.Unlock()
}

// decode stores a reply's results in the call and returns the status.
func (call *tcpCall) decode(h frameHeader, p []byte) error {
	status, rest, err := decodeStatus(p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if status != nil {
		return status
	}
	switch {
	case call.fabric && h.typ == frameFabric:
		call.endpoint, err = decodeFabricEndpoint(rest)
	case call.isRPC && h.typ == frameRPCOK:
		call.rpc, err = decodeRPCReply(rest)
	case !call.isRPC && h.typ == frameBatchOK:
		err = decodeReplies(rest, call.ops, call.idx)
	default:
		err = fmt.Errorf("%w: reply of type %d", errBadFrame, h.typ)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}
