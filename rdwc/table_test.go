package rdwc

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// fixture is one compute node with a Table and n fake clients over a store of
// 4 keys, in local mode.
type fixture struct {
	pool *remote.Pool
	st   *store
	t    *Table
	fs   []*fakeClient
}

func newFixture(tb testing.TB, opts Options, n int) *fixture {
	pool := newPool(tb, false)
	fx := &fixture{pool: pool, st: newStore(tb, pool, 4), t: New(opts)}
	cn := pool.NewComputeNode()
	for range n {
		fx.fs = append(fx.fs, newFakeClient(fx.st, cn.NewClient()))
	}
	return fx
}

// get starts a read of key i by client j and returns where its outcome will
// arrive.
func (fx *fixture) get(j, i int) <-chan result {
	ch := make(chan result, 1)
	go func() {
		v, found, err := fx.fs[j].Get(fx.t, i)
		ch <- result{bytes.Clone(v), found, err}
	}()
	return ch
}

// put starts a write of v under key i by client j.
func (fx *fixture) put(j, i int, v []byte) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- result{err: fx.fs[j].Put(fx.t, i, v)} }()
	return ch
}

// stored returns key i's value in remote memory.
func (fx *fixture) stored(tb testing.TB, i int) []byte {
	tb.Helper()
	buf := make([]byte, 8)
	if err := fx.fs[0].c.Read(context.Background(), fx.st.base+remote.Addr(8*i), buf); err != nil {
		tb.Fatal(err)
	}
	return buf
}

func (fx *fixture) waitWindow(tb testing.TB, i, joined, pending int) {
	tb.Helper()
	eventually(tb, "the window has the expected waiters", func() bool {
		open, j, p := fx.t.window(key(i))
		return open && j == joined && p == pending
	})
}

func (fx *fixture) verbs() remote.Stats {
	var s remote.Stats
	for _, f := range fx.fs {
		s = s.Add(f.c.Stats())
	}
	return s
}

func TestNewSlots(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, DefaultSlots}, {-3, DefaultSlots}, {1, 1}, {3, 4}, {1024, 1024}, {1025, 2048}} {
		if got := New(Options{Slots: c.in}).Options().Slots; got != c.want {
			t.Errorf("Slots %d: got %d, want %d", c.in, got, c.want)
		}
	}
}

func TestReadDelegation(t *testing.T) {
	fx := newFixture(t, Options{}, 4)
	if err := fx.fs[0].Put(fx.t, 1, val(7)); err != nil {
		t.Fatal(err)
	}
	before := fx.verbs()
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached
	var joiners []<-chan result
	for j := 1; j < 4; j++ {
		joiners = append(joiners, fx.get(j, 1))
	}
	fx.waitWindow(t, 1, 3, 0)
	close(g.open)
	for _, ch := range append(joiners, owner) {
		r := <-ch
		if r.err != nil || !r.found || !bytes.Equal(r.value, val(7)) {
			t.Fatalf("got %x %v %v, want %x", r.value, r.found, r.err, val(7))
		}
	}
	if d := fx.verbs().Sub(before); d.Reads != 2 {
		t.Errorf("4 reads issued %d READs, want 2 (the delegate's)", d.Reads)
	}
	if s := fx.t.Stats(); s.Delegated != 3 || s.Reads != 4 {
		t.Errorf("stats %+v, want 3 delegated of 4 reads", s)
	}
}

// TestDelegatedValueIsACopy: each joiner owns the slice it gets.
func TestDelegatedValueIsACopy(t *testing.T) {
	fx := newFixture(t, Options{}, 3)
	if err := fx.fs[0].Put(fx.t, 1, val(9)); err != nil {
		t.Fatal(err)
	}
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	got := make(chan []byte, 3)
	for j := range 3 {
		if j == 1 {
			<-g.reached
		}
		go func() {
			v, _, _ := fx.fs[j].Get(fx.t, 1)
			got <- v
		}()
	}
	fx.waitWindow(t, 1, 2, 0)
	close(g.open)
	a, b, c := <-got, <-got, <-got
	if &a[0] == &b[0] || &b[0] == &c[0] || &a[0] == &c[0] {
		t.Fatal("two readers got the same backing array")
	}
}

