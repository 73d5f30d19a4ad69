package remote

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
)

// sim is the deterministic virtual-time transport.
//
// Scheduling is token passing without a scheduler goroutine. Exactly one
// goroutine holds the token and runs; virtual time stands still while it
// does. When it blocks (a signaled batch, an RPC, a Wait) it pushes the event
// that will wake it and runs the agenda itself (dispatch): memory events are
// applied on the spot, and the first wake-up event hands the token to its
// goroutine through that goroutine's channel, after which the caller blocks on
// its own channel. Events are ordered by (virtual time, sequence number), so
// the same program, seed and configuration always take the same path.
//
// Goroutines take part in three ways: those started by Pool.Go (an evStart
// hands them the token the first time); a goroutine that calls Pool.Wait
// while the simulation is idle starts the agenda and sleeps until it is done;
// any other goroutine that uses a client while the simulation is idle becomes
// an implicit participant for the duration of that call, so a test can use
// an index from its own goroutine between simulated phases. While the
// simulation runs, only its participants may use clients.
//
// Every field below mu is guarded by mu. A running participant holds mu while
// it is inside the transport, never while it runs user code, and releases it
// before handing the token on.
type sim struct {
	p      *Pool
	prof   Profile
	k      simConst
	strict bool

	mu         sync.Mutex
	clock      int64 // virtual time of the latest event, in picoseconds
	seq        uint64
	ev         agenda
	rng        *rand.Rand
	perm       []int32         // scratch for Strict line orders
	recs       []*verbRec      // every verb record, by id
	free       []*verbRec      // records not in flight
	waiters    []chan struct{} // token channels, by slot: clients' and starting goroutines'
	freeSlots  []int32         // slots of started goroutines, for reuse
	mns        []mnNIC
	cns        []nic // by compute node id
	atomicFree map[Addr]int64
	sweepAt    int

	busy   bool // a goroutine holds the token
	closed bool
	enters uint64 // calls begun, to tell an idle simulation from a stuck one
	// blocked counts goroutines waiting in block for an event to hand them
	// the token: while there are any, a leaving implicit participant runs
	// the agenda instead of releasing the token, so no wake-up is stranded.
	blocked int
	// enterq holds plain goroutines waiting in enter for another plain
	// goroutine's call to end.
	enterq  []*simClient
	live    int          // goroutines started by Go that have not returned
	parked  []*simClient // clients parked in Wait
	drivers []chan error // Pool.Wait calls waiting for the agenda to drain
}

// simClient is the simulator's state of one Client.
type simClient struct {
	cn   int
	ch   chan struct{} // receives the token
	slot int32         // index of ch in sim.waiters
	cpu  int64         // CPU time charged but not yet spent, in picoseconds

	last []verbSpan // per memory node: the latest verb's access window

	// The signaled batch in flight: verbs without a response yet, and the
	// latest response arrival so far.
	pending int
	arrive  int64

	// Wait and Signal.
	permit  bool
	parkIdx int // index in sim.parked, or -1
	parkAt  int64
	parkGen uint64
	wakeErr error
	outside bool // the current call is an implicit participant's
	// free: parked in Wait as an implicit participant while nothing else
	// can happen (see idle).
	free bool

	// Signaled batches completed and their latencies, in picoseconds.
	batches        uint64
	latSum, latMax int64
}

// newSimulator returns the simulator transport of p. cfg is normalized.
func newSimulator(p *Pool, cfg SimConfig) transport {
	s := &sim{
		p:          p,
		prof:       cfg.Profile,
		k:          newSimConst(cfg.Profile),
		strict:     cfg.Ordering == Strict,
		rng:        rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		mns:        make([]mnNIC, len(p.geom)),
		atomicFree: make(map[Addr]int64),
		sweepAt:    1024,
	}
	if p.cfg.From != nil {
		s.clock = p.cfg.From.clock
	}
	return s
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.ev.push(e)
}

