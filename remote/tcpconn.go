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
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// tcpConn is one connection slot to a memory node: the current link, dialled
// on first use and again after it breaks, as its node's state (tcpNode)
// allows.
type tcpConn struct {
	t    *tcpTransport
	mn   int
	addr string
	node *tcpNode

	mu      sync.Mutex // guards link, dialing, closed, and the send state of links
	link    *tcpLink   // nil while down
	dialing *tcpDial   // the dial in flight, if any
	gen     uint64     // generation of the latest link
	closed  bool
}

// tcpDial is one attempt to connect a tcpConn, made by a goroutine of its
// own; the callers that need the connection wait for its outcome.
type tcpDial struct {
	done  chan struct{} // closed when it ended
	err   error         // its outcome, set before done is closed
	probe bool          // the one attempt a down node allows
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
	cause   error // why it was closed on purpose (no reply in time, a failed write, its node found down)
	// posters are the clients whose unsignaled verbs on the link no
	// signaled batch of theirs confirmed since (tcpTransport.finish): if
	// the link fails, those verbs may be lost, and the clients crash.
	posters map[*Client]struct{}

	clock serverClock // the server's clock, as the welcome told it
}

// serverClock is a reading of a memory node's clock (Server.clock) taken
// no earlier than the instant at on this process's clock: the welcome's,
// received at at. It is kept (ok) only if the handshake took less than
// maxClockRTT, which bounds how early deadline converts: a server stalled
// between reading its clock and sending the welcome would otherwise make
// every deadline early by the stall, and refuse every batch as late.
type serverClock struct {
	ns uint64
	at time.Time
	ok bool
}

// maxClockRTT bounds the round trip of a handshake whose clock reading a
// link keeps (serverClock).
const maxClockRTT = 5 * time.Millisecond

// deadline returns, on the server's clock, a deadline t on this
// process's, early rather than late: the server's clock may have read ns
// at any instant up to at, so it reads at least ns+(t-at) at t.
func (sc serverClock) deadline(t time.Time) uint64 {
	return uint64(max(int64(sc.ns)+int64(t.Sub(sc.at)), 0)) // a server's clock and a deadline stay far below 2^62 ns
}

// resync asks the memory node for its clock on link l (a clock frame)
// until a reading comes back within maxClockRTT, at growing intervals (at
// most clockProbeMax apart), for a link whose handshake was slower: its
// batches get the node's deadline check from then on. It stops when the
// link is replaced or the transport closes.
func (c *tcpConn) resync(l *tcpLink) {
	gap := clockProbeMin
	for {
		select {
		case <-c.t.life.Done():
			return
		case <-time.After(gap):
		}
		gap = min(2*gap, clockProbeMax)
		c.mu.Lock()
		current := c.link == l
		c.mu.Unlock()
		if !current {
			return
		}
		call := newTCPCall()
		call.isRPC, call.clock = true, true
		sent := time.Now()
		if err := c.request(c.t.life, call, frameClock); err != nil || call.link != l {
			continue
		}
		if at := time.Now(); at.Sub(sent) <= maxClockRTT {
			c.mu.Lock()
			l.clock = serverClock{ns: call.serverNs, at: at, ok: true}
			c.mu.Unlock()
			return
		}
	}
}

// request sends call, a signaled frame of type typ without a payload, and
// waits for its reply until ctx ends.
func (c *tcpConn) request(ctx context.Context, call *tcpCall, typ uint8) error {
	if _, err := c.write(ctx, c.t.deadline(), call, frameHeader{typ: typ, flags: flagSignaled}, 0, func(b []byte) []byte { return b }, 0); err != nil {
		return err
	}
	return c.awaitCtx(ctx, call)
}

// The intervals of resync's readings.
const (
	clockProbeMin = 50 * time.Millisecond
	clockProbeMax = 10 * time.Second
)

