package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
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

	mu    sync.Mutex
	cns   [][][]*tcpConn     // per compute node, per memory node: Conns connections
	nodes []*tcpNode         // per memory node, its health
	life  context.Context    // cancelled by close: aborts dials
	stop  context.CancelFunc // cancels life

	// nodeDown, if set before the first connection, is called when a
	// memory node was marked down and its connections closed (the fabric
	// transport closes its endpoints to the node).
	nodeDown func(mn int)
}

// netClient is a client's state on a network transport: a reusable call
// per memory node and, per memory node, the connection generation of its
// last unsignaled batch not yet followed by a completed signaled one.
type netClient struct {
	calls  []*tcpCall
	posted []uint64
	idx    [][]int32 // scratch: per memory node, the verbs of a batch
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
	if *dial < 0 || *timeout < 0 {
		return fmt.Errorf("%w: negative DialTimeout %v or Timeout %v (0: the default)", ErrBadRequest, *dial, *timeout)
	}
	if *dial == 0 {
		*dial = 5 * time.Second
	}
	if *timeout == 0 {
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

// joinNodes stamps the n memory nodes into one pool of n (node 0 decides
// the pool id), checks that each is listed at its position and has the
// configured sizes, adopts their geometry, and returns the pool id. Once
// every node has joined, it fixes the pool's node count in each (node 0
// first): a node that records another count is refused, node 0 before any
// other node is stamped, so that a list shorter or longer than the pool
// it names fails here rather than on the trees' first pointer into a node
// it lacks; a pool that fails to come up fixes no count.
func (p *Pool) joinNodes(n int, conn func(mn int) rpcCaller) (uint64, error) {
	pool := rand.Uint64() | 1
	for i := range n {
		r, err := conn(i).call(context.Background(), &rpcRequest{Kind: rpcJoin, Pool: pool, Adopt: i == 0, Index: i, Nodes: n, Create: true})
		if err != nil {
			return 0, fmt.Errorf("%d: %w", i, err)
		}
		c := p.cfg
		if g := r.Geom; (c.NodeBytes != 0 && uint64(c.NodeBytes) != g.main) || (c.OnChipBytes > 0 && uint64((c.OnChipBytes+7)&^7) != g.onChip) ||
			(c.OnChipBytes < 0 && g.onChip != 0) {
			return 0, fmt.Errorf("%d: %w: regions of %d and %d bytes, the configuration asks %d and %d",
				i, ErrBadNode, g.main, g.onChip, c.NodeBytes, c.OnChipBytes)
		}
		pool = r.Pool
		p.geom = append(p.geom, r.Geom)
	}
	for i := range n {
		if _, err := conn(i).call(context.Background(), &rpcRequest{Kind: rpcJoin, Pool: pool, Index: i, Nodes: n, Fix: true}); err != nil {
			return 0, fmt.Errorf("%d: %w", i, err)
		}
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

// newConn returns a new connection slot to memory node mn. Called with
// t.mu held.
func (t *tcpTransport) newConn(mn int) *tcpConn {
	if t.nodes == nil {
		for i, addr := range t.addrs {
			t.nodes = append(t.nodes, newTCPNode(i, addr))
		}
		t.life, t.stop = context.WithCancel(context.Background())
	}
	return &tcpConn{t: t, mn: mn, addr: t.addrs[mn], node: t.nodes[mn]}
}

// deadline returns the time by which a request sent now must have its
// reply, dials included: Timeout from now.
func (t *tcpTransport) deadline() time.Time { return time.Now().Add(t.cfg.Timeout) }

// nodeFailed records a failed dial or connection to node n; if it marked
// the node down, every connection to the node is closed, failing the
// requests pending on them at once.
func (t *tcpTransport) nodeFailed(n *tcpNode, probe bool, cause error) {
	if !n.failed(probe, cause) {
		return
	}
	t.mu.Lock()
	var conns []*tcpConn
	if n.mn < len(t.admin) {
		conns = append(conns, t.admin[n.mn])
	}
	for _, cn := range t.cns {
		if cn != nil {
			conns = append(conns, cn[n.mn]...)
		}
	}
	t.mu.Unlock()
	why := fmt.Errorf("closed: the node was found down (%v)", cause)
	for _, c := range conns {
		c.drop(why)
	}
	if t.nodeDown != nil {
		t.nodeDown(n.mn)
	}
}

func (t *tcpTransport) newClient(c *Client) {
	t.local.newClient(c)
	n := len(t.addrs)
	nc := &netClient{calls: make([]*tcpCall, n), posted: make([]uint64, n), idx: make([][]int32, n)}
	for i := range nc.calls {
		nc.calls[i] = newTCPCall()
		nc.calls[i].poster = c
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

func (t *tcpTransport) exec(ctx context.Context, c *Client, ops []Op, signaled bool) error {
	nc := c.net
	by := t.deadline()
	var leaveBy time.Time // DoBy's or PostBy's deadline (tcpCall.leaveBy)
	if c.by != 0 && c.by-t.now(c) < maxDeadlineAhead {
		leaveBy = t.start.Add(c.by)
	}
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
		call.ops, call.idx, call.leaveBy = ops, nil, leaveBy
		if err := t.send(ctx, by, c, first, call, signaled); err != nil {
			return err
		}
		if !signaled {
			return nil
		}
		return t.finish(ctx, c, first, call)
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
		call.ops, call.idx, call.leaveBy = ops, idx, leaveBy
		if err = t.send(ctx, by, c, mn, call, signaled); err != nil {
			if len(sent) > 0 {
				// Part of the batch left: its outcome is not nothing.
				err = sentAnyway(err)
			}
			break
		}
		sent = append(sent, mn)
	}
	if !signaled {
		return err
	}
	late, wrote := 0, 0
	for _, mn := range sent {
		e := t.finish(ctx, c, mn, nc.calls[mn])
		switch {
		case errors.Is(e, ErrLate):
			late++
		case e == nil && changes(ops, nc.calls[mn].idx):
			wrote++
		}
		if err == nil {
			err = e
		}
	}
	if late > 0 && wrote > 0 {
		// ErrLate says nothing was executed; here some of it was.
		return fmt.Errorf("%w: %d of the %d memory nodes of a batch refused their part as past its deadline, %d changed memory with theirs",
			ErrUnavailable, late, len(sent), wrote)
	}
	return err
}

// maxDeadlineAhead bounds the DoBy deadlines a batch carries to its memory
// nodes: one further ahead means none (callers pass math.MaxInt64 for
// that), and converting it would overflow.
const maxDeadlineAhead = 24 * time.Hour

// finish waits for the reply to call, the part of a signaled batch of c
// sent to memory node mn. Its completion also confirms the verbs c posted
// unsignaled on the node before it (posting order); if the connection
// failed instead, those verbs may be lost, and the error says so
// (errPostedLost). If ctx ended first, they stay unconfirmed on a
// connection that still works: the next batch or the connection's failure
// tells.
func (t *tcpTransport) finish(ctx context.Context, c *Client, mn int, call *tcpCall) error {
	err := t.conn(c, mn).awaitCtx(ctx, call)
	posted := c.net.posted[mn]
	var answered *remoteError
	switch {
	case posted == 0:
	case err == nil || errors.As(err, &answered):
		// The node answered (a refusal too, such as ErrLate): it ran
		// what came before on the connection.
		c.net.posted[mn] = 0
		call.link.confirm(c)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	default:
		c.net.posted[mn] = 0
		return fmt.Errorf("%w (%w)", err, errPostedLost)
	}
	return err
}

// sentAnyway strips the mark of notSent from the error of a part of a
// batch whose other parts left.
func sentAnyway(err error) error {
	if ns, ok := err.(notSentError); ok {
		return ns.err
	}
	return err
}

// send posts call's batch to memory node mn on c's connection, with its
// reply due by by. An unsignaled batch records the connection's generation
// in c.net.posted until a signaled batch to the node completes (finish).
func (t *tcpTransport) send(ctx context.Context, by time.Time, c *Client, mn int, call *tcpCall, signaled bool) error {
	call.isRPC = false
	posted := c.net.posted[mn]
	gen, err := t.conn(c, mn).post(ctx, by, call, signaled, posted)
	if err != nil {
		if errors.Is(err, ErrLate) {
			// It waited for the connection the verbs posted before it
			// went on: those stay to be confirmed.
			return notSent(err)
		}
		// post fails only before anything of the batch is written. But
		// unless the batch itself was refused, the connection that carried
		// the verbs posted unsignaled before it is gone: they may be lost.
		c.net.posted[mn] = 0
		switch {
		case errors.Is(err, errPostedLost):
			return err
		case posted != 0 && !errors.Is(err, ErrBadRequest):
			return fmt.Errorf("%w (%w)", err, errPostedLost)
		}
		return notSent(err)
	}
	if !signaled {
		c.net.posted[mn] = gen
	}
	return nil
}

func (t *tcpTransport) rpc(ctx context.Context, c *Client, mn int, req *rpcRequest) (rpcReply, error) {
	return t.conn(c, mn).callWith(ctx, c.net.calls[mn], req)
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
	stop := t.stop
	t.mu.Unlock()
	for _, c := range all {
		c.shut()
	}
	if stop != nil {
		stop() // dials in flight
	}
}
