package remote

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// tcpTransport reaches memnode servers over TCP. Verbs travel as frames on
// a few connections per compute node and memory node; each client always
// uses the same connection to a memory node, and a server executes a
// connection's frames in order, so a client's verbs to one node execute in
// posting order (the RC queue pair's guarantee). Requests of many clients
// are pipelined on a connection; a reader goroutine per connection hands
// each reply to its caller. Waits, signals and time are the local
// transport's.
type tcpTransport struct {
	*local
	cfg   TCPConfig
	addrs []string
	pool  uint64     // the pool id every memory node carries
	admin []*tcpConn // one per memory node, for pool-level requests

	mu  sync.Mutex
	cns [][][]*tcpConn // per compute node, per memory node: Conns connections
}

// netClient is a client's state on a network transport: a reusable call
// per memory node and, per memory node, the connection generation of its
// last unsignaled batch not yet followed by a completed signaled one.
type netClient struct {
	calls  []*tcpCall
	posted []uint64
	idx    [][]int32 // scratch: per memory node, the verbs of a batch
}

// tcpConn is one connection to a memory node, redialled when it breaks.
type tcpConn struct {
	t    *tcpTransport
	mn   int
	addr string

	wmu     sync.Mutex // the send side: dialling, encoding, flushing
	waiting atomic.Int32
	bw      *bufio.Writer
	scratch []byte

	nmu    sync.Mutex // guards the three fields below; never held across I/O
	nc     net.Conn   // nil while down
	gen    uint64     // incremented by every successful dial
	closed bool

	pmu     sync.Mutex
	pending map[uint64]*tcpCall
	nextID  uint64
}

// tcpCall is one request waiting for its reply.
type tcpCall struct {
	done  chan error
	timer *time.Timer
	ops   []Op    // batch: where results go
	idx   []int32 // batch: the verbs of ops this node executes (nil: all)
	rpc   rpcReply
	isRPC bool
}

func newTCPCall() *tcpCall {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &tcpCall{done: make(chan error, 1), timer: t}
}

// normalizedNet fills in the defaults shared by TCPConfig and FabricConfig.
func normalizedNet(addrs []string, token *string, conns *int, dial, timeout *time.Duration, cfg *Config) error {
	if len(addrs) == 0 || len(addrs) > MaxMemoryNodes {
		return fmt.Errorf("%w: %d memory node addresses", ErrBadRequest, len(addrs))
	}
	if cfg.MemoryNodes != 0 && cfg.MemoryNodes != len(addrs) {
		return fmt.Errorf("%w: MemoryNodes %d but %d addresses", ErrBadRequest, cfg.MemoryNodes, len(addrs))
	}
	if *token == "" {
		*token = os.Getenv("DMINDEX_TOKEN")
	}
	if *token == "" || len(*token) > maxToken {
		return fmt.Errorf("%w: a token of 1..%d bytes is needed (Token or DMINDEX_TOKEN)", ErrBadRequest, maxToken)
	}
	if *conns == 0 {
		*conns = 2
	}
	if *conns < 0 || *conns > 64 {
		return fmt.Errorf("%w: Conns %d not in 1..64", ErrBadRequest, *conns)
	}
	if *dial <= 0 {
		*dial = 5 * time.Second
	}
	if *timeout <= 0 {
		*timeout = 10 * time.Second
	}
	return nil
}

// dialTCP connects to every memory node of cfg, joins them into one pool
// and learns their geometry.
func (p *Pool) dialTCP(cfg TCPConfig) error {
	if err := normalizedNet(cfg.MemoryNodes, &cfg.Token, &cfg.Conns, &cfg.DialTimeout, &cfg.Timeout, &p.cfg); err != nil {
		return err
	}
	t := &tcpTransport{local: newLocal(p), cfg: cfg, addrs: cfg.MemoryNodes}
	p.cfg.TCP = &t.cfg
	pool, err := p.joinNodes(len(t.addrs), func(mn int) rpcCaller { return t.adminConn(mn) })
	if err != nil {
		t.close()
		return fmt.Errorf("memory node %w", err)
	}
	t.pool, p.t = pool, t
	return nil
}

// rpcCaller sends one two-sided request to a memory node.
type rpcCaller interface {
	call(ctx context.Context, req *rpcRequest) (rpcReply, error)
}

// joinNodes stamps the n memory nodes into one pool (node 0 decides the
// pool id), checks that each is listed at its position and has the
// configured sizes, adopts their geometry, and returns the pool id.
func (p *Pool) joinNodes(n int, conn func(mn int) rpcCaller) (uint64, error) {
	pool := rand.Uint64() | 1
	for i := range n {
		r, err := conn(i).call(context.Background(), &rpcRequest{Kind: rpcJoin, Pool: pool, Adopt: i == 0, Index: i, Create: true})
		if err != nil {
			return 0, fmt.Errorf("%d: %w", i, err)
		}
		c := p.cfg
		if g := r.Geom; (c.NodeBytes != 0 && uint64(c.NodeBytes) != g.main) || (c.OnChipBytes > 0 && uint64((c.OnChipBytes+7)&^7) != g.onChip) {
			return 0, fmt.Errorf("%d: %w: regions of %d and %d bytes, the configuration asks %d and %d",
				i, ErrBadNode, g.main, g.onChip, c.NodeBytes, c.OnChipBytes)
		}
		pool = r.Pool
		p.geom = append(p.geom, r.Geom)
	}
	return pool, p.adoptGeometry()
}