// tcpCall is one request waiting for its reply.
type tcpCall struct {
	done     chan error
	timer    *time.Timer
	link     *tcpLink  // the link it was sent on
	id       uint64    // its request id there
	by       time.Time // when its reply is due
	ops      []Op      // batch: where results go
	idx      []int32   // batch: the verbs of ops this node executes (nil: all)
	rpc      rpcReply
	isRPC    bool
	fabric   bool           // a frameFabric request
	clock    bool           // a frameClock request
	serverNs uint64         // its reply
	endpoint fabricEndpoint // its reply
	poster   *Client        // batch: the client it is sent for (nil: none to record)
	// leaveBy, if not zero, is the batch's deadline (Client.DoBy,
	// PostBy): a batch still waiting for its connection then is not sent
	// (ErrLate), and a signaled one goes as a batch-by frame, which the
	// memory node refuses with ErrLate once past, however late the frame
	// reaches it.
	leaveBy time.Time
}

func newTCPCall() *tcpCall {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &tcpCall{done: make(chan error, 1), timer: t}
}

// call sends a two-sided request on the connection and waits for the reply.
func (c *tcpConn) call(ctx context.Context, req *rpcRequest) (rpcReply, error) {
	return c.callWith(ctx, newTCPCall(), req)
}

func (c *tcpConn) callWith(ctx context.Context, call *tcpCall, req *rpcRequest) (rpcReply, error) {
	call.isRPC = true
	payload := appendRPC(nil, req)
	if _, err := c.write(ctx, c.t.deadline(), call, frameHeader{typ: frameRPC, flags: flagSignaled}, len(payload), func(b []byte) []byte {
		return append(b, payload...)
	}, 0); err != nil {
		return rpcReply{}, err
	}
	if err := c.awaitCtx(ctx, call); err != nil {
		return rpcReply{}, err
	}
	return call.rpc, nil
}

// post sends call's batch. If lastPosted is not 0, the client's previous
// batch to this node was unsignaled and sent on that link generation: if
// the connection was redialled since, those verbs may be lost, and the
// batch fails with ErrUnavailable instead of running after them as if they
// had executed. It returns the generation used. A connection it must dial
// first is given until by.
func (c *tcpConn) post(ctx context.Context, by time.Time, call *tcpCall, signaled bool, lastPosted uint64) (uint64, error) {
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
	if size+8 > maxFrame { // 8: the deadline of a batch-by frame
		return 0, fmt.Errorf("%w: a batch of %d bytes to one memory node (at most %d)", ErrBadRequest, size, maxFrame-8)
	}
	return c.write(ctx, by, call, h, size, func(b []byte) []byte {
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		each(func(o *Op) { b = appendVerb(b, o) })
		return b
	}, lastPosted)
}

// write sends one frame, registering call (if not nil) for its reply by
// time by, or, for an unsignaled frame, its poster among the link's (a
// client whose verbs are lost if the link fails); enc appends the payload
// of size bytes. It returns the link generation used.
func (c *tcpConn) write(ctx context.Context, by time.Time, call *tcpCall, h frameHeader, size int, enc func([]byte) []byte, lastPosted uint64) (uint64, error) {
	c.mu.Lock()
	l, err := c.ensure(ctx, by)
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if lastPosted != 0 && lastPosted != l.gen {
		c.mu.Unlock()
		return 0, fmt.Errorf("%w: memory node %d: %w", ErrUnavailable, c.mn, errPostedLost)
	}
	if call != nil && !call.leaveBy.IsZero() && time.Now().After(call.leaveBy) {
		// The deadline passed while the batch waited for the connection
		// (a dial): nothing of it leaves.
		c.mu.Unlock()
		return 0, ErrLate
	}
	switch {
	case call != nil && h.flags&flagSignaled != 0:
		if h.id, err = l.register(call); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		call.by = by
		call.timer.Reset(time.Until(by))
	case call != nil && call.poster != nil:
		if err := l.post(call.poster); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		h.id = posterID(call.poster)
	}
	start := len(l.out)
	var zero [headerBytes]byte
	l.out = append(l.out, zero[:]...)
	if h.typ == frameBatch && call != nil && !call.leaveBy.IsZero() && l.clock.ok {
		// A batch with a deadline goes with it, on the server's clock, if
		// the link knows that clock (else the client's check alone holds).
		// An unsignaled one that comes late is answered by a late frame,
		// which crashes its poster (readLoop).
		h.typ, size = frameBatchBy, size+8
		l.out = binary.LittleEndian.AppendUint64(l.out, l.clock.deadline(call.leaveBy))
	}
	l.out = enc(l.out)
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
			// marks the node down.
			l.out = l.out[:0]
			l.fail(fmt.Errorf("write: %v", err))
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
	call.link, call.id = l, l.nextID
	return l.nextID, nil
}

