package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// epochRun is one run of the reclamation stress test.
type epochRun struct {
	freed, reused, violations int
	problems                  []string
}

// TestEpochReclaimSafe runs writers that replace objects behind shared slots
// (allocating, publishing with CAS, retiring the old object) and readers
// that follow the slots, on several compute nodes in the simulator, with
// Reclaim called as they go and freed memory reused. A reader pinned while
// it follows a slot must find the object it points to unchanged: reuse
// while it reads is a violation. One more node pins and then stops beating
// (a crashed client): reclamation must go on without it after a Lease.
func TestEpochReclaimSafe(t *testing.T) {
	seed := testseed.Seed(t)
	r := runEpoch(t, seed, false)
	for _, p := range r.problems {
		t.Error(p)
	}
	if r.violations > 0 {
		t.Fatalf("%d reads found a pinned object reused", r.violations)
	}
	// The test must exercise reuse, or it could not fail.
	if r.freed < 100 || r.reused < 100 {
		t.Fatalf("only %d objects freed and %d reused: the run does not exercise reclamation", r.freed, r.reused)
	}
	t.Logf("%d objects freed, %d allocations reused freed memory", r.freed, r.reused)
}

// TestEpochUnsafeFreeDetected frees retired objects at once, ignoring the
// epochs: the same workload must then see reuse under pinned readers, which
// shows that TestEpochReclaimSafe can fail.
func TestEpochUnsafeFreeDetected(t *testing.T) {
	r := runEpoch(t, testseed.Seed(t), true)
	if r.violations == 0 {
		t.Fatalf("freeing at once went unnoticed (%d freed, %d reused)", r.freed, r.reused)
	}
}

func runEpoch(t *testing.T, seed uint64, unsafeFree bool) epochRun {
	t.Helper()
	const nodes, perNode, ops, slots = 3, 3, 300, 4
	ctx := context.Background()
	p := newPool(t, true, seed)
	opts := Options{Lease: 200 * time.Microsecond}

	setup := p.NewComputeNode().NewClient()
	slotBase, err := setup.Named(ctx, "test/slots", 8*slots)
	if err != nil {
		t.Fatal(err)
	}
	newObj := func(c *remote.Client, gen uint64) (uint64, error) {
		a, err := c.AllocOn(ctx, 1, 64, 64)
		if err != nil {
			return 0, err
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], gen)
		if err := c.Write(ctx, a, b[:]); err != nil {
			return 0, err
		}
		return gen<<32 | a.Offset()>>6, nil
	}
	for s := range slots {
		w, err := newObj(setup, uint64(s+1))
		if err != nil {
			t.Fatal(err)
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		if err := setup.Write(ctx, slotBase.Add(uint64(8*s)), b[:]); err != nil {
			t.Fatal(err)
		}
	}
	objAddr := func(w uint64) remote.Addr { return remote.MakeAddr(1, (w&(1<<32-1))<<6) }

	// The crashed node: pins, beats once, and is never heard of again.
	crashed := p.NewComputeNode().NewClient()
	cn := join(t, crashed, opts)
	register(t, cn, crashed).Pin()

	var out epochRun
	res := make([]epochRun, nodes*perNode)
	for i := range nodes {
		cnode := p.NewComputeNode()
		c0 := cnode.NewClient()
		n := join(t, c0, opts)
		for j := range perNode {
			c := cnode.NewClient()
			m := register(t, n, c)
			g := i*perNode + j
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			p.Go(func() {
				res[g] = epochWorker(ctx, n, m, c, rng, g, ops, slots, slotBase, newObj, objAddr, unsafeFree)
			})
		}
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		out.freed += r.freed
		out.reused += r.reused
		out.violations += r.violations
		out.problems = append(out.problems, r.problems...)
	}
	return out
}

func epochWorker(ctx context.Context, n *Node, m *Member, c *remote.Client, rng *rand.Rand, g, ops, slots int,
	slotBase remote.Addr, newObj func(*remote.Client, uint64) (uint64, error), objAddr func(uint64) remote.Addr,
	unsafeFree bool) (r epochRun) {
	fail := func(format string, args ...any) { r.problems = append(r.problems, fmt.Sprintf(format, args...)) }
	seenAddr := map[remote.Addr]bool{}
	var b [8]byte
	for i := range ops {
		m.Pin()
		if _, err := m.Touch(ctx, c); err != nil {
			fail("Touch: %v", err)
			return
		}
		slot := slotBase.Add(uint64(8 * rng.IntN(slots)))
		if err := c.Read(ctx, slot, b[:]); err != nil {
			fail("%v", err)
			return
		}
		cur := binary.LittleEndian.Uint64(b[:])
		if rng.IntN(2) == 0 {
			// Reader: the object must still hold the generation the slot
			// named when it was read, however long we take.
			c.Compute(time.Duration(rng.IntN(20)) * time.Microsecond)
			if err := c.Read(ctx, objAddr(cur), b[:]); err != nil {
				fail("%v", err)
				return
			}
			if got := binary.LittleEndian.Uint64(b[:]); got != cur>>32 {
				r.violations++
			}
		} else {
			gen := uint64(g+1)<<20 | uint64(i+1)
			w, err := newObj(c, gen)
			if err != nil {
				fail("alloc: %v", err)
				return
			}
			if a := objAddr(w); seenAddr[a] {
				r.reused++
			} else {
				seenAddr[a] = true
			}
			old, err := c.CAS(ctx, slot, cur, w)
			switch {
			case err != nil:
				fail("%v", err)
				return
			case old != cur:
				// Never published: nobody can have seen it.
				if err := c.Free(objAddr(w), 64); err != nil {
					fail("%v", err)
				}
			case unsafeFree:
				if err := c.Free(objAddr(cur), 64); err != nil {
					fail("%v", err)
				}
			default:
				m.Retire(objAddr(cur), 64)
			}
		}
		m.Unpin()
		if i%8 == 7 {
			k, err := n.Reclaim(ctx, c)
			if err != nil {
				fail("Reclaim: %v", err)
				return
			}
			r.freed += k
		}
	}
	return r
}