// adminConn returns the pool-level connection to memory node mn.
func (t *tcpTransport) adminConn(mn int) *tcpConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.admin) <= mn {
		t.admin = append(t.admin, t.newConn(len(t.admin)))
	}
	return t.admin[mn]
}

func (t *tcpTransport) newConn(mn int) *tcpConn {
	return &tcpConn{t: t, mn: mn, addr: t.addrs[mn], pending: map[uint64]*tcpCall{}}
}

func (t *tcpTransport) newClient(c *Client) {
	t.local.newClient(c)
	n := len(t.addrs)
	nc := &netClient{calls: make([]*tcpCall, n), posted: make([]uint64, n), idx: make([][]int32, n)}
	for i := range nc.calls {
		nc.calls[i] = newTCPCall()
	}
	c.net = nc
	t.mu.Lock()
	for len(t.cns) <= c.cn.id {
		t.cns = append(t.cns, nil)
	}
	if t.cns[c.cn.id] == nil {
		conns := make([][]*tcpConn, n)
		for mn := range conns {
			for range t.cfg.Conns {
				conns[mn] = append(conns[mn], t.newConn(mn))
			}
		}
		t.cns[c.cn.id] = conns
	}
	t.mu.Unlock()
}

// conn returns the connection client c uses to reach memory node mn.
func (t *tcpTransport) conn(c *Client, mn int) *tcpConn {
	t.mu.Lock()
	conns := t.cns[c.cn.id][mn]
	t.mu.Unlock()
	return conns[c.id%len(conns)]
}

func (t *tcpTransport) exec(_ context.Context, c *Client, ops []Op, signaled bool) error {
	nc := c.net
	first := ops[0].Addr.MN()
	single := true
	for i := range ops {
		if ops[i].Addr.MN() != first {
			single = false
			break
		}
	}
	if single {
		call := nc.calls[first]
		call.ops, call.idx = ops, nil
		if err := t.send(c, first, call, signaled); err != nil {
			return err
		}
		if !signaled {
			return nil
		}
		return t.await(c, first, call)
	}
	for mn := range nc.idx {
		nc.idx[mn] = nc.idx[mn][:0]
	}
	for i := range ops {
		mn := ops[i].Addr.MN()
		nc.idx[mn] = append(nc.idx[mn], int32(i))
	}
	var sent []int
	var err error
	for mn, idx := range nc.idx {
		if len(idx) == 0 {
			continue
		}
		call := nc.calls[mn]
		call.ops, call.idx = ops, idx
		if err = t.send(c, mn, call, signaled); err != nil {
			break
		}
		sent = append(sent, mn)
	}
	if !signaled {
		return err
	}
	for _, mn := range sent {
		if e := t.await(c, mn, nc.calls[mn]); err == nil {
			err = e
		}
	}
	return err
}

// send posts call's batch to memory node mn on c's connection.
func (t *tcpTransport) send(c *Client, mn int, call *tcpCall, signaled bool) error {
	call.isRPC = false
	gen, err := t.conn(c, mn).post(call, signaled, c.net.posted[mn])
	if err != nil {
		c.net.posted[mn] = 0
		return err
	}
	if signaled {
		c.net.posted[mn] = 0
	} else {
		c.net.posted[mn] = gen
	}
	return nil
}

// await waits for call's reply from memory node mn.
func (t *tcpTransport) await(c *Client, mn int, call *tcpCall) error {
	return t.conn(c, mn).await(call)
}

func (t *tcpTransport) rpc(ctx context.Context, c *Client, mn int, req *rpcRequest) (rpcReply, error) {
	return t.conn(c, mn).callWith(c.net.calls[mn], req)
}

func (t *tcpTransport) used(ctx context.Context, mn int) (uint64, error) {
	r, err := t.adminConn(mn).call(ctx, &rpcRequest{Kind: rpcInfo})
	return r.Used, err
}

func (t *tcpTransport) report() Report {
	r := t.local.report()
	r.Transport = "tcp"
	return r
}

