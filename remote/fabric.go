//go:build fabric

package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dmindex/dmindex/internal/fabric"
)

// fabricTransport reaches memnode servers over libfabric: every verb is a
// one-sided operation on the memory node's registered regions (executed by
// its NIC with the verbs provider). The TCP connections of the tcp
// transport remain the control plane: they authenticate, join the pool,
// carry allocation and naming, and hand out each region's address and key.
// Each client always uses the same one of its compute node's Conns
// endpoints to a memory node, so its verbs there execute in posting order.
type fabricTransport struct {
	*tcpTransport
	fcfg FabricConfig
	eps  []*fabricNode // per memory node

	mu  sync.Mutex
	cns [][][]*fabricConn // per compute node, per memory node
}

// fabricNode is one memory node's fabric endpoint as the transport knows
// it: fetched over the control connection when the pool opens, and again
// before the first batch after the node was marked down, since a memnode
// restarted with its file listens on another port (unless --fabric-listen
// fixes it) and registers its regions anew (with verbs: other keys).
type fabricNode struct {
	cur   atomic.Pointer[fabricEpoch]
	fetch sync.Mutex // held by the refetch in flight
}

// fabricEpoch is one fetch of a memory node's endpoint.
type fabricEpoch struct {
	fabricEndpoint
	gen   uint64 // 1 for the fetch of NewPool, one more for each refetch
	trips uint64 // the node's tcpNode.trips when it was fetched
}

// fabricConn is one endpoint slot, dialled on first use, after it broke,
// and after its memory node's endpoint was fetched again. Its mutex is never
// held across a dial or a batch.
type fabricConn struct {
	mu      sync.Mutex
	conn    *fabric.Conn
	ep      *fabricEpoch // the endpoint conn was dialled to
	dialing *fabricDial  // the dial in flight, if any
	shut    bool         // the transport closed: no connection is installed any more
}

// fabricDial is a slot's dial in flight: the batches that need the slot
// meanwhile wait for its outcome, or for their context.
type fabricDial struct {
	done chan struct{}
	err  error // set before done is closed
}

// fabricKinds translates verb kinds (validated before exec).
var fabricKinds = [...]fabric.OpKind{OpRead: fabric.OpRead, OpWrite: fabric.OpWrite, OpCAS: fabric.OpCAS, OpFAA: fabric.OpFAA}

// fabricClient is a client's scratch for translating batches.
type fabricClient struct {
	ops []fabric.Op
	idx []int
}

func (p *Pool) dialFabric(cfg FabricConfig) error {
	tc := TCPConfig{MemoryNodes: cfg.MemoryNodes, Token: cfg.Token, Conns: 1, DialTimeout: cfg.DialTimeout, Timeout: cfg.Timeout}
	if err := normalizedNet(tc.MemoryNodes, &tc.Token, &tc.Conns, &tc.DialTimeout, &tc.Timeout, &p.cfg); err != nil {
		return err
	}
	if cfg.Conns == 0 {
		cfg.Conns = 2
	}
	if cfg.Conns < 0 || cfg.Conns > 64 {
		return fmt.Errorf("%w: Conns %d not in 1..64", ErrBadRequest, cfg.Conns)
	}
	cfg.Token, cfg.DialTimeout, cfg.Timeout = tc.Token, tc.DialTimeout, tc.Timeout
	t := &tcpTransport{local: newLocal(p), cfg: tc, addrs: tc.MemoryNodes}
	ft := &fabricTransport{tcpTransport: t, fcfg: cfg}
	t.nodeDown = func(mn int) { go ft.closeEndpoints(mn) }
	p.cfg.Fabric = &cfg
	pool, err := p.joinNodes(len(t.addrs), func(mn int) rpcCaller { return t.adminConn(mn) })
	if err != nil {
		t.close()
		return fmt.Errorf("memory node %w", err)
	}
	t.pool = pool
	for mn := range t.addrs {
		trips := t.nodes[mn].trips.Load()
		e, err := ft.fetchEndpoint(context.Background(), mn)
		if err != nil {
			t.close()
			return fmt.Errorf("memory node %d (%s): %w", mn, t.addrs[mn], err)
		}
		fn := &fabricNode{}
		fn.cur.Store(&fabricEpoch{fabricEndpoint: e, gen: 1, trips: trips})
		ft.eps = append(ft.eps, fn)
	}
	p.t = ft
	return nil
}

