package smart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// TestCrashEveryPoint stops the client of one operation at every verb and
// at every word of every WRITE, for each kind of write (an update in place,
// an update that moves the leaf to a larger class, a delete, inserts that
// split a leaf, split a node's header or fill a free slot), in InOrder and
// Strict modes. After each crash the key
// holds its old or its new value, never anything else, its neighbours are
// intact, a lock the crash left is recovered by the next writer of the key
// (the tree saw its client stop, so at once), a second compute node can
// write the key too, and Recover then Verify pass. The locked-internal
// variant adds node locks held by the dead client.
func TestCrashEveryPoint(t *testing.T) {
	ctx := context.Background()
	keys := [][]byte{[]byte("apple"), []byte("apricot"), []byte("banana"), []byte("blueberry")}
	old := []byte("old value")
	ops := []struct {
		name string
		key  []byte
		run  func(*Tree, []byte) error
		want []byte // the new value; nil: deleted
	}{
		{"update-in-place", keys[1], func(tr *Tree, k []byte) error { return tr.Put(ctx, k, []byte("new value")) }, []byte("new value")},
		{"update-moves", keys[1], func(tr *Tree, k []byte) error { return tr.Put(ctx, k, bytes.Repeat([]byte("n"), 300)) }, bytes.Repeat([]byte("n"), 300)},
		{"delete", keys[2], func(tr *Tree, k []byte) error { _, err := tr.Delete(ctx, k); return err }, nil},
		{"insert-splits", []byte("apricots"), func(tr *Tree, k []byte) error { return tr.Put(ctx, k, []byte("fresh")) }, []byte("fresh")},
		{"insert-normal", []byte("cherry"), func(tr *Tree, k []byte) error { return tr.Put(ctx, k, []byte("fresh")) }, []byte("fresh")},
		{"insert-splits-header", []byte("avocado"), func(tr *Tree, k []byte) error { return tr.Put(ctx, k, []byte("fresh")) }, []byte("fresh")},
	}
	variants := []struct {
		name string
		opts Options
	}{
		{"inorder", Options{}}, {"strict", Options{}}, {"locked-internal", Options{LockedInternal: true}},
	}
	for _, vr := range variants {
		ord := remote.InOrder
		if vr.name == "strict" {
			ord = remote.Strict
		}
		vr.opts.Lease = time.Millisecond
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s/%s", vr.name, op.name), func(t *testing.T) {
				crashes := 0
				for after := 0; ; after++ {
					completed := false
					for words := 0; words < 8; words++ {
						point := fmt.Sprintf("fault after %d verbs, %d words", after, words)
						p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20,
							Sim: &remote.SimConfig{Ordering: ord, Seed: uint64(after*8 + words + 1)}})
						if err != nil {
							t.Fatal(err)
						}
						cn := p.NewComputeNode()
						tr, err := Open(cn, vr.opts)
						if err != nil {
							t.Fatal(err)
						}
						for _, k := range keys {
							if err := tr.Put(ctx, k, old); err != nil {
								t.Fatal(err)
							}
						}
						cn.Crash(remote.Fault{After: after, Words: words})
						err = op.run(tr, op.key)
						switch {
						case err == nil:
							completed = cn.Disarm() > 0
						case !errors.Is(err, remote.ErrCrashed):
							t.Fatalf("%s: %s: %v, want nil or ErrCrashed", point, op.name, err)
						default:
							crashes++
						}
						checkAfterCrash(t, point, tr, p, vr.opts, op.key, op.want, keys, old)
						p.Close()
						if completed {
							break
						}
					}
					if completed {
						break
					}
				}
				if crashes == 0 {
					t.Fatal("no fault point stopped the operation: the test tests nothing")
				}
			})
		}
	}
}

