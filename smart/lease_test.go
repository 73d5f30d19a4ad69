package smart

import (
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/testseed"
)

// TestLeaseTooShort: with an Options.Lease far below a round trip every
// batch under a lock is past its deadline. Operations must still return,
// each done or failed with ErrContention, instead of checking the lock
// again for ever (a nanosecond's lease hung a Delete's batch under its leaf
// lock, and LockedInternal's node lock release, that way). The locks such
// operations abandon are repaired by another compute node's operations and
// Recover, after which the tree verifies and every acknowledged change
// reads back. (With Reclaim the lease must exceed ReclaimInterval, which
// Open checks.)
func TestLeaseTooShort(t *testing.T) {
	for _, opts := range []Options{{}, {LockedInternal: true}} {
		t.Run(fmt.Sprintf("locked=%v", opts.LockedInternal), func(t *testing.T) {
			ctx := t.Context()
			healthy := simTrees(t, 1, opts)[0]
			lateOpts := opts
			lateOpts.Lease = time.Nanosecond
			late, err := Open(healthy.cn.Pool().NewComputeNode(), lateOpts)
			if err != nil {
				t.Fatal(err)
			}
			known := indextest.LateOps(t, late, testseed.Seed(t), true)
			if _, err := healthy.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if err := healthy.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			indextest.CheckAcknowledged(t, healthy, known)
		})
	}
}

// TestNodeLockWaitBeats: a session waiting for a node lock (LockedInternal)
// keeps its compute node's heartbeat going, as a leaf lock's waiter does:
// it may hold a leaf lock meanwhile (a leaf split publishing under its
// parent's lock), which other compute nodes would otherwise judge dead
// after a lease of waiting and take over. Here the node lock is held by
// an idle client of another compute node, which the waiter judges dead
// after a lease; its own compute node must not have gone half a lease
// without a heartbeat (registry.Node.Gen counts such gaps).
func TestNodeLockWaitBeats(t *testing.T) {
	const lease = time.Millisecond
	ctx := t.Context()
	trees := simTrees(t, 2, Options{Lease: lease, LockedInternal: true})
	a, b := trees[0], trees[1]
	for i := range 10 {
		if err := a.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := a.session()
	if err != nil {
		t.Fatal(err)
	}
	defer a.release(s)
	root, err := s.rememberedRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := root.sl.addr()
	other, err := b.session()
	if err != nil {
		t.Fatal(err)
	}
	tag := other.lockTag()
	b.release(other)
	if err := s.c.Write(ctx, node.Add(nodeLockOff), putWord(nil, tag)); err != nil {
		t.Fatal(err)
	}
	gen, start := a.reg.Gen(), s.c.Now()
	if err := s.lockNode(ctx, node, s.nodeBuf[:nodeLockOff]); err != nil {
		t.Fatal(err)
	}
	waited := s.c.Now() - start
	if err := s.releaseNode(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if waited < lease {
		t.Fatalf("took the node lock after %v, less than a lease: the test does not wait", waited)
	}
	s.touch()
	if g := a.reg.Gen(); g != gen {
		t.Errorf("the waiter's compute node went %d times half a lease without a heartbeat while it waited %v for a node lock", g-gen, waited)
	}
}
