package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

var indexKinds = []string{"smart", "sherman"}

// countScan returns the number of pairs in idx, checking each holds its
// value.
func countScan(ctx context.Context, t *testing.T, idx smart.Index) int {
	t.Helper()
	n := 0
	for kv, err := range idx.Scan(ctx, []byte{0}, nil) {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if k := uint64FromKey(kv.Key); string(kv.Value) != string(value(k)) {
			t.Fatalf("scan: key %d holds %x", k, kv.Value)
		}
		n++
	}
	return n
}

func uint64FromKey(b []byte) uint64 {
	var k uint64
	for _, c := range b {
		k = k<<8 | uint64(c)
	}
	return k
}

// TestMemnodeTwoProcessesOneTree: two compute-node processes insert
// disjoint key ranges into one tree at the same time over two memnode
// processes; then this process (a third compute node) reads every
// acknowledged key, scans exactly their number and verifies the tree.
func TestMemnodeTwoProcessesOneTree(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 400
	}
	for _, kind := range indexKinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			nodes := memnodetest.Start(t, 2, memnodetest.Options{Bytes: 64 << 20})
			addrs := memnodetest.Addrs(nodes)
			a := startChild(t, "write", kind, addrs, 1, n, 4)
			b := startChild(t, "write", kind, addrs, 1+n, n, 4)
			a.wait(90 * time.Second)
			b.wait(90 * time.Second)
			acks := slices.Concat(first(a.acked()), first(b.acked()))
			if len(acks) != 2*n {
				t.Fatalf("%d keys acknowledged, want %d", len(acks), 2*n)
			}
			p := newPool(t, tcpConfig(addrs, 10*time.Second))
			idx, verify, err := openIndex(kind, p.NewComputeNode(), 0)
			if err != nil {
				t.Fatal(err)
			}
			readAll(ctx, t, idx, acks)
			if got := countScan(ctx, t, idx); got != 2*n {
				t.Fatalf("scan found %d keys, want %d", got, 2*n)
			}
			if err := verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func first[A, B any](a A, _ B) A { return a }

// TestMemnodeComputeNodeKilled kills (SIGKILL) a compute-node process in the
// middle of a write-heavy loop while this process writes its own key range
// into the same tree. Afterwards the memory nodes and this process keep
// working: every key either process acknowledged reads back, new keys can be
// written (unless they need a lock the killed process left held: a Sherman
// page lock, or a SMART split lock, the moving flag of a reverse pointer;
// Verify must then report it), and a fresh pool can verify the tree. A lock
// the killed process held stays held: Verify may report it (wrapping
// ErrCorrupt and naming the lock), and nothing else.
func TestMemnodeComputeNodeKilled(t *testing.T) {
	const childKeys = 600
	for _, kind := range indexKinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			nodes := memnodetest.Start(t, 2, memnodetest.Options{Bytes: 64 << 20})
			addrs := memnodetest.Addrs(nodes)
			p := newPool(t, tcpConfig(addrs, 10*time.Second))
			idx, _, err := openIndex(kind, p.NewComputeNode(), 0)
			if err != nil {
				t.Fatal(err)
			}
			ch := startChild(t, "churn", kind, addrs, 1, childKeys, 4)

			// This process writes keys from 1<<40 up while the child runs.
			const mine = uint64(1) << 40
			var written atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var writeErr error
			wg.Go(func() {
				for k := mine; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := idx.Put(ctx, key(k), value(k)); err != nil {
						writeErr = err
						return
					}
					written.Store(k - mine + 1)
				}
			})
			deadline := time.Now().Add(90 * time.Second)
			for {
				if _, churning := ch.acked(); churning {
					break
				}
				select {
				case <-ch.done:
					t.Fatalf("compute-node process exited before churning: %v: %s", ch.cmd.ProcessState, ch.stderr.String())
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("compute-node process did not start churning within 90 s")
				}
			}
			time.Sleep(300 * time.Millisecond) // mid-churn
			ch.kill()
			childAcks, _ := ch.acked()
			time.Sleep(200 * time.Millisecond) // this process keeps writing past the kill
			close(stop)
			wg.Wait()
			stuck := 0
			switch {
			case writeErr == nil:
			case errors.Is(writeErr, smart.ErrContention):
				stuck++ // a lock the killed process held; Verify must show it
			default:
				t.Fatalf("this process's writes while the other was killed: %v", writeErr)
			}
			t.Logf("child acknowledged %d keys before SIGKILL; this process wrote %d", len(childAcks), written.Load())

			readAll(ctx, t, idx, childAcks)
			mineKeys := make([]uint64, written.Load())
			for i := range mineKeys {
				mineKeys[i] = mine + uint64(i)
			}
			readAll(ctx, t, idx, mineKeys)

			// A fresh pool: new writes (Sherman with a small retry budget, so
			// a page locked forever fails fast), reads, Verify.
			q := newPool(t, tcpConfig(addrs, 10*time.Second))
			fresh, verify, err := openIndex(kind, q.NewComputeNode(), 16)
			if err != nil {
				t.Fatal(err)
			}
			readAll(ctx, t, fresh, childAcks)
			for k := mine + 1<<20; k < mine+1<<20+200; k++ {
				wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
				err := fresh.Put(wctx, key(k), value(k))
				wcancel()
				switch {
				case err == nil:
				case errIs(err, smart.ErrContention, context.DeadlineExceeded):
					stuck++
				default:
					t.Fatalf("write after the kill: %v", err)
				}
			}
			verr := verify(ctx)
			t.Logf("Verify after the kill: %v (%d writes stuck on a lock)", verr, stuck)
			switch {
			case verr == nil && stuck > 0:
				t.Fatalf("%d writes failed on contention, yet Verify finds no held lock", stuck)
			case verr != nil && (!errors.Is(verr, smart.ErrCorrupt) || !strings.Contains(verr.Error(), "lock")):
				t.Fatalf("Verify after the kill of a writer: %v (only a held lock is expected)", verr)
			}
		})
	}
}