// fetchEndpoint asks memory node mn for its fabric endpoint and checks it
// against the configuration and the node's geometry.
func (t *fabricTransport) fetchEndpoint(ctx context.Context, mn int) (fabricEndpoint, error) {
	e, err := t.adminConn(mn).endpoint(ctx)
	if err != nil {
		return e, err
	}
	g := t.p.geom[mn]
	switch {
	case t.fcfg.Provider != "" && e.Provider != t.fcfg.Provider:
		return e, fmt.Errorf("%w: it serves provider %s, not %s", ErrBadRequest, e.Provider, t.fcfg.Provider)
	case len(e.Regions) == 0 || e.Regions[0][2] != g.main, g.onChip > 0 && (len(e.Regions) < 2 || e.Regions[1][2] != g.onChip):
		return e, fmt.Errorf("%w: its fabric regions do not match its geometry", ErrBadNode)
	}
	return e, nil
}

// endpoint returns memory node mn's current endpoint, fetched again first
// if the node was marked down since the last fetch. The fetch dials the
// node's control connection as the tcp transport does, so while the node
// is down it fails at once unless the back-off lets it through as the
// probe. One fetch runs at a time; the batches that need the endpoint
// meanwhile fail at once. The fetch ends when ctx does (with its error; the
// node is not judged by it).
func (t *fabricTransport) endpoint(ctx context.Context, mn int) (*fabricEpoch, error) {
	fn, node := t.eps[mn], t.nodes[mn]
	trips := node.trips.Load()
	if e := fn.cur.Load(); e.trips == trips {
		return e, nil
	}
	if !fn.fetch.TryLock() {
		return nil, fmt.Errorf("%w: memory node %d (%s): its fabric endpoint is being fetched again after a failure", ErrUnavailable, mn, t.addrs[mn])
	}
	defer fn.fetch.Unlock()
	e := fn.cur.Load()
	if e.trips == trips {
		return e, nil // fetched meanwhile
	}
	ep, err := t.fetchEndpoint(ctx, mn)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, ErrUnavailable) {
			return nil, notSent(fmt.Errorf("memory node %d (%s): fetching its fabric endpoint: %w", mn, t.addrs[mn], cerr))
		}
		if !errors.Is(err, ErrUnavailable) {
			// It answers, but serves no endpoint this pool can use.
			err = fmt.Errorf("%w: memory node %d (%s): fabric endpoint: %w", ErrUnavailable, mn, t.addrs[mn], err)
			t.nodeFailed(node, false, err)
		}
		return nil, err
	}
	e = &fabricEpoch{fabricEndpoint: ep, gen: e.gen + 1, trips: trips}
	fn.cur.Store(e)
	return e, nil
}

// endpoint asks the memory node for its fabric endpoint, until ctx ends.
func (c *tcpConn) endpoint(ctx context.Context) (fabricEndpoint, error) {
	call := newTCPCall()
	call.isRPC = true
	call.fabric = true
	if err := c.request(ctx, call, frameFabric); err != nil {
		return fabricEndpoint{}, err
	}
	return call.endpoint, nil
}

func (t *fabricTransport) newClient(c *Client) {
	t.tcpTransport.newClient(c)
	c.fab = &fabricClient{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.cns) <= c.cn.id {
		t.cns = append(t.cns, nil)
	}
	if t.cns[c.cn.id] == nil {
		conns := make([][]*fabricConn, len(t.eps))
		for mn := range conns {
			for range t.fcfg.Conns {
				conns[mn] = append(conns[mn], &fabricConn{})
			}
		}
		t.cns[c.cn.id] = conns
	}
}

func (t *fabricTransport) exec(ctx context.Context, c *Client, ops []Op, _ bool) error {
	fc := c.fab
	posted := false // a part of the batch was run on a memory node
	for mn := range t.eps {
		fc.idx = fc.idx[:0]
		for i := range ops {
			o := &ops[i]
			if o.Addr.MN() == mn && ((o.Kind != OpRead && o.Kind != OpWrite) || len(o.Buf) > 0) {
				fc.idx = append(fc.idx, i)
			}
		}
		if len(fc.idx) == 0 {
			continue
		}
		t.mu.Lock()
		conns := t.cns[c.cn.id][mn]
		t.mu.Unlock()
		slot := conns[c.id%len(conns)]
		err := t.do(ctx, slot, mn, ops, fc)
		if errors.Is(err, errSlotBroken) {
			// Another client's batch broke the slot's connection before
			// this one was posted: once more, on a new connection.
			err = t.do(ctx, slot, mn, ops, fc)
		}
		if err != nil {
			if posted {
				err = sentAnyway(err) // its outcome is not nothing
			}
			return err
		}
		posted = true
	}
	return nil
}

