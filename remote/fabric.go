//go:build fabric

package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	eps  []fabricEndpoint // per memory node

	mu  sync.Mutex
	cns [][][]*fabricConn // per compute node, per memory node
}

// fabricConn is one endpoint slot, dialled on first use and after it broke.
type fabricConn struct {
	mu   sync.Mutex
	conn *fabric.Conn
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
	p.cfg.Fabric = &cfg
	pool, err := p.joinNodes(len(t.addrs), func(mn int) rpcCaller { return t.adminConn(mn) })
	if err != nil {
		t.close()
		return fmt.Errorf("memory node %w", err)
	}
	t.pool = pool
	ft := &fabricTransport{tcpTransport: t, fcfg: cfg}
	for mn := range t.addrs {
		e, err := t.adminConn(mn).endpoint()
		if err == nil && cfg.Provider != "" && e.Provider != cfg.Provider {
			err = fmt.Errorf("%w: it serves provider %s, not %s", ErrBadRequest, e.Provider, cfg.Provider)
		}
		if err == nil && (len(e.Regions) == 0 || e.Regions[0][2] != p.geom[mn].main) {
			err = fmt.Errorf("%w: its fabric regions do not match its geometry", ErrBadNode)
		}
		if err != nil {
			t.close()
			return fmt.Errorf("memory node %d (%s): %w", mn, t.addrs[mn], err)
		}
		ft.eps = append(ft.eps, e)
	}
	p.t = ft
	return nil
}

// endpoint asks the memory node for its fabric endpoint.
func (c *tcpConn) endpoint() (fabricEndpoint, error) {
	call := newTCPCall()
	call.isRPC = true
	call.fabric = true
	if _, err := c.write(context.Background(), c.t.deadline(), call, frameHeader{typ: frameFabric, flags: flagSignaled}, 0, func(b []byte) []byte { return b }, 0); err != nil {
		return fabricEndpoint{}, err
	}
	if err := c.await(call); err != nil {
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

func (t *fabricTransport) exec(_ context.Context, c *Client, ops []Op, _ bool) error {
	fc := c.fab
	for mn := range t.eps {
		fc.ops, fc.idx = fc.ops[:0], fc.idx[:0]
		for i := range ops {
			o := &ops[i]
			if o.Addr.MN() != mn || ((o.Kind == OpRead || o.Kind == OpWrite) && len(o.Buf) == 0) {
				continue
			}
			r := t.eps[mn].Regions[0]
			if o.Addr.IsOnChip() {
				r = t.eps[mn].Regions[1]
			}
			fc.ops = append(fc.ops, fabric.Op{Kind: fabricKinds[o.Kind], Region: fabric.Region{Base: r[0], Key: r[1], Len: r[2]},
				Off: o.Addr.Offset(), Buf: o.Buf, Compare: o.Compare, Swap: o.Swap})
			fc.idx = append(fc.idx, i)
		}
		if len(fc.ops) == 0 {
			continue
		}
		t.mu.Lock()
		conns := t.cns[c.cn.id][mn]
		t.mu.Unlock()
		if err := t.do(conns[c.id%len(conns)], mn, fc.ops); err != nil {
			return err
		}
		for j, i := range fc.idx {
			ops[i].Old = fc.ops[j].Old
		}
	}
	return nil
}

// do runs one memory node's part of a batch on slot s, dialling it first if
// needed; a broken endpoint is closed so that the next batch redials. The
// node's health is the control plane's (tcpNode): while the node is down
// a batch fails at once with ErrUnavailable, one batch at a time is let
// through as the probe after the back-off, and a failed dial or batch
// marks the node down, so that a memory node that stopped answering costs
// each client one timeout, not one per batch.
func (t *fabricTransport) do(s *fabricConn, mn int, ops []fabric.Op) error {
	node := t.nodes[mn]
	probe, err := node.admit()
	if err != nil {
		return err
	}
	s.mu.Lock()
	conn := s.conn
	if conn == nil {
		conn, err = fabric.Dial(fabric.DialConfig{Provider: t.eps[mn].Provider, Addr: t.eps[mn].Addr,
			Timeout: t.fcfg.DialTimeout, BatchTimeout: t.fcfg.Timeout})
		if err != nil {
			s.mu.Unlock()
			err = fmt.Errorf("%w: memory node %d fabric endpoint %s: %v", ErrUnavailable, mn, t.eps[mn].Addr, err)
			t.nodeFailed(node, probe, err)
			return err
		}
		s.conn = conn
	}
	s.mu.Unlock()
	err = conn.Do(ops)
	switch {
	case err == nil:
		node.connected(probe)
		return nil
	case errors.Is(err, fabric.ErrAccess):
		node.connected(probe)
		return fmt.Errorf("%w: memory node %d: %v", ErrOutOfBounds, mn, err)
	case errors.Is(err, fabric.ErrInvalid):
		node.connected(probe)
		return fmt.Errorf("%w: memory node %d: %v", ErrBadRequest, mn, err)
	}
	s.mu.Lock()
	if s.conn == conn {
		s.conn = nil
		conn.Close()
	}
	s.mu.Unlock()
	err = fmt.Errorf("%w: memory node %d: %v", ErrUnavailable, mn, err)
	t.nodeFailed(node, probe, err)
	return err
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
				if s.conn != nil {
					s.conn.Close()
					s.conn = nil
				}
				s.mu.Unlock()
			}
		}
	}
}