// enter locks the simulator for a call by sc's goroutine. If the simulation
// is idle, the caller takes the token as an implicit participant until leave.
// If the token is taken while no goroutine started by Go is live, the caller
// is a plain goroutine and so is the holder: it queues for the token, which
// leave or idle hands on. Otherwise the caller is the token holder, a
// goroutine started by Go.
func (s *sim) enter(sc *simClient) {
	s.mu.Lock()
	s.enters++
	if !s.busy {
		s.busy = true
		sc.outside = true
		return
	}
	if s.live > 0 {
		return
	}
	sc.outside = true
	s.enterq = append(s.enterq, sc)
	s.mu.Unlock()
	<-sc.ch
	s.mu.Lock()
}

// nextEnter pops the first goroutine queued in enter, which takes the token,
// and returns its channel; nil if none is queued. Called with mu held.
func (s *sim) nextEnter() chan struct{} {
	if len(s.enterq) == 0 {
		return nil
	}
	sc := s.enterq[0]
	s.enterq[0] = nil
	s.enterq = s.enterq[1:]
	return sc.ch
}

// leave ends a call begun with enter and unlocks. An implicit participant
// hands the token to the next goroutine queued in enter, or gives it back;
// if a Pool.Wait or a blocked goroutine is waiting meanwhile, it runs the
// agenda on instead so that the waiter is not stranded.
func (s *sim) leave(sc *simClient) {
	if !sc.outside {
		s.mu.Unlock()
		return
	}
	sc.outside = false
	next := s.nextEnter()
	switch {
	case next != nil:
	case len(s.drivers) == 0 && s.blocked == 0:
		s.busy = false
	default:
		next = s.dispatch()
	}
	s.mu.Unlock()
	if next != nil {
		next <- struct{}{}
	}
}

// block parks the calling participant, which holds the token and mu, until
// an event hands the token back to sc; it runs the agenda meanwhile. It
// returns with mu held.
func (s *sim) block(sc *simClient) {
	next := s.dispatch()
	if next == sc.ch {
		return // the next thing to happen is our own wake-up
	}
	s.blocked++
	s.mu.Unlock()
	if next != nil {
		next <- struct{}{}
	}
	<-sc.ch
	s.mu.Lock()
	s.blocked--
}

// dispatch runs events in order until one hands the token to a goroutine,
// and returns that goroutine's channel. When the agenda is empty it returns
// what idle returns. Called with mu held by the token holder.
func (s *sim) dispatch() chan struct{} {
	for s.ev.len() > 0 {
		e := s.ev.pop()
		s.clock = e.at
		switch e.kind {
		case evPost:
			s.post(s.recs[e.ref])
		case evLine:
			s.applyLine(s.recs[e.ref], e.line)
		case evDone:
			s.done(s.recs[e.ref], e.line)
		case evWake:
			return s.waiters[e.ref]
		case evStart:
			ch := s.waiters[e.ref]
			s.waiters[e.ref] = nil
			s.freeSlots = append(s.freeSlots, e.ref)
			return ch
		}
	}
	return s.idle()
}

// idle handles an empty agenda: nothing can happen any more until a
// goroutine outside the simulation acts. Implicit participants parked in
// Wait may be woken by another plain goroutine, which the simulator cannot
// see coming: they stay parked without the token ("free"), and one that is
// still parked after freeGrace of wall time in which no call began is
// woken with ErrDeadlock (see watchFree). Every Pool.Wait returns, with
// ErrDeadlock if goroutines started by Go are still blocked, and the token
// goes to the next goroutine queued in enter, or is released.
func (s *sim) idle() chan struct{} {
	for _, sc := range s.parked {
		if sc.outside && !sc.free {
			sc.free = true
			s.watchFree(sc, sc.parkGen)
		}
	}
	next := s.nextEnter()
	s.busy = next != nil
	var err error
	if s.live > 0 {
		err = s.deadlock()
	}
	for _, d := range s.drivers {
		d <- err
	}
	s.drivers = s.drivers[:0]
	return next
}

// freeGrace is how long a free-parked implicit participant waits, with no
// call begun by any goroutine, before its Wait fails with ErrDeadlock.
const freeGrace = time.Second