// post records c as a client with unsignaled verbs on the link not
// confirmed yet, unless the link failed already.
func (l *tcpLink) post(c *Client) error {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if l.dead != nil {
		return l.dead
	}
	if l.posters == nil {
		l.posters = map[*Client]struct{}{}
	}
	l.posters[c] = struct{}{}
	return nil
}

// posterID is the id of c's unsignaled frames, which a late frame echoes:
// its index in its compute node, plus one. The clients that share a link
// are one compute node's, so it names one of them.
func posterID(c *Client) uint64 { return uint64(c.id) + 1 }

// poster returns the client among the link's posters whose unsignaled
// frames carry id (posterID), or nil. A late frame's poster is one: the
// node answers frames in order, so the late frame comes before the reply
// to any later signaled batch of its poster, which would confirm it.
func (l *tcpLink) poster(id uint64) *Client {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	for c := range l.posters {
		if posterID(c) == id {
			return c
		}
	}
	return nil
}

// confirm records that a signaled batch of c completed on the link: the
// unsignaled verbs c posted on it before have executed (posting order).
func (l *tcpLink) confirm(c *Client) {
	l.pmu.Lock()
	delete(l.posters, c)
	l.pmu.Unlock()
}

// awaitCtx waits for call's reply, or until ctx ends. A node that does not
// answer in time has its connection closed, which fails every request
// pending on it with ErrUnavailable and marks the node down. If ctx ends
// first, the call returns ctx's error and is given up (abandon): its reply,
// if it comes, is read and dropped, so that the call may be used again at
// once; the request may still execute (a mutating batch then crashes its
// client, Client.Crashed).
func (c *tcpConn) awaitCtx(ctx context.Context, call *tcpCall) error {
	select {
	case err := <-call.done:
		call.timer.Stop()
		return err
	case <-call.timer.C:
		if came, err := call.replyAfterStall(); came {
			return err
		}
		call.link.fail(c.late())
		return <-call.done
	case <-ctx.Done():
		if call.link.abandon(call) {
			call.timer.Stop()
			return fmt.Errorf("memory node %d (%s): no reply before the context ended: %w", c.mn, c.addr, ctx.Err())
		}
		// The reply is being handed over, or the link failed: either is
		// about to arrive.
		err := <-call.done
		call.timer.Stop()
		return err
	}
}

// stallGrace is how much longer a call waits for its reply when its
// timeout fired this long or more after it was due (replyAfterStall).
const stallGrace = 250 * time.Millisecond

// stalled reports whether a call due at by whose timeout fires now fires
// late enough that this process was not running meanwhile: stopped
// (SIGSTOP), a paused VM, a machine swapping. A reply that came in time
// may then be waiting in the socket for the link's reader, which did not
// run either; failing the link would judge a healthy memory node down for
// the compute node's own pause.
func stalled(by time.Time) bool { return time.Since(by) > stallGrace }

// replyAfterStall gives call, whose timer has fired, stallGrace more for
// its reply if the timer fired late (stalled), and reports whether the
// reply (or the link's failure) came meanwhile.
func (call *tcpCall) replyAfterStall() (came bool, err error) {
	if !stalled(call.by) {
		return false, nil
	}
	call.timer.Reset(stallGrace)
	select {
	case err := <-call.done:
		call.timer.Stop()
		return true, err
	case <-call.timer.C:
		return false, nil
	}
}

// late is the cause of a link closed because a reply did not come in time.
func (c *tcpConn) late() error {
	return fmt.Errorf("no reply within the timeout (%v)", c.t.cfg.Timeout)
}

// abandoned stands in a link's pending map for a request whose caller
// stopped waiting (abandon): its reply is read and dropped.
var abandoned = &tcpCall{}

