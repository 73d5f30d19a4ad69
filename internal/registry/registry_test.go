package registry

import (
	"errors"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

func newPool(t *testing.T, sim bool, seed uint64) *remote.Pool {
	t.Helper()
	cfg := remote.Config{MemoryNodes: 2, NodeBytes: 16 << 20}
	if sim {
		cfg.Sim = &remote.SimConfig{Ordering: remote.Strict, Seed: seed}
	}
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func join(t *testing.T, c *remote.Client, opts Options) *Node {
	t.Helper()
	n, err := Join(t.Context(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func register(t *testing.T, n *Node, c *remote.Client) *Member {
	t.Helper()
	m, err := n.Register(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTagsUnique registers clients on several nodes, closes and registers
// them again, and checks that no two tags are ever equal, that a node claims
// a second block when its first is full, and that tags round-trip.
func TestTagsUnique(t *testing.T) {
	p := newPool(t, false, 0)
	opts := Options{Blocks: 16, Clients: 3}
	seen := map[uint64]bool{}
	for range 3 {
		cn := p.NewComputeNode()
		c := cn.NewClient()
		n := join(t, c, opts)
		var ms []*Member
		for range 7 {
			m := register(t, n, c)
			if seen[m.Tag()] {
				t.Fatalf("tag %#x handed out twice", m.Tag())
			}
			seen[m.Tag()] = true
			b, k, inc := parseTag(m.Tag())
			if b != m.blk.idx || k != m.k || inc != m.inc || !IsTag(m.Tag()) {
				t.Fatalf("tag %#x parses as block %d client %d inc %d, member has %d %d %d", m.Tag(), b, k, inc, m.blk.idx, m.k, m.inc)
			}
			ms = append(ms, m)
		}
		if len(n.blocks) != 3 {
			t.Fatalf("7 members of 3 per block claimed %d blocks", len(n.blocks))
		}
		for _, m := range ms[:4] {
			if err := m.Close(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}
		for range 4 {
			m := register(t, n, c)
			if seen[m.Tag()] {
				t.Fatalf("tag %#x handed out twice after Close", m.Tag())
			}
			seen[m.Tag()] = true
		}
	}
}

// TestJoinErrors covers bad options, a geometry mismatch and a full registry.
func TestJoinErrors(t *testing.T) {
	p := newPool(t, false, 0)
	c := p.NewComputeNode().NewClient()
	for _, o := range []Options{
		{Blocks: -1}, {Blocks: maxBlocks + 1}, {Clients: maxClients + 1},
		{Lease: time.Millisecond, Interval: time.Millisecond}, {Lease: -1},
	} {
		if _, err := Join(t.Context(), c, o); err == nil {
			t.Errorf("Join(%+v) succeeded", o)
		}
	}
	c2 := p.NewComputeNode().NewClient()
	first := join(t, c, Options{Blocks: 2, Clients: 4, Lease: 20 * time.Millisecond})
	if _, err := Join(t.Context(), c, Options{Blocks: 2, Clients: 8}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("Join with other geometry: %v, want ErrMismatch", err)
	}
	second := join(t, c, Options{Blocks: 2, Clients: 4, Lease: 20 * time.Millisecond})
	// Both nodes beat while a third one tries to join: it waits a lease for
	// a silent block and finds none.
	opts := Options{Blocks: 2, Clients: 4, Lease: 20 * time.Millisecond}
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		m1, m2 := register(t, first, c2), register(t, second, c2)
		for {
			select {
			case <-stop:
				_ = m1.Close(t.Context(), c2)
				_ = m2.Close(t.Context(), c2)
				return
			case <-time.After(time.Millisecond):
			}
			_, _ = m1.Touch(t.Context(), c2)
			_, _ = m2.Touch(t.Context(), c2)
		}
	}()
	_, err := Join(t.Context(), c, opts)
	close(stop)
	<-beating
	if !errors.Is(err, ErrFull) {
		t.Fatalf("third Join of 2 blocks of live nodes: %v, want ErrFull", err)
	}
	if err := second.Close(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	third := join(t, c, opts)
	if third.blocks[0].idx != second.blocks[0].idx || third.blocks[0].owner == second.blocks[0].owner {
		t.Fatalf("a released block was not claimed again in a new incarnation")
	}
	if _, err := second.Register(t.Context(), c); !errors.Is(err, ErrClosed) {
		t.Fatalf("Register on a closed node: %v", err)
	}
}

// TestDead judges lock holders: a closed or replaced member at once, a
// member whose node keeps beating never, a node that stopped beating after a
// Lease of the waiter's (virtual) time.
func TestDead(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true, 1)
	opts := Options{Lease: time.Millisecond}
	holderCN, waiterCN := p.NewComputeNode(), p.NewComputeNode()
	hc, wc := holderCN.NewClient(), waiterCN.NewClient()
	hn, wn := join(t, hc, opts), join(t, wc, opts)
	dead := func(w *Watch, word uint64) bool {
		t.Helper()
		d, err := wn.Dead(ctx, wc, w, word)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	closed := register(t, hn, hc)
	if err := closed.Close(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if !dead(&Watch{}, closed.Tag()|1<<61) {
		t.Fatal("a closed member's tag is not dead")
	}
	if dead(&Watch{}, 12345) {
		t.Fatal("a word that is not a tag was judged dead")
	}

	live := register(t, hn, hc)
	var w Watch
	for i := range 50 {
		if dead(&w, live.Tag()) {
			t.Fatalf("a beating holder judged dead at step %d", i)
		}
		wc.Compute(opts.Lease / 4)
		hc.Compute(opts.Lease / 4)
		if _, err := live.Touch(ctx, hc); err != nil {
			t.Fatal(err)
		}
	}
	// The holder stops: dead once a Lease of the waiter's time has passed
	// with the same word and a heartbeat standing still.
	w = Watch{}
	if dead(&w, live.Tag()) {
		t.Fatal("judged dead on first sight")
	}
	wc.Compute(opts.Lease / 2)
	if dead(&w, live.Tag()) {
		t.Fatal("judged dead before a Lease")
	}
	wc.Compute(opts.Lease)
	if !dead(&w, live.Tag()) {
		t.Fatal("a holder whose heartbeat stood still for a Lease is not dead")
	}
	if _, _, err := func() (int, int, error) {
		_, err := wn.Dead(ctx, wc, &Watch{}, tag(maxBlocks-1, 0, 1))
		return 0, 0, err
	}(); err == nil {
		t.Fatal("a tag outside the registry was accepted")
	}
}

// TestTouchStale checks that a node that did not beat for half a Lease
// refreshes its epoch and reports it.
func TestTouchStale(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true, 1)
	opts := Options{Lease: time.Millisecond}
	a, b := p.NewComputeNode().NewClient(), p.NewComputeNode().NewClient()
	na, nb := join(t, a, opts), join(t, b, opts)
	ma := register(t, na, a)
	register(t, nb, b)
	// b advances the global epoch alone while a sleeps past its lease.
	for range 5 {
		b.Compute(2 * opts.Lease)
		if _, err := nb.Reclaim(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if nb.Epoch() < 3 {
		t.Fatalf("the global epoch did not advance without the sleeping node: %d", nb.Epoch())
	}
	a.Compute(opts.Lease)
	stale, err := ma.Touch(ctx, a)
	if err != nil || !stale {
		t.Fatalf("Touch after a Lease: stale %v, %v", stale, err)
	}
	if na.Epoch() < nb.Epoch()-1 {
		t.Fatalf("a stale node's epoch %d was not refreshed (global about %d)", na.Epoch(), nb.Epoch())
	}
	if stale, err := ma.Touch(ctx, a); err != nil || stale {
		t.Fatalf("second Touch: stale %v, %v", stale, err)
	}
}

// TestJudged checks the holder's side of a lease (Node.Judged): a gap in
// the node's heartbeats is seen by every member holding a lock, not only by
// the one whose Touch ended it (which alone gets stale from Touch); a lock
// taken less than Lease/2 after a gap ended is suspect, one taken later or
// renewed after the gap is not, nor one taken right after the gap with a
// tag created after it; and a silence of Lease/2 is suspect before any
// heartbeat ends it.
func TestJudged(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true, 1)
	opts := Options{Lease: time.Millisecond}
	cn := p.NewComputeNode()
	a, b := cn.NewClient(), cn.NewClient()
	n := join(t, a, opts)
	ma, mb := register(t, n, a), register(t, n, b)
	lockedAt := ma.LockedAt(a.Now())
	if n.Judged(lockedAt, a.Now()) {
		t.Fatal("a lock taken while the node beats is judged")
	}
	// The node stalls for a Lease (b's CPU time; the simulator's clock
	// reaches it at b's next verb), and b's Touch ends the gap.
	b.Compute(opts.Lease)
	if !n.Judged(lockedAt, b.Now()) {
		t.Fatal("a silence of a Lease is not judged before it ends")
	}
	if stale, err := mb.Touch(ctx, b); err != nil || !stale {
		t.Fatalf("the Touch that ends the gap: stale %v, %v", stale, err)
	}
	if stale, err := ma.Touch(ctx, a); err != nil || stale {
		t.Fatalf("the sibling's Touch after the gap: stale %v, %v (want false: b sent the beat)", stale, err)
	}
	if !n.Judged(lockedAt, a.Now()) {
		t.Fatal("a lock held across a gap that another member's Touch ended is not judged")
	}
	renewed := a.Now()
	if n.Judged(renewed, a.Now()) {
		t.Fatal("a lock renewed after the gap is judged")
	}
	if !n.Judged(ma.LockedAt(a.Now()), a.Now()) {
		t.Fatal("a lock taken right after a gap ended is not judged (a waiter may act on a judgement made during the gap)")
	}
	if _, err := mb.Renew(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n.Judged(mb.LockedAt(b.Now()), b.Now()) {
		t.Fatal("a lock taken right after a gap ended, with a tag renewed after it, is judged: every lock in the next half lease would renew")
	}
	// Half a Lease later, beating all along, a new lock is safe again.
	for range 5 {
		a.Compute(opts.Lease / 8)
		if _, err := ma.Touch(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if later := ma.LockedAt(a.Now()); n.Judged(later, a.Now()) {
		t.Fatalf("a lock taken %v after the gap ended is judged", 5*opts.Lease/8)
	}
}

// TestMarkDeadRetry checks that a MarkDead whose write failed keeps the
// member's slot (a new member gets another one), so that a second MarkDead
// with a working client marks it dead without touching anyone else.
func TestMarkDeadRetry(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true, 1)
	cn := p.NewComputeNode()
	c := cn.NewClient()
	n := join(t, c, Options{Blocks: 2, Clients: 4})
	m := register(t, n, c)
	broken := cn.NewClient()
	broken.Crash(remote.Fault{})
	if err := m.MarkDead(ctx, broken); err == nil {
		t.Fatal("MarkDead with a crashed client succeeded")
	}
	other := register(t, n, c)
	if other.k == m.k && other.blk == m.blk {
		t.Fatal("a member whose MarkDead failed lost its slot to a new member")
	}
	if err := m.MarkDead(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		m    *Member
		dead bool
	}{{m, true}, {other, false}} {
		if d, err := n.Dead(ctx, c, &Watch{}, x.m.Tag()); err != nil || d != x.dead {
			t.Fatalf("Dead(%#x) = %v, %v, want %v", x.m.Tag(), d, err, x.dead)
		}
	}
}

// TestJoinTakesOverSilentBlock fills the registry with nodes that then go
// silent (their process died without closing): a node that joins waits a
// lease, takes one of their blocks over in a new incarnation, and the dead
// node's tags are judged dead at once.
func TestJoinTakesOverSilentBlock(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true, 1)
	opts := Options{Blocks: 2, Clients: 4, Lease: time.Millisecond}
	c := p.NewComputeNode().NewClient()
	dead := join(t, c, opts)
	m := register(t, dead, c)
	join(t, c, opts)
	start := c.Now()
	n, err := Join(ctx, c, opts)
	if err != nil {
		t.Fatalf("Join with every block held by a silent node: %v", err)
	}
	if waited := c.Now() - start; waited < opts.Lease {
		t.Fatalf("the joiner took a block over after %v, less than a lease", waited)
	}
	if d, err := n.Dead(ctx, c, &Watch{}, m.Tag()); err != nil || !d {
		t.Fatalf("the silent node's member: Dead = %v, %v; want dead at once", d, err)
	}
	if _, err := n.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
}

// TestRegisterAtOnceClaimsFew registers many clients of one compute node at
// the same time, in the simulator and with plain goroutines: the node
// claims the blocks their slots need, not one block per client that found
// the slots taken (which filled a 256-block registry with 16 compute nodes
// of 56 clients).
func TestRegisterAtOnceClaimsFew(t *testing.T) {
	const clients, perBlock = 100, 8
	for _, sim := range []bool{true, false} {
		p := newPool(t, sim, 1)
		cn := p.NewComputeNode()
		n := join(t, cn.NewClient(), Options{Blocks: 64, Clients: perBlock})
		errs := make([]error, clients)
		done := make(chan struct{}, clients)
		for i := range clients {
			c := cn.NewClient()
			run := func() {
				_, errs[i] = n.Register(t.Context(), c)
				done <- struct{}{}
			}
			if sim {
				p.Go(run)
			} else {
				go run()
			}
		}
		if sim {
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		for range clients {
			<-done
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		blocks := len(n.blocks)
		n.mu.Unlock()
		if want := (clients + perBlock - 1) / perBlock; blocks != want {
			t.Errorf("sim %v: %d clients registered at once claimed %d blocks of %d slots, want %d", sim, clients, blocks, perBlock, want)
		}
	}
}