// watchFree wakes sc with ErrDeadlock if it is still free-parked in the Wait
// numbered gen after freeGrace in which no call began. Called with mu held.
func (s *sim) watchFree(sc *simClient, gen uint64) {
	enters := s.enters
	time.AfterFunc(freeGrace, func() {
		s.mu.Lock()
		if sc.parkIdx < 0 || sc.parkGen != gen {
			s.mu.Unlock()
			return
		}
		if s.enters != enters || s.busy {
			s.watchFree(sc, gen)
			s.mu.Unlock()
			return
		}
		s.unpark(sc)
		s.wake(sc, s.clock, s.deadlock())
		s.kick()
	})
}

// wake schedules sc's wake-up from Wait at virtual time at with err. Called
// with mu held, after unpark.
func (s *sim) wake(sc *simClient, at int64, err error) {
	sc.wakeErr = err
	sc.free = false
	s.push(event{at: at, kind: evWake, ref: sc.slot})
}

func (s *sim) deadlock() error {
	return deadlockError(len(s.parked), s.live)
}

// kick runs the agenda from a goroutine that is not a participant (Close, a
// cancelled Wait) if nobody else is running it, then unlocks.
func (s *sim) kick() {
	if s.busy || s.ev.len() == 0 {
		s.mu.Unlock()
		return
	}
	s.busy = true
	next := s.dispatch()
	s.mu.Unlock()
	if next != nil {
		next <- struct{}{}
	}
}

func (s *sim) exec(_ context.Context, c *Client, ops []Op, signaled bool) error {
	sc := c.sim
	s.enter(sc)
	t0 := s.clock + sc.cpu
	if c.by != 0 && psDur(t0) > c.by {
		s.leave(sc)
		return ErrLate
	}
	at := t0 + int64(len(ops))*s.k.cpuVerb
	var head, tail *verbRec
	for i := range ops {
		v := s.newVerb(sc, &ops[i], signaled)
		if head == nil {
			head = v
		} else {
			tail.next = v
		}
		tail = v
	}
	s.push(event{at: at, kind: evPost, ref: head.id})
	if !signaled {
		sc.cpu = at - s.clock
		s.leave(sc)
		return nil
	}
	sc.cpu = 0
	sc.pending, sc.arrive = len(ops), 0
	s.block(sc)
	lat := s.clock - t0
	sc.batches++
	sc.latSum += lat
	sc.latMax = max(sc.latMax, lat)
	s.leave(sc)
	return nil
}

// rpc costs a round trip plus RPCTime on the memory node's CPU, which serves
// RPCs one at a time in arrival order. The request is served when the reply
// arrives; RPCs to one node complete in service order, so their effects keep
// that order.
func (s *sim) rpc(_ context.Context, c *Client, mn int, req *rpcRequest) (rpcReply, error) {
	sc := c.sim
	s.enter(sc)
	t0 := s.clock + sc.cpu
	sc.cpu = 0
	m := &s.mns[mn]
	start := max(t0+s.k.rpcOut, m.cpuFree)
	m.cpuFree = start + s.k.rpcTime
	s.push(event{at: m.cpuFree + s.k.rpcBack, kind: evWake, ref: sc.slot})
	s.block(sc)
	r, err := s.p.mns[mn].serve(req)
	s.leave(sc)
	return r, err
}

func (s *sim) used(_ context.Context, mn int) (uint64, error) { return s.p.usedInProcess(mn) }

// backoffUnit is the simulator's first backoff wait; it doubles up to 64
// times that.
const backoffUnit = 100 * time.Nanosecond

func (s *sim) backoff(c *Client, attempt int) {
	s.compute(c, backoffUnit<<min(attempt, 6))
	runtime.Gosched()
}

