package indextest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

// RunPausedNode runs writers against an index on two memnode processes
// reached over tcp (TCPConfig.Timeout 1 s) while one memory node is stopped
// (SIGSTOP) for twice the Timeout and then continued, as a memory node
// that stops answering for a while: memory node 1, and memory node 0, which
// holds the client registry. Every batch in flight to it when it stopped
// fails with ErrUnavailable and lands when it continues: a lock CAS among
// them leaves a lock its client never learned it took. Once the node
// answers again, every key must be written again within a bounded time (a
// lock of a client that lost a batch's outcome is taken over as a crashed
// client's, not held for good), and Verify (if set) must pass. Each
// subtest's pool is its own (tg.Config is ignored). A third subtest kills
// memory node 1 (SIGKILL) instead and restarts it on its file: the batches
// in flight, and the releases posted unsignaled, are then lost rather than
// late. Give the index a lease (tg.Open's options) longer than the stop: a
// compute node silent for half a lease renews the incarnations of its
// clients, which frees by chance the locks of those that renew.
func RunPausedNode(t *testing.T, tg Target) {
	checkTarget(t, tg)
	for _, mn := range []int{1, 0} {
		t.Run(fmt.Sprintf("node%d", mn), func(t *testing.T) { runPausedNode(t, tg, mn, false) })
	}
	t.Run("node1-killed", func(t *testing.T) { runPausedNode(t, tg, 1, true) })
}

