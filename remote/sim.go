package remote

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
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
// goroutine (a runner), after which the caller waits for the token to come
// back. Events are ordered by (virtual time, sequence number), so the same
// program, seed and configuration always take the same path.
//
// Goroutines take part in three ways: those started by Pool.Go, which run
// as coroutines (an evStart hands them the token the first time); a
// goroutine that calls Pool.Wait while the simulation is idle starts the
// agenda and sleeps until it is done; any other goroutine that uses a client
// while the simulation is idle becomes an implicit participant for the
// duration of that call, so a test can use an index from its own goroutine
// between simulated phases. While the simulation runs, only its participants
// may use clients.
//
// The token passes to a plain goroutine (not started by Pool.Go) through a
// channel send, and to a coroutine through the driver (drive), a goroutine
// that resumes coroutines one after the other: a coroutine that blocks
// yields the runner it hands the token to back to the driver, which resumes
// it if it is a coroutine, so a hand-off between two coroutines is two
// direct goroutine switches and no trip through the Go scheduler. A plain
// goroutine that hands the token to a coroutine sends it to the driver,
// starting one if none is running.
//
// Every field below mu is guarded by mu. A running participant holds mu while
// it is inside the transport, never while it runs user code, and releases it
// before handing the token on.
type sim struct {
	p      *Pool
	prof   Profile
	k      simConst
	strict bool

	mu    sync.Mutex
	clock int64 // virtual time of the latest event, in picoseconds
	seq   uint64
	ev    agenda
	rng   *rand.Rand
	perm  []int32    // scratch for Strict line orders
	recs  []*verbRec // every verb record, by id
	free  []*verbRec // records not in flight
	// waiters holds, by slot, the runner each evWake or evStart hands the
	// token to: per client, the goroutine last blocked on it; per starting
	// goroutine started by Go, its coroutine.
	waiters    []*runner
	freeSlots  []int32 // slots of started goroutines, for reuse
	mns        []mnNIC
	cns        []nic // by compute node id
	atomicFree map[Addr]int64
	sweepAt    int

	busy   bool // a goroutine holds the token
	closed bool
	// cur is the coroutine holding the token, nil if a plain goroutine
	// holds it or nobody does; holder identifies the goroutine holding it
	// (curG), 0 if nobody does or a coroutine that has not started yet.
	// Whoever hands the token on sets them (pass).
	cur    *runner
	holder uintptr
	// driving: a driver goroutine exists (drive); it takes the coroutines
	// that plain goroutines hand the token to from driveCh.
	driving bool
	driveCh chan *runner
	enters  uint64 // calls begun, to tell an idle simulation from a stuck one
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

// runner is a goroutine that can receive the token: a plain goroutine
// blocks on ch; a coroutine (a goroutine started by Pool.Go, ch nil) yields
// to the driver and is resumed by it.
type runner struct {
	ch chan struct{}
	g  uintptr // the goroutine (curG), once known
	// A coroutine's iter.Pull functions: resume runs it until it yields
	// the runner it hands the token to, or returns (false) after handing it
	// to exitTo.
	resume func() (*runner, bool)
	yield  func(*runner) bool
	exitTo *runner
}

// simClient is the simulator's state of one Client.
type simClient struct {
	cn    int
	plain runner // a plain goroutine's runner for calls on this client
	slot  int32  // the client's index in sim.waiters
	cpu   int64  // CPU time charged but not yet spent, in picoseconds

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
		driveCh:    make(chan *runner, 1),
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
// If another goroutine holds the token, the caller is a plain goroutine: it
// queues for the token, which the holder hands on when it next blocks,
// leaves or ends (or idle does). Otherwise the caller is the token holder.
func (s *sim) enter(sc *simClient) {
	me := curG()
	s.mu.Lock()
	s.enters++
	switch {
	case !s.busy:
		s.busy = true
		s.holder = me
		sc.outside = true
		return
	case s.holder == me:
		return
	}
	sc.outside = true
	sc.plain.g = me
	s.enterq = append(s.enterq, sc)
	s.mu.Unlock()
	<-sc.plain.ch
	s.mu.Lock()
}

// nextEnter pops the first goroutine queued in enter, which takes the token,
// and returns its runner; nil if none is queued. Called with mu held.
func (s *sim) nextEnter() *runner {
	if len(s.enterq) == 0 {
		return nil
	}
	sc := s.enterq[0]
	s.enterq[0] = nil
	s.enterq = s.enterq[1:]
	return &sc.plain
}

// successor returns the runner that takes the token from a holder that
// stops using it (it blocks or ends): the first goroutine queued in enter,
// else the one the agenda wakes next. Called with mu held.
func (s *sim) successor() *runner {
	if r := s.nextEnter(); r != nil {
		return r
	}
	return s.dispatch()
}

// pass records that the token goes to r (nil: to nobody) and says whether
// the caller, a plain goroutine, must start a driver for it (handOff).
// Called with mu held by the token holder, which then unlocks and hands
// the token on.
func (s *sim) pass(r *runner) (start bool) {
	s.cur, s.holder = nil, 0
	if r == nil {
		return false
	}
	s.holder = r.g
	if r.ch != nil {
		return false
	}
	s.cur = r
	if s.driving {
		return false
	}
	s.driving = true
	return true
}

// handOff gives the token to r from a plain goroutine, without mu: through
// r's channel, or through the driver if r is a coroutine (a new one if pass
// said start).
func (s *sim) handOff(r *runner, start bool) {
	switch {
	case r == nil:
	case r.ch != nil:
		r.ch <- struct{}{}
	case start:
		go s.drive(r)
	default:
		s.driveCh <- r
	}
}

// drive resumes coroutines for as long as the token goes from one to
// another. When a coroutine hands it to a plain goroutine or to nobody, the
// driver waits for the next coroutine a plain goroutine hands it to; it
// ends when no goroutine started by Go is left, so that a later one starts
// a new driver (pass). Only one driver exists at a time: one coroutine at a
// time holds the token and at most one is queued in driveCh.
func (s *sim) drive(r *runner) {
	for {
		for r != nil && r.ch == nil {
			next, ok := r.resume()
			if !ok {
				next, r.exitTo = r.exitTo, nil
			}
			r = next
		}
		if r != nil {
			r.ch <- struct{}{}
		}
		s.mu.Lock()
		if s.live == 0 {
			s.driving = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		r = <-s.driveCh
	}
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
	start := s.pass(next)
	s.mu.Unlock()
	s.handOff(next, start)
}

// block parks the calling participant, which holds the token and mu, until
// an event hands the token back to sc; it runs the agenda meanwhile. It
// returns with mu held.
func (s *sim) block(sc *simClient) {
	self := s.cur
	if self == nil {
		self = &sc.plain
		self.g = s.holder
	}
	s.waiters[sc.slot] = self
	next := s.successor()
	if next == self {
		return // the next thing to happen is our own wake-up
	}
	start := s.pass(next)
	s.blocked++
	s.mu.Unlock()
	if self.ch == nil {
		self.yield(next) // to the driver, which resumes us with the token
	} else {
		s.handOff(next, start)
		<-self.ch
	}
	s.mu.Lock()
	s.blocked--
}

// dispatch runs events in order until one hands the token to a goroutine,
// and returns that goroutine's runner. When the agenda is empty it returns
// what idle returns. Called with mu held by the token holder.
func (s *sim) dispatch() *runner {
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
			r := s.waiters[e.ref]
			s.waiters[e.ref] = nil
			s.freeSlots = append(s.freeSlots, e.ref)
			return r
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
func (s *sim) idle() *runner {
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
	start := s.pass(next)
	s.mu.Unlock()
	s.handOff(next, start)
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

// spawn starts fn as a coroutine, which the driver resumes when an evStart
// hands it the token. A panic in fn carries fn's stack, which the driver's
// re-panic would otherwise lose.
func (s *sim) spawn(fn func()) {
	r := &runner{}
	r.resume, _ = iter.Pull(func(yield func(*runner) bool) {
		r.yield = yield
		s.mu.Lock()
		r.g = curG()
		s.holder = r.g
		s.mu.Unlock()
		defer func() {
			if p := recover(); p != nil {
				panic(fmt.Sprintf("%v\n\ngoroutine started by Pool.Go:\n%s", p, debug.Stack()))
			}
		}()
		fn()
		r.exitTo = s.exit()
	})
	s.mu.Lock()
	s.live++
	s.push(event{at: s.clock, kind: evStart, ref: s.waiterSlot(r)})
	if s.closed {
		s.kick()
		return
	}
	s.mu.Unlock()
}

// waiterSlot registers a runner and returns its slot.
func (s *sim) waiterSlot(r *runner) int32 {
	if n := len(s.freeSlots); n > 0 {
		i := s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
		s.waiters[i] = r
		return i
	}
	s.waiters = append(s.waiters, r)
	return int32(len(s.waiters) - 1)
}

// exit ends a goroutine started by Go, a coroutine holding the token, and
// returns the runner it passes the token to.
func (s *sim) exit() *runner {
	s.mu.Lock()
	s.live--
	next := s.successor()
	s.pass(next)
	s.mu.Unlock()
	return next
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
	start := s.pass(next)
	s.mu.Unlock()
	s.handOff(next, start)
	return <-done
}

func (s *sim) newClient(c *Client) {
	sc := &simClient{cn: c.cn.id, plain: runner{ch: make(chan struct{}, 1)}, parkIdx: -1,
		last: make([]verbSpan, len(s.mns))}
	s.mu.Lock()
	for len(s.cns) <= sc.cn {
		s.cns = append(s.cns, nic{})
	}
	sc.slot = s.waiterSlot(&sc.plain)
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
