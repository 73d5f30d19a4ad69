package smart

import (
	"context"
	"errors"
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
	r := tr.Cache()
	if r.Bytes > 2<<10 {
		t.Fatalf("cache holds %d bytes over its 2 KiB budget", r.Bytes)
	}
	if r.Lookups == 0 {
		t.Fatal("cache never consulted")
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