// TestMemnodeRestartWithFile: memory nodes restarted on the same --file,
// after SIGTERM or SIGKILL, keep their contents: a new pool finds both
// trees by name with every key, and they verify.
func TestMemnodeRestartWithFile(t *testing.T) {
	n := 800
	if testing.Short() {
		n = 200
	}
	for _, kill := range []bool{false, true} {
		t.Run(fmt.Sprintf("kill=%v", kill), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			nodes := memnodetest.Start(t, 2, memnodetest.Options{Bytes: 32 << 20, Dir: t.TempDir()})
			addrs := memnodetest.Addrs(nodes)
			p, err := remote.NewPool(tcpConfig(addrs, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = uint64(i*7919 + 1)
			}
			for _, kind := range indexKinds {
				idx, _, err := openIndex(kind, p.NewComputeNode(), 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					if err := idx.Put(ctx, key(k), value(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
			p.Close()
			for _, nd := range nodes {
				nd.Restart(kill)
			}
			q := newPool(t, tcpConfig(addrs, 10*time.Second))
			for _, kind := range indexKinds {
				idx, verify, err := openIndex(kind, q.NewComputeNode(), 0)
				if err != nil {
					t.Fatal(err)
				}
				readAll(ctx, t, idx, keys)
				if got := countScan(ctx, t, idx); got != n {
					t.Fatalf("%s: scan found %d keys after the restart, want %d", kind, got, n)
				}
				if err := verify(ctx); err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
			}
		})
	}
}

// TestMemnodeRestartAnonymous: a memory node restarted without a file has
// lost its contents. A pool that used it before must not silently use the
// new, empty memory: its verbs and requests fail (ErrUnavailable or
// ErrBadNode), whether it tries before or after another pool adopted the
// restarted node, and it never changes what that other pool wrote.
func TestMemnodeRestartAnonymous(t *testing.T) {
	for _, newFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("new-pool-first=%v", newFirst), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 8 << 20})
			addrs := memnodetest.Addrs(nodes)
			old := newPool(t, tcpConfig(addrs, 3*time.Second))
			oc := old.NewComputeNode().NewClient()
			x, err := oc.Named(ctx, "anon", 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := oc.Write(ctx, x, []byte("old-pool")); err != nil {
				t.Fatal(err)
			}
			oidx, _, err := openIndex("smart", old.NewComputeNode(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := oidx.Put(ctx, key(1), value(1)); err != nil {
				t.Fatal(err)
			}
			nodes[0].Restart(false)

			var nc *remote.Client
			var y remote.Addr
			adopt := func() {
				np := newPool(t, tcpConfig(addrs, 3*time.Second))
				nc = np.NewComputeNode().NewClient()
				if y, err = nc.Named(ctx, "anon", 64); err != nil {
					t.Fatal(err)
				}
				if err := nc.Write(ctx, y, []byte("new-pool")); err != nil {
					t.Fatal(err)
				}
			}
			if newFirst {
				adopt()
			}
			gone := []error{remote.ErrUnavailable, remote.ErrBadNode}
			for i := range 3 { // a transport may reconnect on a later try
				buf := make([]byte, 8)
				err := oc.Read(ctx, x, buf)
				if !errIs(err, gone...) {
					t.Fatalf("try %d: old pool's READ on the restarted node: %v (read %q), want ErrUnavailable or ErrBadNode", i, err, buf)
				}
				t.Logf("try %d: old pool's READ: %v", i, err)
				if err := oc.Write(ctx, x, []byte("stale!!!")); !errIs(err, gone...) {
					t.Fatalf("try %d: old pool's WRITE on the restarted node: %v, want ErrUnavailable or ErrBadNode", i, err)
				}
				if !oc.Crashed() {
					t.Fatalf("try %d: the old pool's client whose WRITE failed was not stopped", i)
				}
				oc = oc.ComputeNode().NewClient() // a failed WRITE stops its client (remote.Client.Crashed)
				if _, err := oc.Named(ctx, "anon", 64); !errIs(err, gone...) {
					t.Fatalf("try %d: old pool's named request: %v, want ErrUnavailable or ErrBadNode", i, err)
				}
				if _, _, err := oidx.Get(ctx, key(1)); !errIs(err, gone...) {
					t.Fatalf("try %d: old pool's Get: %v, want ErrUnavailable or ErrBadNode", i, err)
				}
				if err := oidx.Put(ctx, key(2), value(2)); !errIs(err, gone...) {
					t.Fatalf("try %d: old pool's Put: %v, want ErrUnavailable or ErrBadNode", i, err)
				}
			}
			if !newFirst {
				adopt()
			}
			got := make([]byte, 8)
			if err := nc.Read(ctx, y, got); err != nil || string(got) != "new-pool" {
				t.Fatalf("new pool's data after the old pool's attempts: %q, %v", got, err)
			}
		})
	}
}