// TestSealedWindowAdmitsNoJoiner: a reader arriving after the delegate's
// linearizing READ must not get its result, since a write (from another
// compute node) completed in between.
func TestSealedWindowAdmitsNoJoiner(t *testing.T) {
	fx := newFixture(t, Options{}, 3)
	if err := fx.fs[0].Put(fx.t, 1, val(1)); err != nil {
		t.Fatal(err)
	}
	other := newFakeClient(fx.st, fx.pool.NewComputeNode().NewClient())
	otherT := New(Options{})

	g := newGate(linearized)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached // the delegate has sealed and READ val(1)
	if err := other.Put(otherT, 1, val(2)); err != nil {
		t.Fatal(err)
	}
	late := fx.get(1, 1)
	fx.waitWindow(t, 1, 0, 1) // queued for the next window, not joined
	close(g.open)
	if r := <-owner; !bytes.Equal(r.value, val(1)) {
		t.Errorf("delegate read %x, want %x", r.value, val(1))
	}
	if r := <-late; !bytes.Equal(r.value, val(2)) {
		t.Errorf("reader after the write read %x, want %x", r.value, val(2))
	}
	if s := fx.t.Stats(); s.Delegated != 0 || s.Queued != 1 {
		t.Errorf("stats %+v, want 0 delegated, 1 queued", s)
	}
}