func (t *tcpTransport) close() {
	t.local.close()
	t.mu.Lock()
	var all []*tcpConn
	all = append(all, t.admin...)
	for _, cn := range t.cns {
		for _, conns := range cn {
			all = append(all, conns...)
		}
	}
	t.mu.Unlock()
	for _, c := range all {
		c.shut()
	}
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
// batch to this node was unsignaled and sent on that connection
// generation: if the connection was redialled since, those verbs may be
// lost, and the batch fails with ErrUnavailable instead of running after
// them as if they had executed. It returns the generation used.
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

// write sends one frame, registering call (if not nil) for its reply. The
// payload of size bytes is appended by enc. Frames of concurrent senders
// share a flush: the last sender in line flushes.
func (c *tcpConn) write(call *tcpCall, h frameHeader, size int, enc func([]byte) []byte, lastPosted uint64) (uint64, error) {
	c.waiting.Add(1)
	c.wmu.Lock()
	c.waiting.Add(-1)
	defer c.wmu.Unlock()
	nc, gen, err := c.ensure()
	if err != nil {
		return 0, err
	}
	if lastPosted != 0 && lastPosted != gen {
		return 0, fmt.Errorf("%w: memory node %d: the connection failed after unsignaled verbs were posted; they may be lost", ErrUnavailable, c.mn)
	}
	if call != nil {
		c.pmu.Lock()
		c.nextID++
		h.id = c.nextID
		c.pending[h.id] = call
		c.pmu.Unlock()
		call.timer.Reset(c.t.cfg.Timeout)
	}
	var zero [headerBytes]byte
	b := enc(append(c.scratch[:0], zero[:]...))
	putHeader(b, size, h)
	c.scratch = b[:0]
	_, err = c.bw.Write(b)
	if err == nil && c.waiting.Load() == 0 {
		nc.SetWriteDeadline(time.Now().Add(c.t.cfg.Timeout))
		err = c.bw.Flush()
	}
	if err != nil {
		// The reader fails the pending requests, this one included.
		c.breakConn()
	}
	return gen, nil
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
		c.breakConn()
		return <-call.done
	}
}

// ensure dials the connection if it is not up and returns it with its
// generation. Called with wmu held.
func (c *tcpConn) ensure() (net.Conn, uint64, error) {
	c.nmu.Lock()
	nc, gen, closed := c.nc, c.gen, c.closed
	c.nmu.Unlock()
	switch {
	case closed:
		return nil, 0, ErrClosed
	case nc != nil:
		return nc, gen, nil
	}
	cfg := &c.t.cfg
	nc, err := net.DialTimeout("tcp", c.addr, cfg.DialTimeout)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	}
	var verify *rpcRequest
	if c.t.pool != 0 {
		// Every connection after the pool joined checks that the node is
		// still the one it joined: a server restarted without its file
		// would otherwise serve empty memory as if nothing had happened.
		verify = &rpcRequest{Kind: rpcJoin, Pool: c.t.pool, Index: c.mn}
	}
	if err := handshake(nc, cfg.Token, cfg.DialTimeout, verify); err != nil {
		nc.Close()
		return nil, 0, fmt.Errorf("memory node %d (%s): %w", c.mn, c.addr, err)
	}
	c.nmu.Lock()
	if c.closed {
		c.nmu.Unlock()
		nc.Close()
		return nil, 0, ErrClosed
	}
	c.gen++
	c.nc, gen = nc, c.gen
	c.nmu.Unlock()
	if c.bw == nil {
		c.bw = bufio.NewWriterSize(nc, 64<<10)
	} else {
		c.bw.Reset(nc)
	}
	go c.readLoop(nc, gen)
	return nc, gen, nil
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
		return err
	}
	if status != nil || verify == nil {
		return status
	}
	status, _, err = readReply(nc, frameRPCOK)
	if err != nil {
		return err
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

// breakConn closes the current connection; its reader then fails every
// pending request. The next send redials.
func (c *tcpConn) breakConn() {
	c.nmu.Lock()
	nc := c.nc
	c.nmu.Unlock()
	if nc != nil {
		nc.Close()
	}
}

// shut closes the connection for good (Pool.Close).
func (c *tcpConn) shut() {
	c.nmu.Lock()
	c.closed = true
	c.nmu.Unlock()
	c.breakConn()
}

// readLoop delivers the replies of connection generation gen until it
// fails, then fails every pending request and lets the next send redial.
func (c *tcpConn) readLoop(nc net.Conn, gen uint64) {
	br := bufio.NewReaderSize(nc, 64<<10)
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
		c.pmu.Lock()
		call := c.pending[h.id]
		delete(c.pending, h.id)
		c.pmu.Unlock()
		if call == nil {
			err = fmt.Errorf("%w: reply to unknown request %d", errBadFrame, h.id)
			break
		}
		call.done <- call.decode(h, payload)
	}
	nc.Close()
	c.nmu.Lock()
	if c.gen == gen {
		c.nc = nil
	}
	closed := c.closed
	c.nmu.Unlock()
	fail := fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	if closed {
		fail = ErrClosed
	}
	c.pmu.Lock()
	for id, call := range c.pending {
		delete(c.pending, id)
		call.done <- fail
	}
	c.pmu.Unlock()
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
