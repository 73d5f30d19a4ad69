package sherman

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// TestHandOverSequence has 20 simulated clients of one compute node update
// one key at the same instant. They queue on the local lock; each global
// acquisition serves HandOver of them (one CAS, then local hand-overs), so
// 20 holders take ceil(20/HandOver) global acquisitions.
func TestHandOverSequence(t *testing.T) {
	for _, c := range []struct{ handOver, globals, handOvers int }{
		{8, 3, 17}, {1, 20, 0}, {32, 1, 19},
	} {
		p := simPool(t, remote.InOrder, 1)
		tr := openTree(t, p, Options{HandOver: c.handOver})
		ctx := context.Background()
		if err := tr.Put(ctx, []byte("k"), []byte("v0")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := tr.Get(ctx, []byte("k")); err != nil { // warm the root's level
			t.Fatal(err)
		}
		warm(t, tr, 20)
		before := tr.Stats()
		for i := range 20 {
			p.Go(func() {
				if err := tr.Put(ctx, []byte("k"), []byte{'v', byte(i)}); err != nil {
					t.Error(err)
				}
			})
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		st := tr.Stats()
		globals, handOvers := st.GlobalLocks-before.GlobalLocks, st.HandOvers-before.HandOvers
		if globals != uint64(c.globals) || handOvers != uint64(c.handOvers) {
			t.Errorf("HandOver %d: %d global acquisitions and %d hand-overs, want %d and %d",
				c.handOver, globals, handOvers, c.globals, c.handOvers)
		}
		verify(t, tr)
	}
}

// TestHandOverRoundTrips checks the round trips of an update: three (CAS,
// READ, WRITE+unlock) after a global acquisition, two (CAS re-tagging the
// word + READ, WRITE) when the lock was handed over.
func TestHandOverRoundTrips(t *testing.T) {
	p := simPool(t, remote.InOrder, 1)
	tr := openTree(t, p, Options{})
	ctx := context.Background()
	for i := range uint64(2000) { // a tree of height 3 so that the cache is used
		if err := tr.Put(ctx, ikey(i), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tr.Get(ctx, ikey(7)); err != nil { // cache the leaf's parent
		t.Fatal(err)
	}
	const n = 16
	warm(t, tr, n)
	before := tr.cn.Stats()
	for range n {
		p.Go(func() {
			if err := tr.Put(ctx, ikey(7), []byte("x")); err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	io := tr.cn.Stats().Sub(before)
	// Two global acquisitions (8 holders each): 2×3 + 14×2 round trips, and
	// 2 CASes that acquire plus 14 that re-tag a handed-over word in the
	// batch of the leaf READ.
	if want := uint64(2*3 + (n-2)*2); io.RoundTrips != want || io.CASes != n {
		t.Errorf("%d updates with hand-over: %d round trips and %d CASes, want %d and %d", n, io.RoundTrips, io.CASes, want, n)
	}
}

// TestLockContention holds a page's global lock with a foreign tag and
// checks that an update gives up with ErrContention naming the lock, and
// that it succeeds once the lock is free.
func TestLockContention(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{})
	tr := openTree(t, p, Options{RetryBudget: 2})
	if err := tr.Put(ctx, []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	c := tr.cn.NewClient()
	_, word := tr.locks.lockWord(tr.root.Load().addr)
	if _, err := c.CAS(ctx, word, 0, 0xdead); err != nil {
		t.Fatal(err)
	}
	err := tr.Put(ctx, []byte("k"), []byte("v"))
	if !errors.Is(err, index.ErrContention) {
		t.Fatalf("Put under a foreign lock = %v, want ErrContention", err)
	}
	t.Log(err)
	if _, ok, err := tr.Get(ctx, []byte("k")); err != nil || !ok {
		t.Fatalf("Get under a foreign lock (lock-free) = %v, %v", ok, err)
	}
	if _, err := c.CAS(ctx, word, 0xdead, 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	verify(t, tr)
}

// TestLockWaitCancelled cancels a client queued on the local lock and
// checks that the queue and the global word stay consistent.
func TestLockWaitCancelled(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{})
	tr := openTree(t, p, Options{})
	if err := tr.Put(ctx, []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	holder, err := tr.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a := tr.root.Load().addr
	h, err := holder.lock(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- tr.Put(cctx, []byte("k"), []byte("v")) }()
	for { // wait until the Put is queued behind the holder
		idx, _ := tr.locks.lockWord(a)
		l := &tr.locks.locks[idx]
		l.mu.Lock()
		queued := l.head != nil
		l.mu.Unlock()
		if queued {
			break
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Put = %v", err)
	}
	if err := holder.unlock(ctx, h); err != nil {
		t.Fatal(err)
	}
	tr.release(holder)
	if err := tr.Put(ctx, []byte("k"), []byte("w")); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := tr.Get(ctx, []byte("k")); string(v) != "w" {
		t.Fatalf("Get = %q", v)
	}
	verify(t, tr)
}

// warm gives tr n idle sessions, so that n operations started at once do
// not register clients (a few round trips each) and reach the lock together.
func warm(t *testing.T, tr *Tree, n int) {
	t.Helper()
	var ss []*session
	for range n {
		s, err := tr.session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	for _, s := range ss {
		tr.release(s)
	}
}