func TestWriteCombining(t *testing.T) {
	fx := newFixture(t, Options{}, 4)
	before := fx.verbs()
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	leader := fx.put(0, 2, val(10))
	<-g.reached
	var joiners []<-chan result
	for j := 1; j < 4; j++ {
		joiners = append(joiners, fx.put(j, 2, val(uint64(10+j))))
		fx.waitWindow(t, 2, j, 0) // joined in order
	}
	close(g.open)
	for _, ch := range append(joiners, leader) {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := fx.stored(t, 2); !bytes.Equal(got, val(13)) {
		t.Errorf("stored %x, want the last combined value %x", got, val(13))
	}
	if d := fx.verbs().Sub(before); d.Writes != 1 {
		t.Errorf("4 writes issued %d WRITEs, want 1", d.Writes)
	}
	if s := fx.t.Stats(); s.Combined != 3 || s.Writes != 4 {
		t.Errorf("stats %+v, want 3 combined of 4 writes", s)
	}
}

// TestReadersAndWritersDoNotMix: readers wait out a write window and
// writers a read window; the oldest waiter's kind opens the next window and
// waiters of that kind join it at once.
func TestReadersAndWritersDoNotMix(t *testing.T) {
	fx := newFixture(t, Options{}, 6)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	w0 := fx.put(0, 1, val(1))
	<-g.reached
	r1 := fx.get(1, 1) // pending: a write window is open
	fx.waitWindow(t, 1, 0, 1)
	w2 := fx.put(2, 1, val(2)) // joins the write window
	fx.waitWindow(t, 1, 1, 1)
	g2 := newGate(traversed)
	fx.fs[1].hook = g2.hook
	close(g.open)
	<-g2.reached // r1 opened the next window: a read window
	w3 := fx.put(3, 1, val(3))
	fx.waitWindow(t, 1, 0, 1)
	r4 := fx.get(4, 1)
	fx.waitWindow(t, 1, 1, 1)
	close(g2.open)
	for _, ch := range []<-chan result{w0, w2, w3} {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	for _, ch := range []<-chan result{r1, r4} {
		if r := <-ch; !bytes.Equal(r.value, val(2)) {
			t.Errorf("read %x %v, want the first window's combined value %x", r.value, r.err, val(2))
		}
	}
	if got := fx.stored(t, 1); !bytes.Equal(got, val(3)) {
		t.Errorf("stored %x, want %x", got, val(3))
	}
	if s := fx.t.Stats(); s.Combined != 1 || s.Delegated != 1 || s.Queued != 2 {
		t.Errorf("stats %+v, want 1 combined, 1 delegated, 2 queued", s)
	}
}

// TestHandoverKeepsOrder: pending waiters of the next window's kind join it;
// the others stay pending for the window after.
func TestHandoverKeepsOrder(t *testing.T) {
	fx := newFixture(t, Options{}, 5)
	g := newGate(linearized)
	fx.fs[0].hook = g.hook
	r0 := fx.get(0, 3)
	<-g.reached // sealed: everyone else queues
	w1 := fx.put(1, 3, val(5))
	fx.waitWindow(t, 3, 0, 1)
	r2 := fx.get(2, 3)
	fx.waitWindow(t, 3, 0, 2)
	w3 := fx.put(3, 3, val(6))
	fx.waitWindow(t, 3, 0, 3)
	g1 := newGate(traversed)
	fx.fs[1].hook = g1.hook
	close(g.open)
	<-g1.reached
	// w1 leads, w3 combined into it, r2 waits for the next window.
	if open, j, p := fx.t.window(key(3)); !open || j != 1 || p != 1 {
		t.Fatalf("window after handover: open %v joined %d pending %d, want 1 and 1", open, j, p)
	}
	close(g1.open)
	if r := <-r0; r.found {
		t.Errorf("first read found %x, want absent", r.value)
	}
	for _, ch := range []<-chan result{w1, w3} {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if r := <-r2; !bytes.Equal(r.value, val(6)) {
		t.Errorf("read %x, want %x", r.value, val(6))
	}
}

// TestCollision: with one slot, different keys never share; an operation
// whose slot is busy with another key runs at once on its own.
func TestCollision(t *testing.T) {
	fx := newFixture(t, Options{Slots: 1}, 3)
	for i := range 3 {
		if err := fx.fs[0].Put(fx.t, i, val(uint64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 0)
	<-g.reached
	if r := <-fx.get(1, 1); !bytes.Equal(r.value, val(101)) {
		t.Errorf("colliding read got %x, want %x", r.value, val(101))
	}
	if r := <-fx.put(2, 2, val(202)); r.err != nil {
		t.Fatal(r.err)
	}
	close(g.open)
	if r := <-owner; !bytes.Equal(r.value, val(100)) {
		t.Errorf("owner read %x, want %x", r.value, val(100))
	}
	if got := fx.stored(t, 2); !bytes.Equal(got, val(202)) {
		t.Errorf("stored %x, want %x", got, val(202))
	}
	if s := fx.t.Stats(); s.Collisions != 2 || s.Shared() != 0 {
		t.Errorf("stats %+v, want 2 collisions and nothing shared", s)
	}
}

func TestDisabled(t *testing.T) {
	fx := newFixture(t, Options{DisableReads: true, DisableWrites: true}, 3)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached
	if r := <-fx.get(1, 1); r.err != nil || r.found {
		t.Fatalf("read %x %v %v, want absent", r.value, r.found, r.err)
	}
	if r := <-fx.put(2, 1, val(3)); r.err != nil {
		t.Fatal(r.err)
	}
	close(g.open)
	<-owner
	if s := fx.t.Stats(); s.Shared() != 0 || s.Queued != 0 || s.Reads != 2 || s.Writes != 1 {
		t.Errorf("stats %+v, want 2 reads and 1 write, none shared or queued", s)
	}
}

// TestUnsealedSharesNothing: joiners of a window that never sealed compete
// again and run their own operation.
func TestUnsealedSharesNothing(t *testing.T) {
	for _, write := range []bool{false, true} {
		fx := newFixture(t, Options{}, 3)
		g := newGate(traversed)
		fx.fs[0].hook = g.hook
		fx.fs[0].seal = false
		start := func(j int) <-chan result {
			if write {
				return fx.put(j, 1, val(uint64(j+1)))
			}
			return fx.get(j, 1)
		}
		owner := start(0)
		<-g.reached
		a, b := start(1), start(2)
		fx.waitWindow(t, 1, 2, 0)
		close(g.open)
		for _, ch := range []<-chan result{owner, a, b} {
			if r := <-ch; r.err != nil {
				t.Fatal(r.err)
			}
		}
		if s := fx.t.Stats(); s.Retried != 2 {
			t.Errorf("write=%v: stats %+v, want both joiners retried", write, s)
		}
		if write {
			if got := fx.stored(t, 1); bytes.Equal(got, val(1)) {
				t.Errorf("stored the unsealed leader's value %x, want a joiner's own write after it", got)
			}
		}
	}
}

func TestLeaderErrorPropagates(t *testing.T) {
	boom := errors.New("boom")
	for _, write := range []bool{false, true} {
		fx := newFixture(t, Options{}, 2)
		g := newGate(traversed)
		fx.fs[0].hook = g.hook
		fx.fs[0].fail = boom
		var owner, joiner <-chan result
		if write {
			owner = fx.put(0, 1, val(1))
			<-g.reached
			joiner = fx.put(1, 1, val(2))
		} else {
			owner = fx.get(0, 1)
			<-g.reached
			joiner = fx.get(1, 1)
		}
		fx.waitWindow(t, 1, 1, 0)
		close(g.open)
		if r := <-owner; r.err != boom {
			t.Errorf("write=%v: owner got %v, want boom", write, r.err)
		}
		r := <-joiner
		if !errors.Is(r.err, boom) || errors.Is(r.err, ErrLeaderFailed) != write {
			t.Errorf("write=%v: joiner got %v, want boom (wrapped with ErrLeaderFailed for a write)", write, r.err)
		}
	}
}

// TestDelegateContextDoesNotLeak: a delegate failing on its own cancelled
// context does not hand its error to joiners; they read for themselves.
func TestDelegateContextDoesNotLeak(t *testing.T) {
	fx := newFixture(t, Options{}, 2)
	if err := fx.fs[0].Put(fx.t, 1, val(4)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fx.fs[0].ctx = ctx
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached
	joiner := fx.get(1, 1)
	fx.waitWindow(t, 1, 1, 0)
	cancel()
	close(g.open)
	if r := <-owner; !errors.Is(r.err, context.Canceled) {
		t.Errorf("delegate got %v, want context.Canceled", r.err)
	}
	if r := <-joiner; r.err != nil || !bytes.Equal(r.value, val(4)) {
		t.Errorf("joiner got %x %v, want %x", r.value, r.err, val(4))
	}
	if s := fx.t.Stats(); s.Retried != 1 || s.Delegated != 0 {
		t.Errorf("stats %+v, want 1 retried, 0 delegated", s)
	}
}

func TestCancelWaiter(t *testing.T) {
	fx := newFixture(t, Options{}, 4)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	leader := fx.put(0, 1, val(1))
	<-g.reached
	b := fx.put(1, 1, val(2))
	fx.waitWindow(t, 1, 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	fx.fs[2].ctx = ctx
	c := fx.put(2, 1, val(3)) // the latest value, withdrawn before the leader takes it
	fx.waitWindow(t, 1, 2, 0)
	ctxR, cancelR := context.WithCancel(context.Background())
	fx.fs[3].ctx = ctxR
	r := fx.get(3, 1) // pending behind the write window
	fx.waitWindow(t, 1, 2, 1)
	cancel()
	cancelR()
	if res := <-c; !errors.Is(res.err, context.Canceled) {
		t.Errorf("cancelled writer got %v", res.err)
	}
	if res := <-r; !errors.Is(res.err, context.Canceled) {
		t.Errorf("cancelled reader got %v", res.err)
	}
	fx.waitWindow(t, 1, 1, 0)
	close(g.open)
	for _, ch := range []<-chan result{leader, b} {
		if res := <-ch; res.err != nil {
			t.Fatal(res.err)
		}
	}
	if got := fx.stored(t, 1); !bytes.Equal(got, val(2)) {
		t.Errorf("stored %x, want %x: the cancelled write must not be applied", got, val(2))
	}
	// No permit is left behind on the cancelled clients.
	for _, f := range fx.fs {
		assertNoPermit(t, f.c)
	}
}

func assertNoPermit(tb testing.TB, c *remote.Client) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx); err == nil {
		tb.Errorf("client %d has a pending permit", c.ID())
	}
}

// TestCancelAfterValue: a writer that gives up after its leader took the
// combined value is applied all the same.
func TestCancelAfterValue(t *testing.T) {
	fx := newFixture(t, Options{}, 2)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	leader := fx.put(0, 1, val(5))
	<-g.reached
	ctx, cancel := context.WithCancel(context.Background())
	fx.fs[1].ctx = ctx
	b := fx.put(1, 1, val(6))
	fx.waitWindow(t, 1, 1, 0)
	g2 := newGate(linearized)
	fx.fs[0].hook = g2.hook
	close(g.open)
	<-g2.reached // the leader wrote the combined value
	cancel()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled writer got %v", r.err)
	}
	close(g2.open)
	if r := <-leader; r.err != nil {
		t.Fatal(r.err)
	}
	if got := fx.stored(t, 1); !bytes.Equal(got, val(6)) {
		t.Errorf("stored %x, want %x", got, val(6))
	}
}

func TestClose(t *testing.T) {
	cause := errors.New("index closed")
	fx := newFixture(t, Options{}, 5)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached
	waiters := []<-chan result{fx.get(1, 1), fx.put(2, 1, val(1)), fx.get(3, 1)}
	fx.waitWindow(t, 1, 2, 1)
	fx.t.Close(cause)
	fx.t.Close(nil) // idempotent
	for _, ch := range waiters {
		if r := <-ch; !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, cause) {
			t.Errorf("waiter got %v, want ErrClosed and the cause", r.err)
		}
	}
	close(g.open)
	if r := <-owner; r.err != nil {
		t.Errorf("the delegate running when Close was called got %v", r.err)
	}
	if r := <-fx.get(4, 2); !errors.Is(r.err, ErrClosed) {
		t.Errorf("read after Close got %v", r.err)
	}
	if r := <-fx.put(4, 2, val(1)); !errors.Is(r.err, ErrClosed) {
		t.Errorf("write after Close got %v", r.err)
	}
}

func TestPoolCloseWakesWaiters(t *testing.T) {
	fx := newFixture(t, Options{}, 3)
	g := newGate(traversed)
	fx.fs[0].hook = g.hook
	owner := fx.get(0, 1)
	<-g.reached
	a, b := fx.get(1, 1), fx.put(2, 1, val(1))
	fx.waitWindow(t, 1, 1, 1)
	fx.pool.Close()
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; !errors.Is(r.err, remote.ErrClosed) {
			t.Errorf("waiter got %v, want remote.ErrClosed", r.err)
		}
	}
	close(g.open)
	if r := <-owner; !errors.Is(r.err, remote.ErrClosed) {
		t.Errorf("delegate got %v, want remote.ErrClosed from its READ", r.err)
	}
	if open, _, _ := fx.t.window(key(1)); open {
		t.Error("the window is still open")
	}
}

func TestCallbackPanicReleases(t *testing.T) {
	fx := newFixture(t, Options{}, 2)
	g := newGate(traversed)
	fx.fs[0].hook = func(s stage) {
		g.hook(s)
		panic("callback bug")
	}
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		fx.fs[0].Get(fx.t, 1)
	}()
	<-g.reached
	joiner := fx.get(1, 1)
	fx.waitWindow(t, 1, 1, 0)
	close(g.open)
	if p := <-panicked; p != "callback bug" {
		t.Fatalf("panic %v not propagated", p)
	}
	if r := <-joiner; r.err != nil || r.found {
		t.Errorf("joiner got %x %v %v, want its own read: absent", r.value, r.found, r.err)
	}
}

// TestClientRegistry: clients registering in any order keep the registry
// proportional to the largest client ID.
func TestClientRegistry(t *testing.T) {
	pool := newPool(t, false)
	st := newStore(t, pool, 1)
	cn := pool.NewComputeNode()
	fs := make([]*fakeClient, 100)
	for j := range fs {
		fs[j] = newFakeClient(st, cn.NewClient())
	}
	tab := New(Options{})
	for j := len(fs) - 1; j >= 0; j-- {
		if _, _, err := fs[j].Get(tab, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(*tab.clients.Load()); n != len(fs) {
		t.Errorf("registry of %d entries for %d clients", n, len(fs))
	}
	if s := tab.Stats(); s.Reads != uint64(len(fs)) {
		t.Errorf("stats %+v, want %d reads", s, len(fs))
	}
}

func TestMixedComputeNodesPanic(t *testing.T) {
	pool := newPool(t, false)
	st := newStore(t, pool, 1)
	tab := New(Options{})
	if _, _, err := newFakeClient(st, pool.NewComputeNode().NewClient()).Get(tab, 0); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a client of another compute node was accepted")
		}
	}()
	newFakeClient(st, pool.NewComputeNode().NewClient()).Get(tab, 0)
}

func TestNoAllocs(t *testing.T) {
	fx := newFixture(t, Options{Slots: 1}, 2)
	f, g := fx.fs[0], fx.fs[1]
	v := val(42)
	g.hook = func(stage) { f.Get(fx.t, 2) } // finds the only slot busy with key 1
	cases := map[string]func(){
		"read":      func() { f.Get(fx.t, 1) },
		"write":     func() { f.Put(fx.t, 1, v) },
		"collision": func() { g.Get(fx.t, 1) },
	}
	for name, fn := range cases {
		if n := testing.AllocsPerRun(200, fn); n != 0 {
			t.Errorf("%s: %v allocations per operation", name, n)
		}
	}
	if s := fx.t.Stats(); s.Collisions == 0 {
		t.Errorf("stats %+v: the collision case did not collide", s)
	}
	off := newFixture(t, Options{DisableReads: true, DisableWrites: true}, 1)
	if n := testing.AllocsPerRun(200, func() { off.fs[0].Get(off.t, 1); off.fs[0].Put(off.t, 1, v) }); n != 0 {
		t.Errorf("disabled: %v allocations per operation", n)
	}
}