// abandon gives up call, whose caller stopped waiting for its reply, if
// the reply has not been taken up yet: the reader drops the reply when it
// comes, and the link is still closed if it does not come by the call's
// deadline, as if the caller had waited (so that a node that stopped
// answering is found down whatever its callers' contexts). It reports
// false if the reply (or the link's failure) is being delivered to call.
func (l *tcpLink) abandon(call *tcpCall) bool {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	id := call.id
	if l.pending[id] != call {
		return false
	}
	l.pending[id] = abandoned
	by := call.by
	time.AfterFunc(time.Until(by), func() {
		if stalled(by) {
			time.Sleep(stallGrace) // as replyAfterStall
		}
		l.pmu.Lock()
		late := l.pending[id] == abandoned
		l.pmu.Unlock()
		if late {
			l.fail(l.c.late())
		}
	})
	return true
}

// ensure returns the live link, dialling one if there is none. Called with
// c.mu held, which it releases while it waits for a dial. A dial runs in a
// goroutine of its own, bounded by DialTimeout and by, and the callers that
// need the connection meanwhile wait for its outcome, or for ctx. While
// the node is down (tcpNode) it fails at once instead, except for the one
// dial the node's back-off lets through.
func (c *tcpConn) ensure(ctx context.Context, by time.Time) (*tcpLink, error) {
	if c.closed {
		return nil, ErrClosed
	}
	if c.link != nil {
		return c.link, nil
	}
	d := c.dialing
	if d == nil {
		probe, err := c.node.admit()
		if err != nil {
			return nil, err
		}
		d = &tcpDial{done: make(chan struct{}), probe: probe}
		c.dialing = d
		go c.redial(d, by)
	}
	c.mu.Unlock()
	var err error
	select {
	case <-d.done:
		err = d.err
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.mu.Lock()
	switch {
	case c.closed:
		return nil, ErrClosed
	case c.link != nil:
		return c.link, nil
	case err != nil:
		return nil, err
	}
	return nil, fmt.Errorf("%w: memory node %d (%s): the new connection failed at once", ErrUnavailable, c.mn, c.addr)
}

// redial makes dial d for a call due by by, installs the link it made and
// reports the outcome to the node. The dial is given DialTimeout, and at
// most half of the call's Timeout, so that the call has at least the other
// half for its reply: a node is judged by a reply past half a Timeout at
// worst, and the call returns by its deadline.
func (c *tcpConn) redial(d *tcpDial, by time.Time) {
	by = by.Add(-c.t.cfg.Timeout / 2)
	if limit := time.Now().Add(c.t.cfg.DialTimeout); limit.Before(by) {
		by = limit
	}
	nc, clock, err := c.dial(by)
	c.mu.Lock()
	c.dialing = nil
	failed := err != nil
	switch {
	case c.closed:
		err, failed = ErrClosed, false
	case err == nil && !c.node.connected(d.probe):
		// The node was found down while this dial ran.
		err = c.node.unavailable()
	case err == nil:
		c.gen++
		c.link = &tcpLink{c: c, nc: nc, gen: c.gen, pending: map[uint64]*tcpCall{}, clock: clock}
		go c.link.readLoop()
		if !clock.ok {
			go c.resync(c.link)
		}
	}
	if err != nil && nc != nil {
		nc.Close()
	}
	d.err = err
	c.mu.Unlock()
	if failed {
		c.t.nodeFailed(c.node, d.probe, err)
	}
	close(d.done)
}

// dial connects to the memory node and authenticates by time by, and
// returns the server's clock as its welcome told it. Closing the transport
// aborts it.
func (c *tcpConn) dial(by time.Time) (net.Conn, serverClock, error) {
	cfg := &c.t.cfg
	ctx, cancel := context.WithDeadline(c.t.life, by)
	defer cancel()
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, serverClock{}, fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	}
	defer context.AfterFunc(c.t.life, func() { nc.Close() })()
	var verify *rpcRequest
	if c.t.pool != 0 {
		// Every connection after the pool joined checks that the node is
		// still the one it joined: a server restarted without its file
		// would otherwise serve empty memory as if nothing had happened.
		verify = &rpcRequest{Kind: rpcJoin, Pool: c.t.pool, Index: c.mn, Nodes: len(c.t.addrs)}
	}
	clock, err := handshake(nc, cfg.Token, time.Until(by), verify)
	if err != nil {
		nc.Close()
		if verify != nil && !errors.Is(err, ErrUnavailable) {
			// A node the pool joined that now refuses it (restarted
			// without its file: ErrBadNode) is unavailable to the pool,
			// for this dial as for the calls refused while it is down.
			return nil, clock, fmt.Errorf("%w: memory node %d (%s): %w", ErrUnavailable, c.mn, c.addr, err)
		}
		return nil, clock, fmt.Errorf("memory node %d (%s): %w", c.mn, c.addr, err)
	}
	return nc, clock, nil
}