func runPausedNode(t *testing.T, tg Target, mn int, kill bool) {
	const (
		timeout   = time.Second
		keys      = 256
		writers   = 8
		pause     = 2 * timeout
		rewrite   = 10 * time.Second // bound of writing every key again after the node continued
		opTimeout = 5 * time.Second  // any Put, so that a stuck one fails the test instead of hanging it
	)
	opts := memnodetest.Options{Bytes: 64 << 20}
	if kill {
		opts.Dir = t.TempDir()
	}
	nodes := memnodetest.Start(t, 2, opts)
	p := newPool(t, remote.Config{TCP: &remote.TCPConfig{MemoryNodes: memnodetest.Addrs(nodes),
		Token: memnodetest.Token, Timeout: timeout}})
	idx := tg.open(t, p.NewComputeNode(), tg.Name+"-paused")
	put := func(k, v []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		return idx.Put(ctx, k, v)
	}
	ctx := context.Background()
	key := func(i int) []byte { return tg.fitKey(fmt.Appendf(nil, "paused-key-%04d", i)) }
	value := func(round, i int) []byte {
		v := fmt.Appendf(nil, "v%d-%d", round, i)
		return append(v, make([]byte, tg.vlen(len(v))-len(v))...)
	}
	for i := range keys {
		if err := put(key(i), value(0, i)); err != nil {
			t.Fatalf("loading key %d: %v", i, err)
		}
	}

	stop := make(chan struct{})
	var puts, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; ; i += writers {
				select {
				case <-stop:
					return
				default:
				}
				puts.Add(1)
				if err := put(key(i%keys), value(1, i%keys)); err != nil {
					failed.Add(1)
					if !errors.Is(err, remote.ErrUnavailable) && !errors.Is(err, remote.ErrCrashed) {
						t.Errorf("writer %d: Put while memory node %d was stopped: %v", w, mn, err)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	// With memory node 0 stopped, the writers stop before it continues,
	// and Recover runs first: nothing but Recover marks the crashed
	// clients dead then (their registry's node was down when they
	// crashed) and recovers their locks. Otherwise the writers go on a
	// moment, and the locks are taken over by the Puts that meet them.
	recoverFirst := mn == 0
	time.Sleep(300 * time.Millisecond)
	if kill {
		nodes[mn].Kill()
		time.Sleep(pause)
		nodes[mn].Restart(true) // on its file
	} else {
		nodes[mn].Pause()
		time.Sleep(pause)
		if recoverFirst {
			close(stop)
			wg.Wait() // each Put on the stopped node fails within the Timeout
		}
		nodes[mn].Resume()
	}
	resumed := time.Now()
	if !recoverFirst {
		time.Sleep(300 * time.Millisecond)
		close(stop)
		wg.Wait()
	}
	t.Logf("%d Puts by %d writers, %d failed, memory node %d stopped (killed: %v) for %v (Timeout %v)", puts.Load(), writers, failed.Load(), mn, kill, pause, timeout)
	if t.Failed() {
		return
	}
	if r, ok := idx.(index.Recoverer); ok && recoverFirst {
		// Before any key is written again: Recover must mark the crashed
		// clients dead and take their locks over.
		var n int
		var err error
		t0 := time.Now()
		for {
			rctx, cancel := context.WithTimeout(ctx, opTimeout)
			n, err = r.Recover(rctx)
			cancel()
			if err == nil || !errors.Is(err, remote.ErrUnavailable) || time.Since(resumed) > rewrite {
				break
			}
			time.Sleep(10 * time.Millisecond) // the node's back-off
		}
		t.Logf("Recover after memory node %d continued: %d locks recovered in %v, %v", mn, n, time.Since(t0).Round(time.Millisecond), err)
		if err != nil {
			t.Fatalf("Recover after memory node %d continued: %v", mn, err)
		}
		if n == 0 {
			t.Errorf("Recover after memory node %d continued recovered no lock", mn)
		}
		if tg.Verify != nil {
			if err := tg.Verify(ctx, idx); err != nil {
				t.Errorf("Verify after Recover: %v", err)
			}
		}
	}
	since := fmt.Sprintf("memory node %d continued", mn)
	if recoverFirst {
		resumed, since = time.Now(), "Recover returned"
	}

	// Every key again, from one goroutine; the node may still be in its
	// back-off for a moment.
	start := time.Now()
	var slowest time.Duration
	slowKey := -1
	for i := range keys {
		t0 := time.Now()
		for {
			err := put(key(i), value(2, i))
			if err == nil {
				break
			}
			if !errors.Is(err, remote.ErrUnavailable) && !errors.Is(err, remote.ErrCrashed) || time.Since(resumed) > rewrite {
				t.Fatalf("Put of key %d %v after %s: %v", i, time.Since(resumed).Round(time.Millisecond), since, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if d := time.Since(t0); d > slowest {
			slowest, slowKey = d, i
		}
	}
	all := time.Since(resumed)
	t.Logf("every key written again %v after %s (%v for the %d Puts; slowest: key %d, %v)",
		all.Round(time.Millisecond), since, time.Since(start).Round(time.Millisecond), keys, slowKey, slowest.Round(time.Millisecond))
	if all > rewrite {
		t.Errorf("writing every key again took until %v after %s, want within %v", all, since, rewrite)
	}
	if st, ok := idx.(interface{ Stats() index.Stats }); ok {
		s := st.Stats()
		t.Logf("clients crashed (a batch failed) and replaced: %d; locks recovered: %d", s.Crashed, s.Recovered)
	}
	for i := range keys {
		v, found, err := idx.Get(ctx, key(i))
		if err != nil || !found || string(v) != string(value(2, i)) {
			t.Fatalf("Get of key %d after it was written again: %q, %v, %v; want %q", i, v, found, err, value(2, i))
		}
	}
	if tg.Verify != nil {
		if err := tg.Verify(ctx, idx); err != nil {
			t.Errorf("Verify after the node continued and every key was written again: %v", err)
		}
	}
}

// RunDeadlineOnPausedNode: while memory node 0, which holds the client
// registry, is stopped (SIGSTOP), a Get or a Scan whose context has a
// deadline of 300 ms, far below the transport's Timeout (3 s), returns
// within about that, with the context's error (or ErrUnavailable once the
// node is known down), although its operation starts with the compute
// node's heartbeat (the node was idle for over half a lease, so the
// heartbeat waits for its reply): the index's upkeep runs under the
// operation's context. Once the node continues, Gets succeed and Verify
// (if set) passes. It runs over each of pausedTransports: tcp, and the
// fabric transport in builds with the fabric tag.
func RunDeadlineOnPausedNode(t *testing.T, tg Target) {
	checkTarget(t, tg)
	for _, tr := range pausedTransports {
		t.Run(tr.name, func(t *testing.T) { runDeadlineOnPausedNode(t, tg, tr) })
	}
}

// A pausedTransport is a transport to memnode processes for
// RunDeadlineOnPausedNode: the processes' options, and the pool
// configuration reaching them with a Timeout.
type pausedTransport struct {
	name   string
	opts   memnodetest.Options
	config func(addrs []string, timeout time.Duration) remote.Config
}

// pausedTransports are the transports RunDeadlineOnPausedNode runs over
// (transports_fabric.go adds the fabric transport).
var pausedTransports = []pausedTransport{{name: "tcp", config: func(addrs []string, timeout time.Duration) remote.Config {
	return remote.Config{TCP: &remote.TCPConfig{MemoryNodes: addrs, Token: memnodetest.Token, Timeout: timeout}}
}}}

func runDeadlineOnPausedNode(t *testing.T, tg Target, tr pausedTransport) {
	const (
		timeout  = 3 * time.Second
		deadline = 300 * time.Millisecond
		keys     = 64
	)
	opts := tr.opts
	opts.Bytes = 64 << 20
	nodes := memnodetest.Start(t, 2, opts)
	p := newPool(t, tr.config(memnodetest.Addrs(nodes), timeout))
	idx := tg.open(t, p.NewComputeNode(), tg.Name+"-deadline")
	ctx := context.Background()
	key := func(i int) []byte { return tg.fitKey(fmt.Appendf(nil, "deadline-key-%04d", i)) }
	value := func(i int) []byte {
		v := fmt.Appendf(nil, "v-%d", i)
		return append(v, make([]byte, tg.vlen(len(v))-len(v))...)
	}
	for i := range keys {
		if err := idx.Put(ctx, key(i), value(i)); err != nil {
			t.Fatalf("loading key %d: %v", i, err)
		}
	}
	nodes[0].Pause()
	time.Sleep(600 * time.Millisecond) // over half the default lease: the next heartbeat waits for its reply
	expired := 0
	for i := range 8 {
		dctx, cancel := context.WithTimeout(ctx, deadline)
		t0 := time.Now()
		op := "Get"
		var err error
		if i%2 == 0 {
			_, _, err = idx.Get(dctx, key(i))
		} else {
			op = "Scan"
			for _, err = range idx.Scan(dctx, key(i), nil) {
				if err != nil {
					break
				}
			}
		}
		d := time.Since(t0)
		cancel()
		t.Logf("%s %d with a deadline of %v, memory node 0 stopped: %v after %v", op, i, deadline, err, d.Round(time.Millisecond))
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			expired++
		case err != nil && !errors.Is(err, remote.ErrUnavailable):
			t.Errorf("%s %d: %v, want nil, the context's error or ErrUnavailable", op, i, err)
		}
		if d > deadline+timeout/8 {
			t.Errorf("%s %d returned after %v, its deadline %v (Timeout %v)", op, i, d, deadline, timeout)
		}
	}
	if expired == 0 {
		t.Error("no Get met its deadline on the stopped node")
	}
	nodes[0].Resume()
	for i := range keys {
		for end := time.Now().Add(15 * time.Second); ; {
			v, found, err := idx.Get(ctx, key(i))
			if err == nil && found && string(v) == string(value(i)) {
				break
			}
			if err == nil || !errors.Is(err, remote.ErrUnavailable) || time.Now().After(end) {
				t.Fatalf("Get %d after memory node 0 continued: %q, %v, %v", i, v, found, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if tg.Verify != nil {
		if err := tg.Verify(ctx, idx); err != nil {
			t.Errorf("Verify after memory node 0 continued: %v", err)
		}
	}
}

// RunIdleCrashedDeadline checks that an operation that finds an idle
// session whose client crashed marks it dead under the operation's own
// context: with the registry's memory node (node 0 of two memnode
// processes) stopped, a Get with a 300 ms deadline returns by about then
// (marking under a context of its own, it waited for the transport's
// Timeout of 3 s). open opens the index on a compute node; idleClient
// returns the client of one of the index's idle sessions, which the
// check crashes.
func RunIdleCrashedDeadline(t *testing.T, open func(*remote.ComputeNode) (index.Index, error), idleClient func(index.Index) *remote.Client) {
	const timeout, deadline = 3 * time.Second, 300 * time.Millisecond
	nodes := memnodetest.Start(t, 2, memnodetest.Options{Bytes: 16 << 20})
	p := newPool(t, remote.Config{TCP: &remote.TCPConfig{MemoryNodes: memnodetest.Addrs(nodes),
		Token: memnodetest.Token, Timeout: timeout}})
	idx, err := open(p.NewComputeNode())
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	ctx := t.Context()
	if err := idx.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	c := idleClient(idx)
	a, err := c.Alloc(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	c.Crash(remote.Fault{})
	if err := c.Read(ctx, a, make([]byte, 8)); !errors.Is(err, remote.ErrCrashed) {
		t.Fatalf("a READ with a fault armed: %v, want ErrCrashed", err)
	}
	nodes[0].Pause()
	defer nodes[0].Resume()
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t0 := time.Now()
	_, _, err = idx.Get(dctx, []byte("k"))
	if d := time.Since(t0); d > deadline+timeout/4 {
		t.Errorf("Get with a deadline of %v, registry node stopped, a crashed idle session: %v after %v", deadline, err, d)
	}
}
