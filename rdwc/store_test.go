package rdwc

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// store is a fake index on remote memory: key i's value is the 8-byte word
// at base+8i (0: absent). Every operation first READs a root word, standing
// for the traversal, then issues the verb at which it linearizes: a READ of
// the key's word, or a WRITE of it. Words are accessed atomically, so
// several compute nodes may write one key without a lock.
type store struct {
	root, base remote.Addr
	keys       int
}

func newStore(tb testing.TB, pool *remote.Pool, keys int) *store {
	tb.Helper()
	c := pool.NewComputeNode().NewClient()
	a, err := c.Named(context.Background(), "rdwc-test", 8*(keys+1))
	if err != nil {
		tb.Fatal(err)
	}
	return &store{root: a, base: a + 8, keys: keys}
}

// key returns the key of index i.
func key(i int) []byte { return []byte{'k', byte(i)} }

// val encodes v as a stored value.
func val(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// stage names the points at which a fakeClient calls its hook.
type stage int

const (
	traversed  stage = iota + 1 // after the root READ, before Seal / Value
	linearized                  // after the linearizing verb
)

// fakeClient runs the store's operations for one remote.Client. Its read
// and write callbacks are built once, so that running them allocates
// nothing.
type fakeClient struct {
	st   *store
	c    *remote.Client
	ctx  context.Context
	i    int         // the current operation's key index
	buf  [8]byte     // READ destination
	hook func(stage) // called at each stage; nil: none
	seal bool        // call Seal / Value (false: a broken callback that never seals)
	fail error       // returned after the linearizing verb, if non-nil
	rd   func(context.Context, *Window) ([]byte, bool, error)
	wr   func(context.Context, *Window) error
}

func newFakeClient(st *store, c *remote.Client) *fakeClient {
	f := &fakeClient{st: st, c: c, ctx: context.Background(), seal: true}
	f.rd, f.wr = f.read, f.write
	return f
}

func (f *fakeClient) at(s stage) {
	if f.hook != nil {
		f.hook(s)
	}
}

func (f *fakeClient) read(_ context.Context, w *Window) ([]byte, bool, error) {
	if err := f.c.Read(f.ctx, f.st.root, f.buf[:]); err != nil {
		return nil, false, err
	}
	f.at(traversed)
	if f.seal {
		w.Seal()
	}
	if err := f.c.Read(f.ctx, f.st.base+remote.Addr(8*f.i), f.buf[:]); err != nil {
		return nil, false, err
	}
	f.at(linearized)
	if f.fail != nil {
		return nil, false, f.fail
	}
	if binary.BigEndian.Uint64(f.buf[:]) == 0 {
		return nil, false, nil
	}
	return f.buf[:], true, nil
}

func (f *fakeClient) write(_ context.Context, w *Window) error {
	if err := f.c.Read(f.ctx, f.st.root, f.buf[:]); err != nil {
		return err
	}
	f.at(traversed)
	v := w.own
	if f.seal {
		v = w.Value()
	}
	if err := f.c.Write(f.ctx, f.st.base+remote.Addr(8*f.i), v); err != nil {
		return err
	}
	f.at(linearized)
	return f.fail
}

// Get reads key i through t.
func (f *fakeClient) Get(t *Table, i int) ([]byte, bool, error) {
	f.i = i
	return t.Read(f.ctx, f.c, key(i), f.rd)
}

// Put writes v under key i through t.
func (f *fakeClient) Put(t *Table, i int, v []byte) error {
	f.i = i
	return t.Write(f.ctx, f.c, key(i), v, f.wr)
}

// pause yields to the other clients between verbs: virtual CPU time in the
// simulator, a scheduling point in local mode.
func (f *fakeClient) pause(stage) {
	f.c.Compute(300 * time.Nanosecond)
	runtime.Gosched()
}

// window reports the state of the window open on key in t: whether one is
// open, how many operations joined it and how many wait for the next one.
func (t *Table) window(key []byte) (open bool, joined, pending int) {
	s, i := t.slot(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	win := s.window(i)
	if win == nil || !bytes.Equal(win.key, key) {
		return false, 0, 0
	}
	for w := win.joined.head; w != nil; w = w.next {
		joined++
	}
	for w := win.pending.head; w != nil; w = w.next {
		pending++
	}
	return true, joined, pending
}

// eventually fails the test if cond does not hold within 10 s.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(end) {
			tb.Fatalf("timed out waiting until %s", what)
		}
	}
}

// newPool returns a small local pool closed at the end of the test.
func newPool(tb testing.TB, sim bool) *remote.Pool {
	tb.Helper()
	cfg := remote.Config{NodeBytes: 1 << 20}
	if sim {
		cfg.Sim = &remote.SimConfig{}
	}
	pool, err := remote.NewPool(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pool.Close() })
	return pool
}

// gate blocks a hook at one stage until opened, and tells when it is reached.
type gate struct {
	at      stage
	reached chan struct{}
	open    chan struct{}
}

func newGate(at stage) *gate {
	return &gate{at: at, reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) hook(s stage) {
	if s == g.at {
		close(g.reached)
		<-g.open
	}
}

// result is an operation's outcome collected from a goroutine.
type result struct {
	value []byte
	found bool
	err   error
}