// fail closes the link for cause (kept for the errors of its pending calls
// if it is the first).
func (l *tcpLink) fail(cause error) {
	l.pmu.Lock()
	if l.cause == nil {
		l.cause = cause
	}
	l.pmu.Unlock()
	l.nc.Close()
}

// drop closes c's link, if it has one, because its node was found down.
func (c *tcpConn) drop(cause error) {
	c.mu.Lock()
	l := c.link
	c.link = nil
	c.mu.Unlock()
	if l != nil {
		l.fail(cause)
	}
}

// Back-off of a memory node found down (tcpNode).
const (
	minNodeBackoff = 100 * time.Millisecond
	maxNodeBackoff = 5 * time.Second
)

// tcpNode is what a transport knows of one memory node's health, shared by
// all its connections to the node. A connection to the node that fails (a
// dial refused, a handshake or a reply past its timeout, a reset, a broken
// frame) marks it down: every connection to it is closed, and verbs to it
// fail at once with ErrUnavailable instead of each redialling and waiting
// out a timeout. After a back-off one dial is let through (the probe),
// while the others keep failing at once; its success brings the node back
// up, its failure doubles the back-off, from minNodeBackoff up to
// maxNodeBackoff.
type tcpNode struct {
	mn    int
	addr  string
	trips atomic.Uint64 // times it was marked down

	mu      sync.Mutex
	down    bool
	probing bool          // the probe is in flight
	retry   time.Time     // while down: no probe before
	backoff time.Duration // the back-off after the next failure
	cause   error         // the failure that marked the node down, or the last probe's
}

func newTCPNode(mn int, addr string) *tcpNode {
	return &tcpNode{mn: mn, addr: addr, backoff: minNodeBackoff}
}

// admit is asked before a dial: an error wrapping ErrUnavailable while the
// node is down and no probe is due, else probe says whether this dial is
// the probe.
func (n *tcpNode) admit() (probe bool, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.down {
		return false, nil
	}
	if n.probing || time.Now().Before(n.retry) {
		return false, n.unavailableLocked()
	}
	n.probing = true
	return true, nil
}

// connected records a successful dial and reports whether its connection
// may be used: a probe brings the node back up; another dial's connection
// may not be used if the node was found down meanwhile.
func (n *tcpNode) connected(probe bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if probe {
		n.down, n.probing, n.backoff, n.cause = false, false, minNodeBackoff, nil
	}
	return !n.down
}

// failed records a failed dial or connection and reports whether it marked
// the node down (it was up).
func (n *tcpNode) failed(probe bool, cause error) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case probe:
		n.probing = false
		n.backoff = min(2*n.backoff, maxNodeBackoff)
	case n.down:
		return false // a connection of before, or a dial started before it went down
	}
	tripped := !n.down
	if tripped {
		n.trips.Add(1)
	}
	n.down, n.cause = true, cause
	// Up to a quarter more, so that compute nodes that lost the node at the
	// same instant do not probe it in step.
	n.retry = time.Now().Add(n.backoff + rand.N(n.backoff/4+1))
	return tripped
}

// abandon records a dial or batch that ended without news of the node (its
// caller's deadline cut it, or it was not posted): a probe's end lets the
// next attempt probe.
func (n *tcpNode) abandon(probe bool) {
	if !probe {
		return
	}
	n.mu.Lock()
	n.probing = false
	n.mu.Unlock()
}

// unavailable returns the error of a verb refused while the node is down.
func (n *tcpNode) unavailable() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unavailableLocked()
}