// do runs memory node mn's part of a batch (the verbs fc.idx names) on
// slot s, dialling it first if needed; a broken endpoint is closed so that
// the next batch redials. The node's health is the control plane's
// (tcpNode): while the node is down a batch fails at once with
// ErrUnavailable, one batch at a time is let through as the probe after
// the back-off, and a failed dial or batch marks the node down, so that a
// memory node that stopped answering costs each client one timeout, not
// one per batch. The first batch after the node was marked down fetches
// its endpoint again (endpoint), and each slot then redials the new one.
//
// ctx bounds the wait for the endpoint's fetch and for the slot's dial
// (slotConn), and the batch (fabric.Conn.DoContext: its deadline, and a
// cancellation within about 20 ms) besides Timeout. A batch cut in flight
// by either fails with the context's error, its outcome unknown
// (Client.Crashed), and closes the slot's connection (its staging buffer
// may still be written) without judging the node: the caller gave up, the
// node did not fail. A batch given up before anything of it was posted
// leaves the connection as it is and crashes nothing. A batch
// refused because another one broke the connection first (or closed it
// after that) was not posted; it fails with errSlotBroken, and exec runs it
// once more.
func (t *fabricTransport) do(ctx context.Context, s *fabricConn, mn int, ops []Op, fc *fabricClient) error {
	if err := ctx.Err(); err != nil {
		return notSent(fmt.Errorf("memory node %d: %w", mn, err))
	}
	node := t.nodes[mn]
	cur, err := t.endpoint(ctx, mn)
	if err != nil {
		return err
	}
	probe, err := node.admit()
	if err != nil {
		return err
	}
	conn, ep, probe, err := t.slotConn(ctx, s, mn, cur, probe)
	if err != nil {
		return err
	}
	fc.ops = fc.ops[:0]
	for _, i := range fc.idx {
		o := &ops[i]
		r := ep.Regions[0]
		if o.Addr.IsOnChip() {
			r = ep.Regions[1]
		}
		fc.ops = append(fc.ops, fabric.Op{Kind: fabricKinds[o.Kind], Region: fabric.Region{Base: r[0], Key: r[1], Len: r[2]},
			Off: o.Addr.Offset(), Buf: o.Buf, Compare: o.Compare, Swap: o.Swap})
	}
	err = conn.DoContext(ctx, fc.ops)
	switch {
	case err == nil:
		node.connected(probe)
		for j, i := range fc.idx {
			ops[i].Old = fc.ops[j].Old
		}
		return nil
	case errors.Is(err, fabric.ErrAccess):
		node.connected(probe)
		return fmt.Errorf("%w: memory node %d: %v", ErrOutOfBounds, mn, err)
	case errors.Is(err, fabric.ErrInvalid):
		node.connected(probe)
		return fmt.Errorf("%w: memory node %d: %v", ErrBadRequest, mn, err)
	case errors.Is(err, fabric.ErrNotPosted):
		// The caller gave up before anything left: the endpoint is intact.
		node.abandon(probe)
		return notSent(fmt.Errorf("memory node %d: %w (%v)", mn, ctxError(err), err))
	}
	s.drop(conn)
	switch {
	case errors.Is(err, fabric.ErrBroken) || errors.Is(err, fabric.ErrClosed):
		// Broken, or closed by the batch that broke it (drop), before this
		// one was posted.
		node.abandon(probe)
		return fmt.Errorf("%w: memory node %d: %w (%v)", ErrUnavailable, mn, errSlotBroken, err)
	case errors.Is(err, fabric.ErrDeadline) || errors.Is(err, fabric.ErrCanceled):
		node.abandon(probe)
		return fmt.Errorf("memory node %d: %w (%v)", mn, ctxError(err), err)
	}
	err = fmt.Errorf("%w: memory node %d: %v", ErrUnavailable, mn, err)
	if !probe && ep.gen < t.eps[mn].cur.Load().gen {
		// A connection to the endpoint of before the node's last failure
		// (closed by a batch that replaced it, or gone with its server):
		// no news of the node, which the new endpoint's batches judge.
		return err
	}
	t.nodeFailed(node, probe, err)
	return err
}