func (s *sim) wait(ctx context.Context, c *Client) error {
	sc := c.sim
	s.enter(sc)
	if s.closed {
		s.leave(sc)
		return ErrClosed
	}
	if sc.permit {
		sc.permit = false
		s.leave(sc)
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.leave(sc)
		return err
	}
	sc.parkAt = s.clock + sc.cpu
	sc.cpu = 0
	sc.parkGen++
	sc.parkIdx = len(s.parked)
	s.parked = append(s.parked, sc)
	var stop func() bool
	if ctx.Done() != nil {
		gen := sc.parkGen
		stop = context.AfterFunc(ctx, func() { s.cancelWait(sc, gen, ctx.Err()) })
	}
	s.block(sc)
	err := sc.wakeErr
	sc.wakeErr = nil
	s.leave(sc)
	if stop != nil {
		stop()
	}
	return err
}

// cancelWait wakes sc with err if it is still in the Wait numbered gen.
func (s *sim) cancelWait(sc *simClient, gen uint64, err error) {
	s.mu.Lock()
	if sc.parkIdx < 0 || sc.parkGen != gen {
		s.mu.Unlock()
		return
	}
	s.unpark(sc)
	s.wake(sc, s.clock, err)
	s.kick()
}

// unpark removes sc from the parked list.
func (s *sim) unpark(sc *simClient) {
	i, n := sc.parkIdx, len(s.parked)-1
	s.parked[i] = s.parked[n]
	s.parked[i].parkIdx = i
	s.parked[n] = nil
	s.parked = s.parked[:n]
	sc.parkIdx = -1
}

func (s *sim) signal(c *Client) {
	sc := c.sim
	s.mu.Lock()
	if sc.parkIdx < 0 {
		sc.permit = true
		s.mu.Unlock()
		return
	}
	s.unpark(sc)
	s.wake(sc, max(s.clock, sc.parkAt), nil)
	// The signaller may be a plain goroutine and nobody may be running the
	// agenda: run it unless somebody is.
	s.kick()
}

func (s *sim) compute(c *Client, d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	c.sim.cpu += durPS(d)
	s.mu.Unlock()
}

func (s *sim) now(c *Client) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil {
		return psDur(s.clock)
	}
	return psDur(s.clock + c.sim.cpu)
}

func (s *sim) spawn(fn func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.live++
	s.push(event{at: s.clock, kind: evStart, ref: s.waiterSlot(ch)})
	closed := s.closed
	go func() {
		<-ch
		fn()
		s.exit()
	}()
	if closed {
		s.kick()
		return
	}
	s.mu.Unlock()
}

// waiterSlot registers a token channel and returns its slot.
func (s *sim) waiterSlot(ch chan struct{}) int32 {
	if n := len(s.freeSlots); n > 0 {
		i := s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
		s.waiters[i] = ch
		return i
	}
	s.waiters = append(s.waiters, ch)
	return int32(len(s.waiters) - 1)
}

// exit ends a goroutine started by Go: it passes the token on.
func (s *sim) exit() {
	s.mu.Lock()
	s.live--
	next := s.dispatch()
	s.mu.Unlock()
	if next != nil {
		next <- struct{}{}
	}
}

func (s *sim) waitAll() error {
	done := make(chan error, 1)
	s.mu.Lock()
	s.drivers = append(s.drivers, done)
	if s.busy {
		s.mu.Unlock()
		return <-done
	}
	s.busy = true
	next := s.dispatch()
	s.mu.Unlock()
	if next != nil {
		next <- struct{}{}
	}
	return <-done
}

func (s *sim) newClient(c *Client) {
	sc := &simClient{cn: c.cn.id, ch: make(chan struct{}, 1), parkIdx: -1,
		last: make([]verbSpan, len(s.mns))}
	s.mu.Lock()
	for len(s.cns) <= sc.cn {
		s.cns = append(s.cns, nic{})
	}
	sc.slot = s.waiterSlot(sc.ch)
	c.sim = sc
	s.mu.Unlock()
}

// close wakes every parked client with ErrClosed and, if the simulation is
// idle, runs the agenda so that no participant stays blocked.
func (s *sim) close() {
	s.mu.Lock()
	s.closed = true
	for i, sc := range s.parked {
		sc.parkIdx = -1
		s.wake(sc, s.clock, ErrClosed)
		s.parked[i] = nil
	}
	s.parked = s.parked[:0]
	s.kick()
}
