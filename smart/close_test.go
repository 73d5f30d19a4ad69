package smart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// TestCloseWakesEveryone closes a tree while many goroutines hammer one key
// (so some are parked in read delegation or write combining): every
// goroutine must return, with ErrClosed once the tree is closed.
func TestCloseWakesEveryone(t *testing.T) {
	tr, _ := newTree(t, remote.Config{}, Options{})
	ctx := context.Background()
	key := []byte("hot")
	if err := tr.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var err error
				if g%2 == 0 {
					_, _, err = tr.Get(ctx, key)
				} else {
					err = tr.Put(ctx, key, []byte{byte(i)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	tr.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("goroutines still blocked 10s after Close")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("operation ended with %v, want ErrClosed", err)
		}
	}
}

// TestCacheTinyBudget runs with a cache far smaller than the tree: entries
// are evicted all the time and every answer must still be right.
func TestCacheTinyBudget(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, Options{CacheBytes: 2 << 10})
	ctx := context.Background()
	for i := range 3000 {
		if err := tr.Put(ctx, benchKey(i), benchKey(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3000 {
		v, ok, err := tr.Get(ctx, benchKey(i))
		if err != nil || !ok || string(v) != string(benchKey(i+1)) {
			t.Fatalf("Get #%d: %x %v %v", i, v, ok, err)
		}
	}
	r := tr.Stats()
	if r.CacheBytes > 2<<10 {
		t.Fatalf("cache holds %d bytes over its 2 KiB budget", r.CacheBytes)
	}
	if r.CacheLookups == 0 {
		t.Fatal("cache never consulted")
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// cancelAfter is a context that reports cancellation from its n-th Done
// call on: the client checks Done before every verb, so an operation is cut
// after exactly n-1 verbs.
type cancelAfter struct {
	context.Context
	n, calls int
	done     chan struct{}
}

func newCancelAfter(n int) *cancelAfter {
	c := &cancelAfter{Context: context.Background(), n: n, done: make(chan struct{})}
	close(c.done)
	return c
}

func (c *cancelAfter) Done() <-chan struct{} {
	if c.calls++; c.calls >= c.n {
		return c.done
	}
	return nil
}

func (c *cancelAfter) Err() error {
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// TestCancelMidOperation cancels Put and Delete after every possible number
// of verbs: an operation that took a lock or published a change completes
// it, so the tree stays sound and no lock is left held.
func TestCancelMidOperation(t *testing.T) {
	for _, opts := range []Options{{}, {LockedInternal: true}, {OutOfPlaceLeaves: true}} {
		tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, opts)
		ctx := context.Background()
		key := func(i int) []byte { return fmt.Appendf(nil, "key%03d", i) }
		for i := range 40 {
			if err := tr.Put(ctx, key(i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		for n := 1; n < 10; n++ {
			for i := range 40 {
				// Updates in place, updates that move the leaf, inserts that
				// split leaves and headers, and deletes, each cut short.
				v := bytes.Repeat([]byte{byte(n)}, 1+(n*i)%300)
				_ = tr.Put(newCancelAfter(n), key(i), v)
				_ = tr.Put(newCancelAfter(n), append(key(i), byte(n)), v)
				_ = tr.Put(newCancelAfter(n), key(i)[:4+n%3], v)
				if i%4 == 0 {
					_, _ = tr.Delete(newCancelAfter(n), key(i))
				}
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatalf("%+v, cut after %d verbs: %v", opts, n-1, err)
			}
			// Every key can still be written (no lock left held).
			for i := range 40 {
				if err := tr.Put(ctx, key(i), []byte("ok")); err != nil {
					t.Fatalf("%+v: %v", opts, err)
				}
			}
		}
	}
}