// slotConn returns slot s's connection to endpoint cur of memory node mn,
// dialling one if the slot has none (or one to an older endpoint), and
// whether the caller still holds the node's probe (admit): a dial reports
// its outcome to the node itself, so the caller's batch does not. A dial
// runs in a goroutine of its own (dialSlot), bounded by DialTimeout and
// half of Timeout as the tcp transport's are; the batches that need the
// slot meanwhile wait for it, or for their context, whose error they then
// return (nothing of their batch was sent).
func (t *fabricTransport) slotConn(ctx context.Context, s *fabricConn, mn int, cur *fabricEpoch, probe bool) (*fabric.Conn, *fabricEpoch, bool, error) {
	node := t.nodes[mn]
	s.mu.Lock()
	if s.conn != nil && s.ep.gen < cur.gen {
		// Dialled to the endpoint of before the node's last failure (and
		// not closed yet by closeEndpoints): closed before the new one is
		// dialled.
		s.conn.Close()
		s.conn = nil
	}
	if conn, ep := s.conn, s.ep; conn != nil {
		s.mu.Unlock()
		return conn, ep, probe, nil
	}
	if s.shut {
		s.mu.Unlock()
		node.abandon(probe)
		return nil, nil, false, ErrClosed
	}
	d := s.dialing
	if d == nil {
		d = &fabricDial{done: make(chan struct{})}
		s.dialing = d
		go t.dialSlot(s, d, mn, cur, probe)
	} else {
		node.abandon(probe) // the dial in flight tells about the node
	}
	s.mu.Unlock()
	select {
	case <-d.done:
	case <-ctx.Done():
		return nil, nil, false, notSent(fmt.Errorf("memory node %d fabric endpoint %s: waiting for its dial: %w", mn, cur.Addr, ctx.Err()))
	}
	if d.err != nil {
		return nil, nil, false, d.err
	}
	s.mu.Lock()
	conn, ep := s.conn, s.ep
	s.mu.Unlock()
	if conn == nil {
		return nil, nil, false, fmt.Errorf("%w: memory node %d fabric endpoint %s: the new connection was closed at once", ErrUnavailable, mn, cur.Addr)
	}
	return conn, ep, false, nil
}

// dialSlot makes dial d of slot s to endpoint ep of memory node mn,
// installs the connection and reports the outcome to the node (probe: the
// dial is the probe the node's back-off let through).
func (t *fabricTransport) dialSlot(s *fabricConn, d *fabricDial, mn int, ep *fabricEpoch, probe bool) {
	node := t.nodes[mn]
	conn, err := fabric.Dial(fabric.DialConfig{Provider: ep.Provider, Addr: ep.Addr,
		Timeout: min(t.fcfg.DialTimeout, t.fcfg.Timeout/2), BatchTimeout: t.fcfg.Timeout})
	if err != nil {
		err = fmt.Errorf("%w: memory node %d fabric endpoint %s: %v", ErrUnavailable, mn, ep.Addr, err)
	}
	s.mu.Lock()
	s.dialing = nil
	failed := err != nil
	switch {
	case s.shut:
		err, failed = ErrClosed, false
		node.abandon(probe)
	case err == nil && !node.connected(probe):
		err = node.unavailable() // found down while this dial ran
	case err == nil:
		s.conn, s.ep = conn, ep
	}
	if err != nil && conn != nil {
		conn.Close()
	}
	d.err = err
	s.mu.Unlock()
	if failed {
		t.nodeFailed(node, probe, err)
	}
	close(d.done)
}

// ctxError is the context error that a batch the fabric engine gave up for
// its caller (fabric.ErrDeadline, fabric.ErrCanceled) returns.
func ctxError(err error) error {
	if errors.Is(err, fabric.ErrCanceled) {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// errSlotBroken is wrapped by the error of a batch that was not posted
// because another batch broke its slot's connection first (fabric.ErrBroken,
// or fabric.ErrClosed once that batch closed it).
var errSlotBroken = errors.New("the endpoint connection was broken by another batch; nothing was posted")

// drop closes conn and empties the slot, if the slot still holds it.
func (s *fabricConn) drop(conn *fabric.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == conn {
		s.conn = nil
		conn.Close()
	}
}

// closeEndpoints closes every slot's connection to memory node mn, which
// was marked down: the first batch after it comes back fetches its
// endpoint again and the slots dial that one. They are closed at once,
// not when each slot is next used, because libfabric 1.17's sockets
// provider closes the socket of a connection whose peer went away and
// closes the same descriptor again when the connection is closed: the
// later that is, the likelier the number was given meanwhile to another
// descriptor of the process (a new connection's, whose close then hangs in
// fi_close of its domain) and is closed under it. Run in a goroutine of
// its own: a close waits for the batch in flight on the connection.
func (t *fabricTransport) closeEndpoints(mn int) {
	t.mu.Lock()
	var slots []*fabricConn
	for _, cn := range t.cns {
		if cn != nil {
			slots = append(slots, cn[mn]...)
		}
	}
	t.mu.Unlock()
	for _, s := range slots {
		s.close()
	}
}

// close closes the slot's connection, if it has one: the next batch on the
// slot dials again.
func (s *fabricConn) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

func (t *fabricTransport) report() Report {
	r := t.tcpTransport.report()
	r.Transport = "fabric"
	return r
}

func (t *fabricTransport) close() {
	t.tcpTransport.close()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, cn := range t.cns {
		for _, slots := range cn {
			for _, s := range slots {
				s.mu.Lock()
				s.shut = true
				s.mu.Unlock()
				s.close()
			}
		}
	}
}