// checkAfterCrash checks the tree after an operation on key that may have
// been stopped: key holds its old value (or is absent if it had none) or
// want (nil: absent), the other keys hold old, the key can be written from
// this compute node and another, and Recover and Verify pass.
func checkAfterCrash(t *testing.T, point string, tr *Tree, p *remote.Pool, opts Options, key, want []byte, keys [][]byte, old []byte) {
	t.Helper()
	ctx := context.Background()
	existed := false
	for _, k := range keys {
		existed = existed || bytes.Equal(k, key)
	}
	v, ok, err := tr.Get(ctx, key)
	switch {
	case err != nil:
		t.Fatalf("%s: Get(%q): %v", point, key, err)
	case want == nil && ok && !bytes.Equal(v, old):
		t.Fatalf("%s: Get(%q) = %q after a delete, want absent or %q", point, key, v, old)
	case want != nil && ok && !bytes.Equal(v, want) && !(existed && bytes.Equal(v, old)):
		t.Fatalf("%s: Get(%q) = %q, want %q or the old value", point, key, v, want)
	case want != nil && !ok && existed:
		t.Fatalf("%s: Get(%q): absent, want a value", point, key)
	}
	for _, k := range keys {
		if bytes.Equal(k, key) {
			continue
		}
		if v, ok, err := tr.Get(ctx, k); err != nil || !ok || !bytes.Equal(v, old) {
			t.Fatalf("%s: neighbour Get(%q) = %q, %v, %v", point, k, v, ok, err)
		}
	}
	if err := tr.Put(ctx, key, []byte("after")); err != nil {
		t.Fatalf("%s: Put(%q) after the crash: %v", point, key, err)
	}
	other, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Put(ctx, key, []byte("other")); err != nil {
		t.Fatalf("%s: Put(%q) from another compute node: %v", point, key, err)
	}
	if _, err := tr.Recover(ctx); err != nil {
		t.Fatalf("%s: Recover: %v", point, err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatalf("%s: Verify: %v", point, err)
	}
}

// TestRenewOncePerGap checks what a gap in a compute node's heartbeats
// costs its writers afterwards: the first lock each client takes within
// half a lease of the gap is renewed (a new incarnation, a CAS of the lock
// word), and the locks it takes after that, under the new tag, are not.
// Twenty updates after an idle gap of two leases may cost a few round
// trips more than twenty without one, not two more each.
func TestRenewOncePerGap(t *testing.T) {
	const lease = time.Millisecond
	ctx := context.Background()
	a, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, Sim: &remote.SimConfig{Seed: 1}}, Options{Lease: lease})
	defer p.Close()
	cn := a.cn
	clock := p.NewComputeNode().NewClient() // moves virtual time on while a is idle
	word, err := clock.Alloc(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 20)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "renew-%02d", i)
		if err := a.Put(ctx, keys[i], []byte("v0")); err != nil {
			t.Fatal(err)
		}
	}
	updates := func(v string) uint64 {
		t.Helper()
		before := cn.Stats().RoundTrips
		for _, k := range keys {
			if err := a.Put(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		return cn.Stats().RoundTrips - before
	}
	beating := updates("v1")
	clock.Compute(2 * lease)
	if err := clock.Read(ctx, word, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	afterGap := updates("v2")
	t.Logf("20 updates: %d round trips while beating, %d after a gap of two leases", beating, afterGap)
	if afterGap > beating+4 {
		t.Errorf("20 updates after a gap took %d round trips, %d without one: more than one renewal", afterGap, beating)
	}
	if err := a.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStaleWriter pauses a lock holder for three leases (its compute node
// sends no heartbeat meanwhile). If another compute node takes the lock
// over meanwhile, the holder learns it before writing anything and its
// operation starts again (errRestart); if nobody did, it keeps the lock
// under a new incarnation and completes its update.
func TestStaleWriter(t *testing.T) {
	const lease = time.Millisecond
	ctx := context.Background()
	for _, contended := range []bool{true, false} {
		t.Run(fmt.Sprintf("taken-over=%v", contended), func(t *testing.T) {
			k := []byte("paused-key")
			p, a, b := leaseTestTrees(t, Options{Lease: lease}, k)
			var holdErr, writeErr, otherErr error
			p.Go(func() {
				holdErr = withLocked(ctx, a, k, func(s *session, v leafView, cur cursor) error {
					s.c.Compute(3 * lease) // paused: no heartbeat
					_, err := s.holding(ctx, leafLockAddr(cur.sl))
					if err == nil {
						writeErr = s.writeInPlace(ctx, cur.sl, k, []byte("from a"), v.birth)
					}
					return err
				})
			})
			if contended {
				p.Go(func() {
					b.cn.NewClient().Compute(10 * time.Microsecond) // after a took the lock
					otherErr = b.Put(ctx, k, []byte("from b"))
				})
			}
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			want := "from a"
			if contended {
				want = "from b"
				if holdErr != errRestart || otherErr != nil {
					t.Fatalf("holder: %v (want errRestart: the lock was taken over, nothing was written, the operation starts again); the other compute node's Put: %v", holdErr, otherErr)
				}
			} else if holdErr != nil || writeErr != nil {
				t.Fatalf("an uncontended holder after its pause: %v, %v", holdErr, writeErr)
			}
			if v, ok, err := b.Get(ctx, k); err != nil || !ok || string(v) != want {
				t.Fatalf("Get = %q, %v, %v; want %q", v, ok, err, want)
			}
			if err := a.Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// leaseTestTrees returns a simulated pool with two compute nodes' trees,
// opened with opts, where a holds k = "old".
func leaseTestTrees(t *testing.T, opts Options, k []byte) (p *remote.Pool, a, b *Tree) {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, Sim: &remote.SimConfig{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if a, err = Open(p.NewComputeNode(), opts); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(p.NewComputeNode(), opts); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(context.Background(), k, []byte("old")); err != nil {
		t.Fatal(err)
	}
	return p, a, b
}

// withLocked descends to k's leaf in a session of tr and locks it, as a
// writer of k does before it writes, then runs fn with the leaf as read
// and its slot, and releases the session.
func withLocked(ctx context.Context, tr *Tree, k []byte, fn func(s *session, v leafView, cur cursor) error) error {
	s, err := tr.session()
	if err != nil {
		return err
	}
	defer tr.release(s)
	s.enc = appendEncoded(s.enc[:0], k)
	cur, err := s.start(ctx)
	if err != nil {
		return err
	}
	d, err := s.descend(ctx, s.enc, cur)
	if err != nil || d.out != atLeaf {
		return fmt.Errorf("descent to %q: %v, %v", k, d.out, err)
	}
	res, v, cur, err := s.lockLeaf(ctx, d.cur, k, false)
	if err != nil || res != leafLocked {
		return fmt.Errorf("lockLeaf: %v, %v", res, err)
	}
	return fn(s, v, cur)
}

// TestCrashDuringSettle tears a leaf: an in-place update stops after its
// redo record landed, with the leaf's WRITE cut. The next session of the
// compute node takes a new incarnation of the dead client's slot, which
// shares the slot's redo slots and settles the record (repairs the leaf)
// before it writes a record of its own. That session is stopped in turn at
// every verb of its start, among them the window between rewriting the
// record and taking the lock over. Whatever the point, the record must
// stay findable: the key then holds its old or its new value, a writer
// repairs the leaf, and Recover and Verify pass.
func TestCrashDuringSettle(t *testing.T) {
	ctx := context.Background()
	keys := [][]byte{[]byte("apple"), []byte("apricot"), []byte("banana")}
	key, old, want := keys[1], []byte("old value"), []byte("new value")
	opts := Options{Lease: time.Millisecond}
	open := func() (*Tree, *remote.ComputeNode, *remote.Pool) {
		p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20,
			Sim: &remote.SimConfig{Ordering: remote.InOrder, Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		cn := p.NewComputeNode()
		tr, err := Open(cn, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if err := tr.Put(ctx, k, old); err != nil {
				t.Fatal(err)
			}
		}
		return tr, cn, p
	}
	// tear stops the update of key at its after-th verb, cutting a WRITE
	// after two words (a leaf's meta and checksum), and reports whether
	// that left the leaf torn. It reads the leaf with a bare client: a
	// session would settle the record first.
	tear := func(tr *Tree, cn *remote.ComputeNode, after int) bool {
		s, cur := leafCursor(t, tr, key)
		leaf := cur.sl
		tr.release(s)
		cn.Crash(remote.Fault{After: after, Words: 2})
		if err := tr.Put(ctx, key, want); !errors.Is(err, remote.ErrCrashed) {
			t.Fatalf("the update stopped at verb %d: %v, want ErrCrashed", after, err)
		}
		buf := make([]byte, classBytes(leaf.leafClass()))
		if err := cn.NewClient().Read(ctx, leaf.addr(), buf); err != nil {
			t.Fatal(err)
		}
		_, st := tr.lf.parse(buf, leaf.leafClass())
		return st == leafTorn
	}
	cut := -1
	for after := 0; after < 16 && cut < 0; after++ {
		tr, cn, p := open()
		if tear(tr, cn, after) {
			cut = after
		}
		p.Close()
	}
	if cut < 0 {
		t.Fatal("no fault point of the update tore its leaf: the test tests nothing")
	}
	for after := 0; ; after++ {
		point := fmt.Sprintf("update cut at verb %d, the settling session stopped after %d verbs", cut, after)
		tr, cn, p := open()
		if !tear(tr, cn, cut) {
			t.Fatalf("%s: the leaf is not torn", point)
		}
		cn.Crash(remote.Fault{After: after})
		_, _, err := tr.Get(ctx, keys[0])
		completed := err == nil && cn.Disarm() > 0
		if err != nil && !errors.Is(err, remote.ErrCrashed) {
			t.Fatalf("%s: Get: %v, want nil or ErrCrashed", point, err)
		}
		checkAfterCrash(t, point, tr, p, opts, key, want, keys, old)
		p.Close()
		if completed {
			break
		}
	}
}

// readWords reads the words at addrs through s.
func readWords(t *testing.T, s *session, addrs ...remote.Addr) []uint64 {
	t.Helper()
	ws := make([]uint64, len(addrs))
	for i, a := range addrs {
		w, err := s.readWord(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	return ws
}

// simTrees opens n trees with opts, each on a compute node of its own, on
// a simulated pool of two 1 MiB memory nodes that closes with the test.
func simTrees(t *testing.T, n int, opts Options) []*Tree {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, Sim: &remote.SimConfig{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	trees := make([]*Tree, n)
	for i := range trees {
		if trees[i], err = Open(p.NewComputeNode(), opts); err != nil {
			t.Fatal(err)
		}
	}
	return trees
}

// TestReplaceGivesUpRepairs: replace repairs a crashed session's moving
// flag on a new client at most maxCrashRepairs times; when every repairing
// client crashes too, it leaves the flag to the waiters and still hands
// back a healthy session, instead of trying for as long as clients crash
// (the crash battery hung that way under fault injection).
func TestReplaceGivesUpRepairs(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1}, Options{})
	if err := tr.Put(t.Context(), []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	s.flag = flagHold{set: true, revAddr: tr.rootSlot, flagged: 1}
	// Each new client: the WRITE that marks the crashed member dead lands,
	// the repair's first verb crashes it.
	const armed = 20
	for range armed {
		tr.cn.Crash(remote.Fault{After: 1})
	}
	tr.replace(s)
	if struck := armed - tr.cn.Disarm(); struck != maxCrashRepairs {
		t.Errorf("%d repairing clients crashed, want %d", struck, maxCrashRepairs)
	}
	if ns := tr.free[len(tr.free)-1]; ns.c.Crashed() {
		t.Error("replace handed back a crashed session")
	}
}

// TestHeaderSplitDiedAfterPublish: a Put on one compute node has read the
// slot of node N (the keys under "ap") and decided to split N's header for
// "avocado", when a Put of the same key on another compute node splits it
// first and its client dies after the CAS that publishes the new node,
// before N's moving flag is cleared. The first Put's own mark then fails;
// it must go on from the slot as it is now, through the new node, where
// the repair finishes the split. It went on from N instead, read N again,
// found the flag, waited a lease for a repair that finds the slot changed
// and leaves the flag to a traversal through the new node, and did so for
// ever (TestCrash/smart/random/linearizable-strict -short -seed=168 hung).
func TestHeaderSplitDiedAfterPublish(t *testing.T) {
	ctx := context.Background()
	keys := [][]byte{[]byte("apple"), []byte("apricot"), []byte("banana")}
	key := []byte("avocado")
	opts := Options{Lease: time.Millisecond}
	for after := 0; ; after++ {
		if after > 40 {
			t.Fatal("no fault point left the split published with its flag set: the test tests nothing")
		}
		trees := simTrees(t, 2, opts)
		t1, t2 := trees[0], trees[1]
		for _, k := range keys {
			if err := t1.Put(ctx, k, []byte("old")); err != nil {
				t.Fatal(err)
			}
		}
		a, d := descendTo(t, t1, key, atMismatch) // inside N's prefix
		t2.cn.Crash(remote.Fault{After: after})
		if err := t2.Put(ctx, key, []byte("other")); err == nil {
			t.Fatalf("the other compute node's Put completed with its fault armed after %d verbs", after)
		} else if !errors.Is(err, remote.ErrCrashed) {
			t.Fatal(err)
		}
		ws := readWords(t, a, d.cur.addr, d.cur.sl.addr().Add(nodeRevOff))
		w, rev := ws[0], ws[1]
		if slot(w) == d.cur.sl || remote.Addr(rev)&revMoving == 0 {
			t1.release(a)
			continue // not published yet, or its flag already cleared
		}
		_, next, err := a.splitHeader(ctx, d, key, []byte("mine"))
		if err != nil {
			t.Fatal(err)
		}
		if next.sl != slot(w) {
			t.Fatalf("fault after %d verbs: the Put goes on from slot %#x, not from the new node %#x the slot holds", after, uint64(next.sl), w)
		}
		t1.release(a)
		if err := t1.Put(ctx, key, []byte("mine")); err != nil {
			t.Fatal(err)
		}
		if _, err := t1.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		if err := t1.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
}

// TestRepairFlagThroughFrozenSlot: a header split of node C waits on C's
// moving flag, set by a move of C whose client went silent right after it
// (M1), and reached C through the slot P of C's parent, which has moved
// since: the parent's move carried C's reverse pointer, flag and all, to
// the successor's slot X (M4), and froze P. After a lease the waiter
// repairs the flag. P still names C (frozen), so the repair took the
// pointer for one that a header split left behind and moved it back to P:
// C's reverse pointer named a slot of a node that was no longer linked,
// and every later move of C's parent waited for it for ever
// (TestBatteryReclaim/out-of-place-tiny-cache/stalls/skew-pause-300µs
// -seed=4090 at f8596f3: 2,701 of 3,840 operations failed).
func TestRepairFlagThroughFrozenSlot(t *testing.T) {
	ctx := context.Background()
	// Under the root's "a": the parent, with C ("b") and the leaf "ac1".
	// C, with the prefix "xy", holds "abxy1" and "abxy2". Keys "ad1",
	// "ae1", … grow the parent, "abz" splits C's header.
	keys := [][]byte{[]byte("abxy1"), []byte("abxy2"), []byte("ac1")}
	split := []byte("abz")
	tr, p := newTree(t, remote.Config{MemoryNodes: 2, Sim: &remote.SimConfig{Seed: 1}}, Options{Lease: time.Millisecond})
	for _, k := range keys {
		if err := tr.Put(ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	a, d := descendTo(t, tr, split, atMismatch) // at C, through P
	c, parentSlot := d.cur.sl.addr(), d.cur.addr
	// The silent mover's M1.
	flag := a.flagOf(parentSlot)
	if old, err := p.NewComputeNode().NewClient().CAS(ctx, c.Add(nodeRevOff), uint64(parentSlot), uint64(flag)); err != nil || remote.Addr(old) != parentSlot {
		t.Fatalf("C's reverse pointer read %#x (%v), want %v", old, err, parentSlot)
	}
	// Children of the parent until it moves.
	for b := byte('d'); ; b++ {
		if b > 'z' {
			t.Fatal("the parent did not move: the test tests nothing")
		}
		if err := tr.Put(ctx, []byte{'a', b, '1'}, []byte{b}); err != nil {
			t.Fatal(err)
		}
		w, err := a.readWord(ctx, parentSlot)
		if err != nil {
			t.Fatal(err)
		}
		if slot(w).isFrozen() {
			break
		}
	}
	rev, err := a.readWord(ctx, c.Add(nodeRevOff))
	if err != nil || remote.Addr(rev)&revFlag != flag&revFlag || revSlot(remote.Addr(rev)) == parentSlot {
		t.Fatalf("C's reverse pointer after its parent's move: %#x, %v; want the successor's slot with the flag %#x", rev, err, flag&revFlag)
	}
	if _, _, err := a.splitHeader(ctx, d, split, split); err != nil && !errors.Is(err, errRestart) {
		t.Fatal(err)
	}
	if rev, err = a.readWord(ctx, c.Add(nodeRevOff)); err != nil || revSlot(remote.Addr(rev)) == parentSlot {
		t.Fatalf("the repair moved C's reverse pointer back to the frozen slot %v of its parent (%#x, %v)", parentSlot, rev, err)
	}
	tr.release(a)
	if err := tr.Put(ctx, split, split); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFlagNonce: moving flags set on one reverse pointer one after the
// other differ (flagOf), so that clearing a flag a waiter undid while its
// setter was paused, and another operation set again, leaves the other
// operation's flag alone (clearFlag), and a waiter watching the word sees
// it change. Without the nonce both flags were the same word, and
// clearFlag cleared whatever flag it found.
func TestFlagNonce(t *testing.T) {
	ctx := context.Background()
	tr, _ := newTree(t, remote.Config{MemoryNodes: 1, Sim: &remote.SimConfig{Seed: 1}}, Options{Lease: time.Millisecond})
	for _, k := range []string{"ab1", "ab2", "ac1"} {
		if err := tr.Put(ctx, []byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	a, d := descendTo(t, tr, []byte("ab3"), atMissing) // the node of "ab1" and "ab2"
	defer tr.release(a)
	b, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(b)
	revAddr, rev := d.cur.sl.addr().Add(nodeRevOff), d.cur.addr
	seen := map[remote.Addr]bool{}
	for range 8 {
		for _, s := range []*session{a, b} {
			f := s.flagOf(rev)
			if revSlot(f) != rev || f&revMoving == 0 || seen[f] {
				t.Fatalf("flag %#x of %v: want %v flagged, and unlike %d earlier flags", f, rev, rev, len(seen))
			}
			seen[f] = true
		}
	}
	// a flags, a waiter undoes it, b flags.
	fa, fb := a.flagOf(rev), b.flagOf(rev)
	for _, step := range [][2]remote.Addr{{rev, fa}, {fa, rev}, {rev, fb}} {
		if old, err := a.c.CAS(ctx, revAddr, uint64(step[0]), uint64(step[1])); err != nil || remote.Addr(old) != step[0] {
			t.Fatalf("CAS %#x → %#x found %#x (%v)", step[0], step[1], old, err)
		}
	}
	if err := a.clearFlag(ctx, revAddr, fa); err != nil {
		t.Fatal(err)
	}
	if w, err := a.readWord(ctx, revAddr); err != nil || remote.Addr(w) != fb {
		t.Errorf("after clearFlag of the lost flag the pointer reads %#x (%v), want the other operation's flag %#x", w, err, fb)
	}
	if err := b.clearFlag(ctx, revAddr, fb); err != nil {
		t.Fatal(err)
	}
	if w, err := a.readWord(ctx, revAddr); err != nil || remote.Addr(w) != rev {
		t.Errorf("after its own clearFlag the pointer reads %#x (%v), want %v", w, err, rev)
	}
}

// TestFlagCommitLate: a header split or a move whose commit (the
// publishing CAS, the first freeze) would leave more than half a lease
// after its moving flag's CAS commits nothing and takes its flag back: a
// waiter may have judged the flag dead by then and undone it, and a split
// that published after that left the node's reverse pointer naming a slot
// that no longer linked it (RunStalls seed 4059 of
// TestCrash/locked-internal/stalls/inorder-pause-1.5ms). A lease of a
// nanosecond makes every commit late: the Put fails with ErrContention
// and leaves the node as it was. (LockedInternal's header splits, whose
// node lock cannot be held under such a lease, are left to RunStalls.)
func TestFlagCommitLate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		keys []string // under the root's "a": a NODE_2 and its two leaves
		key  string   // splits the node's header, or makes it move
		out  outcome
	}{
		{"header-split", []string{"abcd1", "abcd2"}, "az1", atMismatch},
		{"move", []string{"ab1", "ab2"}, "abx", atMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := simTrees(t, 1, Options{})[0]
			for _, k := range tc.keys {
				if err := tr.Put(ctx, []byte(k), []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			a, d := descendTo(t, tr, []byte(tc.key), tc.out)
			node, before := d.cur.sl.addr(), make([]byte, d.cur.sl.nodeType().readBytes())
			if err := a.c.Read(ctx, node, before); err != nil {
				t.Fatal(err)
			}
			tr.release(a)
			late, err := Open(tr.cn, Options{Lease: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := late.Put(ctx, []byte(tc.key), []byte("late")); !errors.Is(err, ErrContention) {
				t.Fatalf("Put with every commit late: %v, want ErrContention", err)
			}
			after := make([]byte, len(before))
			if err := a.c.Read(ctx, node, after); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("the node changed under commits that were all late:\n before %x\n after  %x", before, after)
			}
			// Each attempt allocated a node and a leaf and gave them back,
			// later ones taking them again: at most a node and a leaf per
			// memory node are left freed, whatever the number of attempts.
			n := 0
			for range tr.cn.Freed() {
				n++
			}
			if n == 0 || n > 4 {
				t.Errorf("the compute node holds %d objects freed, want a node and a leaf on each of the 2 memory nodes at most, and some", n)
			}
			if err := tr.Put(ctx, []byte(tc.key), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStaleRepairer pauses a repairer for three leases right after it took
// a dead holder's leaf lock over. Another compute node judges the silent
// repairer dead in turn, repairs the leaf and takes the lock for itself;
// when the first repairer resumes, it must write nothing under the lock it
// lost (its release WRITE used to free the new holder's lock, and its redo
// WRITE could revert the new holder's update).
func TestStaleRepairer(t *testing.T) {
	const lease = time.Millisecond
	ctx := context.Background()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 20, Sim: &remote.SimConfig{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	trees := make([]*Tree, 3)
	for i := range trees {
		if trees[i], err = Open(p.NewComputeNode(), Options{Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	repairer, holder, deadTree := trees[0], trees[1], trees[2]
	k := []byte("repaired-key")
	if err := holder.Put(ctx, k, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// A dead holder's lock on k's leaf: a tag whose client slot has a new
	// incarnation is dead at once.
	s, err := deadTree.session()
	if err != nil {
		t.Fatal(err)
	}
	dead := s.lockTag()
	if _, err := s.m.Renew(ctx, s.c); err != nil {
		t.Fatal(err)
	}
	s.enc = appendEncoded(s.enc[:0], k)
	cur, err := s.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.descend(ctx, s.enc, cur)
	if err != nil || d.out != atLeaf {
		t.Fatalf("descent to k: %v, %v", d.out, err)
	}
	leaf := d.cur
	if err := s.c.Write(ctx, leafLockAddr(leaf.sl), putWord(nil, dead)); err != nil {
		t.Fatal(err)
	}
	deadTree.release(s)

	var repairErr, holdErr error
	var lockSeen, holderTag uint64
	p.Go(func() {
		s, err := repairer.session()
		if err != nil {
			repairErr = err
			return
		}
		defer repairer.release(s)
		buf, rec, ok, err := s.takeOver(ctx, leaf.sl.addr(), leaf.sl.leafClass(), dead, registry.NoDeadline)
		if err != nil || !ok {
			repairErr = fmt.Errorf("takeover: %v, %v", ok, err)
			return
		}
		s.c.Compute(3 * lease) // paused: no heartbeat
		repairErr = s.repairLeaf(ctx, leaf.sl.addr(), leaf.sl.leafClass(), buf, dead, rec)
	})
	p.Go(func() {
		holder.cn.NewClient().Compute(10 * time.Microsecond) // after the takeover
		s, err := holder.session()
		if err != nil {
			holdErr = err
			return
		}
		defer holder.release(s)
		res, v, cur, err := s.lockLeaf(ctx, leaf, k, false)
		if err != nil || res != leafLocked {
			holdErr = fmt.Errorf("lockLeaf: %v, %v", res, err)
			return
		}
		holderTag = s.lockTag()
		s.c.Compute(4 * lease) // holds the lock while the first repairer resumes
		w, err := s.readWord(ctx, leafLockAddr(cur.sl))
		if err != nil {
			holdErr = err
			return
		}
		lockSeen = w
		if _, holdErr = s.holding(ctx, leafLockAddr(cur.sl)); holdErr == nil {
			holdErr = s.writeInPlace(ctx, cur.sl, k, []byte("new"), v.birth)
		}
	})
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if repairErr != errRestart {
		t.Errorf("the paused repairer: %v, want errRestart (its lock was taken over)", repairErr)
	}
	if lockSeen&^repairBit != holderTag&^repairBit {
		t.Errorf("the new holder's lock word read %#x while it held the lock with %#x: the stale repairer wrote under it", lockSeen, holderTag)
	}
	if holdErr != nil {
		t.Fatalf("the new holder: %v", holdErr)
	}
	if v, ok, err := holder.Get(ctx, k); err != nil || !ok || string(v) != "new" {
		t.Fatalf("Get = %q, %v, %v; want \"new\"", v, ok, err)
	}
	if err := holder.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStaleDeleter pauses a Delete's holder past its lease, under the
// leaf's lock, while another compute node takes the lock over. Paused
// before its unlink, the holder must write nothing more (errRestart, the
// operation starts again): a Put of the same key waiting on the lock judges
// it dead, takes the lock over and wins. Paused after its unlink and before
// its retire, the leaf is unlinked, so no waiter on the key reaches it; a
// repairer that had its address (here called directly) takes the lock over,
// finds the leaf unlinked and retires it. The holder's late retire must
// then do nothing: the leaf goes to reclamation once, not twice (a double
// retire would free its memory twice).
func TestStaleDeleter(t *testing.T) {
	const lease = time.Millisecond
	ctx := context.Background()
	for _, unlinked := range []bool{false, true} {
		t.Run(fmt.Sprintf("unlinked=%v", unlinked), func(t *testing.T) {
			k := []byte("deleted-key")
			p, a, b := leaseTestTrees(t, Options{Lease: lease, Reclaim: true, ReclaimInterval: lease / 4}, k)
			var holdErr, otherErr, retireErr error
			var leaf slot // the holder's leaf, once unlinked
			p.Go(func() {
				holdErr = withLocked(ctx, a, k, func(s *session, v leafView, cur cursor) error {
					if !unlinked {
						s.c.Compute(3 * lease) // paused under the lock: no heartbeat
					}
					ops, err := s.linkUnder(ctx, leafLockAddr(cur.sl), s.markRemoved(s.batch(), cur.sl, v.meta),
						remote.CAS(cur.addr, uint64(cur.sl), uint64(tombstone(cur.sl.partial()))))
					if err != nil {
						return err
					}
					if got := slot(ops[len(ops)-1].Old); got != cur.sl {
						return fmt.Errorf("the unlink CAS found %v", got)
					}
					leaf = cur.sl
					s.c.Compute(3 * lease) // paused between the unlink and the retire
					retireErr = s.retire(ctx, leaf)
					return nil
				})
			})
			p.Go(func() {
				if !unlinked {
					b.cn.NewClient().Compute(10 * time.Microsecond) // after a took the lock
					otherErr = b.Put(ctx, k, []byte("from b"))
					return
				}
				s, err := b.session()
				if err != nil {
					otherErr = err
					return
				}
				defer b.release(s)
				s.c.Compute(2 * lease) // the holder unlinked the leaf, then its lease ran out
				dead, err := s.readWord(ctx, leafLockAddr(leaf))
				if err != nil {
					otherErr = err
					return
				}
				ok, err := s.recoverLeaf(ctx, leaf.addr(), leaf.leafClass(), dead, registry.NoDeadline)
				if err == nil && !ok {
					err = fmt.Errorf("no takeover of the lock word %#x", dead)
				}
				otherErr = err
			})
			if err := p.Wait(); err != nil {
				t.Fatal(err)
			}
			if !unlinked {
				if holdErr != errRestart {
					t.Fatalf("the holder paused before its unlink: %v, want errRestart (its lock was taken over)", holdErr)
				}
			} else if holdErr != nil || retireErr != nil {
				t.Fatalf("the holder paused before its retire: %v, %v", holdErr, retireErr)
			}
			if otherErr != nil {
				t.Fatalf("the other compute node: %v", otherErr)
			}
			want, present := "from b", true
			if unlinked {
				want, present = "", false
			}
			if v, ok, err := b.Get(ctx, k); err != nil || ok != present || string(v) != want {
				t.Fatalf("Get = %q, %v, %v; want %q, %v", v, ok, err, want, present)
			}
			st := a.Stats()
			stb := b.Stats()
			if got := st.Retired + stb.Retired; unlinked && got != 1 {
				t.Errorf("the unlinked leaf was retired %d times (holder %d, repairer %d), want once", got, st.Retired, stb.Retired)
			}
			if stb.Recovered == 0 {
				t.Errorf("no lock was taken over: the test did not pause the holder past its lease")
			}
			if err := a.Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoRedoTornLeaf: with Options.NoRedo an in-place update cut after the
// first word of its WRITE leaves a torn leaf that recovery cannot repair;
// every operation on the key, and Recover, must then fail with ErrCorrupt
// on every compute node, not hold the key's lock under the first
// repairer's tag (later Puts and Deletes exhausted their retry budget with
// ErrContention, and that compute node's Recover reported nothing to do),
// and the other keys stay usable.
func TestNoRedoTornLeaf(t *testing.T) {
	ctx := context.Background()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20, Sim: &remote.SimConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cns := []*remote.ComputeNode{p.NewComputeNode(), p.NewComputeNode(), p.NewComputeNode()}
	trees := make([]*Tree, len(cns))
	for i, cn := range cns {
		if trees[i], err = Open(cn, Options{NoRedo: true}); err != nil {
			t.Fatal(err)
		}
	}
	k, other := []byte("key"), []byte("other")
	for _, x := range [][]byte{k, other} {
		if err := trees[0].Put(ctx, x, make([]byte, 40)); err != nil {
			t.Fatal(err)
		}
	}
	cns[0].Crash(remote.Fault{After: 2, Words: 1}) // the lock's batch lands, the data WRITE is cut after a word
	if err := trees[0].Put(ctx, k, bytes.Repeat([]byte{0xff}, 40)); !errors.Is(err, remote.ErrCrashed) {
		t.Fatalf("the cut update: %v, want ErrCrashed", err)
	}
	for _, tr := range trees[1:] {
		_, _, gerr := tr.Get(ctx, k)
		perr := tr.Put(ctx, k, []byte("new"))
		_, derr := tr.Delete(ctx, k)
		_, rerr := tr.Recover(ctx)
		for op, err := range map[string]error{"Get": gerr, "Put": perr, "Delete": derr, "Recover": rerr} {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s of the torn key: %v, want ErrCorrupt", op, err)
			}
		}
		if err := tr.Put(ctx, other, []byte("fine")); err != nil {
			t.Errorf("Put of another key: %v", err)
		}
		if v, ok, err := tr.Get(ctx, other); err != nil || !ok || string(v) != "fine" {
			t.Errorf("Get of another key: %q, %v, %v", v, ok, err)
		}
	}
}

// TestIdleCrashedSession: free sessions whose clients crashed while nobody
// used them (over tcp, an idle client whose unsignaled verbs were on a
// connection that failed: remote.Client.Crashed) are retired before an
// operation takes them (replaceIdle, when remote.ComputeNode.Crashes
// changes): the Gets and Puts after it succeed instead of failing with
// remote.ErrCrashed, the crashed clients count in Stats().Crashed, and a
// lock one of them held is taken over at once, since its member was marked
// dead (the tree's lease is an hour: nothing else would judge it).
func TestIdleCrashedSession(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2}, Options{Lease: time.Hour})
	ctx := t.Context()
	key := func(i int) []byte { return fmt.Appendf(nil, "idle-%02d", i) }
	const keys = 16
	for i := range keys {
		if err := tr.Put(ctx, key(i), key(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Two free sessions: one operation's, and one whose client holds the
	// lock of key 0's leaf, as after a release lost with its connection.
	s1, err := tr.sessionFor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := tr.sessionFor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2.enc = appendEncoded(s2.enc[:0], key(0))
	cur, err := s2.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s2.descend(ctx, s2.enc, cur)
	if err != nil || d.out != atLeaf {
		t.Fatalf("descending to key 0: %v, %v", d.out, err)
	}
	if _, _, old, err := s2.lockAndRead(ctx, d.cur.sl); err != nil || old != 0 {
		t.Fatalf("locking key 0's leaf: lock word %#x, %v", old, err)
	}
	tr.release(s1)
	tr.release(s2)
	crashed := tr.Stats().Crashed
	for _, s := range []*session{s1, s2} {
		s.c.Crash(remote.Fault{})
		if err := s.c.Read(ctx, tr.rootSlot, make([]byte, 8)); !errors.Is(err, remote.ErrCrashed) || !s.c.Crashed() {
			t.Fatalf("a READ with a fault armed: %v, want ErrCrashed", err)
		}
	}
	for i := range keys {
		if v, found, err := tr.Get(ctx, key(i)); err != nil || !found || !bytes.Equal(v, key(i)) {
			t.Fatalf("Get(%s) after free sessions crashed: %q, %v, %v", key(i), v, found, err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range keys {
		if err := tr.Put(pctx, key(i), []byte("new")); err != nil {
			t.Fatalf("Put(%s) after free sessions crashed: %v", key(i), err)
		}
	}
	if n := tr.Stats().Crashed - crashed; n != 2 {
		t.Errorf("Stats().Crashed grew by %d, want 2", n)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Error(err)
	}
}

// TestIdleCrashedDeadline: an operation that finds a free session whose
// client crashed while idle marks it dead under its own context
// (indextest.RunIdleCrashedDeadline).
func TestIdleCrashedDeadline(t *testing.T) {
	indextest.RunIdleCrashedDeadline(t,
		func(cn *remote.ComputeNode) (index.Index, error) { return Open(cn, Options{Lease: time.Hour}) },
		func(idx index.Index) *remote.Client {
			tr := idx.(*Tree)
			s, err := tr.session()
			if err != nil {
				t.Fatal(err)
			}
			tr.release(s)
			return s.c
		})
}
