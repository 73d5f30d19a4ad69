package smart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// fillNode allocates everything memory node mn has left, with a client of
// its own, so that every later allocation on mn fails.
func fillNode(t testing.TB, p *remote.Pool, mn int) {
	t.Helper()
	c := p.NewComputeNode().NewClient()
	for _, n := range []int{64 << 10, 4096, 64} {
		for {
			_, err := c.AllocOn(context.Background(), mn, n, 64)
			if errors.Is(err, remote.ErrOutOfMemory) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// placeKey is the 1-byte key i: the leaves of such keys hang off the root.
func placeKey(i int) []byte { return []byte{byte(i)} }

func placeValue(i, n int) []byte { return bytes.Repeat([]byte{byte(i)}, n) }

// TestPlacementFallsBack fills the memory node of the root (memory node 0)
// and then inserts, updates and re-inserts keys whose leaves hang off the
// root: each new leaf must go to memory node 1, which has room, instead of
// failing with ErrOutOfMemory.
func TestPlacementFallsBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, opts := range []Options{{}, {LockedInternal: true}} {
		t.Run(fmt.Sprintf("locked=%v", opts.LockedInternal), func(t *testing.T) {
			tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 2 << 20, ChunkBytes: 16 << 10}, opts)
			want := map[string][]byte{}
			put := func(k, v []byte) {
				t.Helper()
				if err := tr.Put(ctx, k, v); err != nil {
					t.Fatalf("Put(%x, %d bytes) with memory node 0 full: %v (memory used %v)", k, len(v), err, memoryUsed(t, p))
				}
				want[string(k)] = v
			}
			for i := range 64 {
				put(placeKey(i), placeValue(i, 8))
			}
			fillNode(t, p, 0)
			before := memoryUsed(t, p)[1]
			steps := []struct {
				name string
				run  func()
			}{
				{"insert into a node", func() {
					for i := 64; i < 192; i++ {
						put(placeKey(i), placeValue(i, 1000))
					}
				}},
				{"update that outgrows its leaf", func() {
					for i := range 64 {
						put(placeKey(i), placeValue(i, 2000))
					}
				}},
				{"re-insert over a tombstone", func() {
					for i := 64; i < 128; i++ {
						if found, err := tr.Delete(ctx, placeKey(i)); !found || err != nil {
							t.Fatalf("Delete(%d) = %v, %v", i, found, err)
						}
						put(placeKey(i), placeValue(i, 1500))
					}
				}},
				{"leaf split", func() {
					for i := range 64 {
						put(append(placeKey(i), 'x'), placeValue(i, 1000))
					}
				}},
			}
			for _, st := range steps {
				st.run()
				if err := tr.Verify(ctx); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
			}
			for k, v := range want {
				if got, ok, err := tr.Get(ctx, []byte(k)); err != nil || !ok || !bytes.Equal(got, v) {
					t.Fatalf("Get(%x) = %d bytes, %v, %v; want %d bytes", k, len(got), ok, err, len(v))
				}
			}
			if used := memoryUsed(t, p)[1] - before; used < 128*1024 {
				t.Fatalf("memory node 1 took only %d bytes", used)
			}
		})
	}
}

// TestPlacementPublishedComplete inserts keys whose parent node's memory
// node is full, so their leaves go to the other memory node, while
// watchers walk the tree: with verbs to different memory nodes unordered
// (Skew mode), no watcher may see a leaf linked before it is written (I3).
func TestPlacementPublishedComplete(t *testing.T) {
	seed := testseed.Seed(t)
	trials := 20
	if testing.Short() {
		trials = 8
	}
	for trial := range trials {
		if msg := watchInserts(t, seed+uint64(trial), true, placeKey); msg != "" {
			t.Fatalf("trial %d: %s", trial, msg)
		}
	}
}