func (n *tcpNode) unavailableLocked() error {
	state := "a reconnection is under way"
	if !n.probing {
		state = fmt.Sprintf("next attempt in %v", time.Until(n.retry).Round(time.Millisecond))
	}
	return fmt.Errorf("%w: memory node %d (%s) is down (%s); it failed with: %w", ErrUnavailable, n.mn, n.addr, state, n.cause)
}

// handshake authenticates a new connection and, if verify is set, sends
// it as a first request and returns its error. It returns the server's
// clock as the welcome told it.
func handshake(nc net.Conn, token string, timeout time.Duration, verify *rpcRequest) (serverClock, error) {
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
	var clock serverClock
	sent := time.Now()
	if _, err := nc.Write(b); err != nil {
		return clock, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	status, rest, err := readReply(nc, frameWelcome)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// A memory node answers a hello it refuses (a wrong token, a
			// malformed hello) with an explicit refusal: a peer that just
			// closes is not a memory node, or one shutting down.
			return clock, fmt.Errorf("%w: the peer closed the connection during the handshake (not a memory node, or shutting down)", ErrUnavailable)
		}
		return clock, fmt.Errorf("%w: handshake: %v", ErrUnavailable, err)
	}
	if status != nil {
		return clock, status
	}
	if len(rest) < 8 {
		return clock, fmt.Errorf("%w: handshake: a welcome of %d bytes without the server's clock", ErrUnavailable, len(rest))
	}
	at := time.Now()
	clock = serverClock{ns: binary.LittleEndian.Uint64(rest), at: at, ok: at.Sub(sent) <= maxClockRTT}
	if verify == nil {
		return clock, nil
	}
	status, _, err = readReply(nc, frameRPCOK)
	if err != nil {
		return clock, fmt.Errorf("%w: handshake: %v", ErrUnavailable, err)
	}
	return clock, status
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
// pending call and takes the link down. A link that failed while in use
// (not closed by Pool.Close, nor dropped with its node) marks its node
// down.
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
		if h.typ == frameLate {
			// A batch posted unsignaled by a deadline reached the node
			// after it and executed nothing: its poster may still hold
			// a lock it released there, and crashes, so that others
			// take its locks over (Client.Crashed).
			pc := l.poster(h.id)
			if pc == nil {
				err = fmt.Errorf("%w: late frame for unknown poster %d", errBadFrame, h.id)
				break
			}
			pc.crashUnsure(fmt.Errorf("memory node %d: %w", l.c.mn, errPostedLate))
			continue
		}
		l.pmu.Lock()
		call := l.pending[h.id]
		delete(l.pending, h.id)
		l.pmu.Unlock()
		if call == nil {
			err = fmt.Errorf("%w: reply to unknown request %d", errBadFrame, h.id)
			break
		}
		if call == abandoned {
			continue
		}
		call.done <- call.decode(h, payload)
	}
	l.nc.Close()
	c := l.c
	c.mu.Lock()
	current := c.link == l
	if current {
		c.link = nil
	}
	closed := c.closed
	c.mu.Unlock()
	l.pmu.Lock()
	cause := l.cause
	l.pmu.Unlock()
	var fail error
	switch {
	case closed:
		fail = ErrClosed
	case cause != nil:
		fail = fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, cause)
	default:
		fail = fmt.Errorf("%w: memory node %d (%s): %v", ErrUnavailable, c.mn, c.addr, err)
	}
	if current && !closed {
		c.t.nodeFailed(c.node, false, fail)
	}
	l.pmu.Lock()
	l.dead = fail
	for id, call := range l.pending {
		delete(l.pending, id)
		if call != abandoned {
			call.done <- fail
		}
	}
	posters := l.posters
	l.posters = nil
	l.pmu.Unlock()
	if !closed {
		// Their unsignaled verbs on the link may be lost, or land late; a
		// client that posts nothing more to the node (an idle one) would
		// never learn it otherwise (Client.Crashed).
		for pc := range posters {
			pc.crashUnsure(fmt.Errorf("%w (%w)", fail, errPostedLost))
		}
	}
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
	case call.clock && h.typ == frameClock:
		if len(rest) != 8 {
			return fmt.Errorf("%w: a clock reply of %d bytes", ErrUnavailable, len(rest))
		}
		call.serverNs = binary.LittleEndian.Uint64(rest)
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
