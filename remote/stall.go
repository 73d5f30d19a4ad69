package remote

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Stalls configures Pool.InjectStalls. The zero value injects none.
type Stalls struct {
	// Rate is the average number of stalls per second of the pool's clock
	// (virtual time in the simulator).
	Rate float64
	// Pause is how long each stall holds its client.
	Pause time.Duration
	// Max, if positive, ends the injection after that many stalls: a
	// stalled client that others wait for stretches the run's time, and
	// with it the stalls due.
	Max uint64
	// Seed sets the sequence of stalls.
	Seed uint64
}

// InjectStalls pauses clients at random as s says, replacing an earlier
// injection: the first batch a client posts after a stall is due leaves
// s.Pause later than it would have, as if the client's process had been
// descheduled or stopped right before posting it. In the simulator the
// pause is virtual time (Client.Compute), so a run with stalls repeats
// exactly; on the other transports the client sleeps. Nothing is lost:
// the batch executes as posted after the pause, or not at all if DoBy's
// deadline has passed meanwhile (ErrLate).
//
// Stalls test the windows of lease-based protocols (docs/recovery.md,
// "Stale writers"): a pause longer than a lease between a client's check of
// its lease and the verb that follows it is what lets others judge it dead
// and act while its verb is still to land. The zero Stalls stops the
// injection. It returns the number of stalls injected so far (since the
// pool was created).
func (p *Pool) InjectStalls(s Stalls) uint64 {
	st := &p.stall
	st.mu.Lock()
	defer st.mu.Unlock()
	on := s.Rate > 0 && s.Pause > 0
	st.cfg, st.left = s, s.Max
	if on {
		st.rng = rand.New(rand.NewPCG(s.Seed, 0x7374616c6c))
		st.next = p.Now() + expInterval(st.rng, s.Rate)
	}
	st.on.Store(on)
	return st.count.Load()
}

// Stalls returns the number of stalls injected by InjectStalls.
func (p *Pool) Stalls() uint64 { return p.stall.count.Load() }

// stallSchedule is the pool's random stall injection.
type stallSchedule struct {
	on    atomic.Bool
	count atomic.Uint64
	mu    sync.Mutex
	cfg   Stalls
	left  uint64 // stalls before cfg.Max is reached
	rng   *rand.Rand
	next  time.Duration
}

// stallIfDue pauses c before a batch if the pool's next stall is due, and
// reports whether it did.
func (c *Client) stallIfDue() bool {
	s := &c.pool.stall
	now := c.Now()
	s.mu.Lock()
	if !s.on.Load() || now < s.next {
		s.mu.Unlock()
		return false
	}
	for s.next <= now {
		s.next += expInterval(s.rng, s.cfg.Rate)
	}
	if s.cfg.Max > 0 {
		if s.left--; s.left == 0 {
			s.on.Store(false)
		}
	}
	pause := s.cfg.Pause
	s.count.Add(1)
	s.mu.Unlock()
	if c.pool.cfg.Sim != nil {
		c.Compute(pause)
	} else {
		time.Sleep(pause)
	}
	return true
}