// TestSplitPublishedComplete inserts keys that split leaves and headers
// while watchers walk the tree: a split's new nodes are allocated
// round-robin, so they are often on another memory node than the slot that
// links them, and with verbs to different memory nodes unordered (Skew
// mode) no watcher may see a node or leaf linked before it is written (I3).
func TestSplitPublishedComplete(t *testing.T) {
	seed := testseed.Seed(t)
	trials := 20
	if testing.Short() {
		trials = 8
	}
	// Keys share prefixes of different lengths: leaf splits with and
	// without chains, header splits of the nodes they create.
	key := func(i int) []byte {
		return fmt.Appendf(nil, "%c%x-%c", 'a'+i%3, i%5*0x1111, 'a'+i%7)
	}
	for trial := range trials {
		if msg := watchInserts(t, seed+uint64(trial), false, key); msg != "" {
			t.Fatalf("trial %d: %s", trial, msg)
		}
	}
}

// watchInserts has 4 goroutines insert 16 keys each (key(1) … key(64))
// into a new tree in a Skew-mode pool while watchers walk it with
// unpublished, and returns the first problem: a violation, a failed Put,
// Verify or a leaf count off. If full, memory node 0 (the root's) is filled
// first.
func watchInserts(t *testing.T, seed uint64, full bool, key func(int) []byte) string {
	ctx := context.Background()
	p := skewPool(t, seed, 2<<20)
	tr, err := Open(p.NewComputeNode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if full {
		fillNode(t, p, 0)
	}
	const inserters, per = 4, 16
	var stop atomic.Bool
	var running atomic.Int32
	running.Store(inserters)
	var problem string
	for g := range inserters {
		p.Go(func() {
			defer func() { stop.Store(running.Add(-1) == 0) }()
			for i := range per {
				k := key(g*per + i + 1)
				if err := tr.Put(ctx, k, placeValue(i, 100)); err != nil {
					problem = fmt.Sprintf("Put(%x): %v", k, err)
					return
				}
			}
		})
	}
	for range watchers / 2 {
		s, done := tr.newSession(), map[slot]bool{}
		p.Go(func() {
			for !stop.Load() {
				msg, err := unpublished(ctx, s, done)
				if err != nil {
					msg = err.Error()
				}
				if msg != "" {
					problem = msg
					return
				}
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if problem != "" {
		return problem
	}
	if err := tr.Verify(ctx); err != nil {
		return err.Error()
	}
	if sh := treeShape(t, tr); sh.leaves != inserters*per {
		return fmt.Sprintf("%d leaves, want %d", sh.leaves, inserters*per)
	}
	return ""
}

// memoryUsed returns p.MemoryUsed, failing the test on error.
func memoryUsed(t testing.TB, p *remote.Pool) []uint64 {
	t.Helper()
	used, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// TestPlacementSpreadsByRoom fills the root's memory node (0) to within a
// twentieth of its size through the tree's own compute node, then inserts
// keys whose leaves hang off the root: they must go to memory node 1, which
// has room, while node 0 still has some (remote.ComputeNode.Room), and
// every key must read back and verify.
func TestPlacementSpreadsByRoom(t *testing.T) {
	ctx := context.Background()
	const nodeBytes = 2 << 20
	tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: nodeBytes, ChunkBytes: 16 << 10}, Options{})
	if err := tr.Put(ctx, placeKey(0), placeValue(0, 1000)); err != nil {
		t.Fatal(err)
	}
	c := tr.cn.NewClient()
	for tr.cn.Room(0) > nodeBytes/20 {
		if _, err := c.AllocOn(ctx, 0, 4096, 64); err != nil {
			t.Fatal(err)
		}
	}
	before := memoryUsed(t, p)
	for i := 1; i < 200; i++ {
		if err := tr.Put(ctx, placeKey(i), placeValue(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	after := memoryUsed(t, p)
	if grew := after[0] - before[0]; grew > 16<<10 {
		t.Fatalf("memory node 0, with %d of %d bytes left, took %d more bytes; node 1 took %d", nodeBytes-before[0], nodeBytes, grew, after[1]-before[1])
	}
	if grew := after[1] - before[1]; grew < 199*1024 {
		t.Fatalf("memory node 1 took only %d bytes for 199 leaves of 1 KiB", grew)
	}
	for i := range 200 {
		if v, ok, err := tr.Get(ctx, placeKey(i)); err != nil || !ok || !bytes.Equal(v, placeValue(i, 1000)) {
			t.Fatalf("Get(%d) = %x, %v, %v", i, v, ok, err)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestChainPlacement: the first node of a split's chain goes to the memory
// node its partial key picks when it becomes a child of the root, and on
// the memory node of the slot that links it further down (so that the
// chain's WRITEs share the CAS's round trip) unless the compute node placed
// more than its share there (allocNear's fallback when that node is full is
// TestPlacementFallsBack's).
func TestChainPlacement(t *testing.T) {
	ctx := context.Background()
	tr, _ := newTree(t, remote.Config{MemoryNodes: 4, NodeBytes: 1 << 20}, Options{})
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.release(s)
	root := remote.MakeAddr(0, 4096)
	for b := range 8 {
		s.enc = append(s.enc[:0], byte(b), 'x', 0)
		a, err := s.chainAlloc(ctx, cursor{addr: nodeSlotAddr(root, b), node: root, depth: 1}, node4)
		if err != nil {
			t.Fatal(err)
		}
		if a.MN() != b%4 {
			t.Errorf("the root's child under %#02x went to memory node %d, want %d", b, a.MN(), b%4)
		}
	}
	// Below the root's children a chain stays on its slot's memory node
	// while this compute node's bytes are spread evenly, and goes to the
	// memory node with the fewest once one has more than its share.
	for i := range tr.placed {
		tr.placed[i].Store(1000)
	}
	for mn := range 4 {
		node := remote.MakeAddr(mn, 4096)
		a, err := s.chainAlloc(ctx, cursor{addr: nodeSlotAddr(node, 3), node: node, depth: 2}, node4)
		if err != nil {
			t.Fatal(err)
		}
		if a.MN() != mn {
			t.Errorf("a chain under a slot on memory node %d went to %d", mn, a.MN())
		}
	}
	for i, p := range []uint64{2000, 1500, 900, 1000} {
		tr.placed[i].Store(p)
	}
	for _, tc := range []struct{ slot, want int }{{0, 2}, {1, 2}, {2, 2}, {3, 3}} {
		node := remote.MakeAddr(tc.slot, 4096)
		a, err := s.chainAlloc(ctx, cursor{addr: nodeSlotAddr(node, 3), node: node, depth: 2}, node4)
		if err != nil {
			t.Fatal(err)
		}
		if a.MN() != tc.want {
			t.Errorf("placed %v: a chain under a slot on memory node %d went to %d, want %d", tr.placed, tc.slot, a.MN(), tc.want)
		}
	}
}

// TestPlacementBalancesSkewedKeys loads keys that all share their first
// bytes, so that the root has one child and every subtree hangs below it:
// the memory nodes must still take about as many bytes each (lighter). With
// chains always on their slot's memory node, the root child's took them all.
func TestPlacementBalancesSkewedKeys(t *testing.T) {
	ctx := context.Background()
	tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20, ChunkBytes: 64 << 10}, Options{})
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, seed))
	before, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	for range 20000 {
		k := fmt.Appendf(nil, "user%07d", r.IntN(10_000_000))
		if err := tr.Put(ctx, k, k[4:]); err != nil {
			t.Fatal(err)
		}
	}
	after, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	a, b := float64(after[0]-before[0]), float64(after[1]-before[1])
	if ratio := max(a, b) / min(a, b); ratio > 1.25 {
		t.Errorf("memory nodes took %.0f and %.0f bytes (%.2f:1), want at most 1.25:1", a, b, ratio)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
