package smart

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// unpublished walks the tree once and describes the first child it finds
// linked before it was complete (invariant I3), or returns "". A child is
// judged only if its slot still holds it after the child was read (slots
// never take a value twice, so it was linked during the whole read): a leaf
// must pass its checksum, a node must have a valid header, and either must
// point back at its slot, unless a split in flight flagged its reverse
// pointer. Leaves judged complete are recorded in done and not read again
// (nodes are, to find their new children), so that a walk spends its reads
// on what was published since the last one. In-place leaf updates must not
// run meanwhile: a leaf torn by one looks unpublished.
func unpublished(ctx context.Context, s *session, done map[slot]bool) (string, error) {
	w, err := s.readWord(ctx, s.t.rootSlot)
	if err != nil {
		return "", err
	}
	return unpublishedNode(ctx, s, s.t.rootSlot, slot(w), done)
}

func unpublishedNode(ctx context.Context, s *session, at remote.Addr, sl slot, done map[slot]bool) (string, error) {
	buf := make([]byte, s.t.nodeReadBytes(sl))
	if err := s.c.Read(ctx, sl.addr(), buf); err != nil {
		return "", err
	}
	// The children first: a child published since the last walk is read
	// one round trip after the node.
	for i := range slotsRead(buf) {
		c := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
		var p string
		var err error
		switch {
		case !c.isChild() || done[c] || c.isFrozen():
			continue // a frozen slot's node is moving: nobody uses what it names
		case c.isLeaf():
			if p, err = unpublishedLeaf(ctx, s, nodeSlotAddr(sl.addr(), i), c); p == "" && err == nil {
				done[c] = true
			}
		default:
			p, err = unpublishedNode(ctx, s, nodeSlotAddr(sl.addr(), i), c, done)
		}
		if p != "" || err != nil {
			return p, err
		}
	}
	if w, err := s.readWord(ctx, at); err != nil || slot(w) != sl {
		return "", err
	}
	rev := remote.Addr(binary.LittleEndian.Uint64(buf[nodeRevOff:]))
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	switch {
	case h == 0 || h.nodeType() > node256:
		return fmt.Sprintf("node %v linked at %v with header %#x", sl.addr(), at, uint64(h)), nil
	case rev&revMoving == 0 && rev != at:
		return fmt.Sprintf("node %v linked at %v points back at %v", sl.addr(), at, rev), nil
	}
	return "", nil
}

func unpublishedLeaf(ctx context.Context, s *session, at remote.Addr, sl slot) (string, error) {
	v, st, err := s.readLeaf(ctx, sl, true)
	if err != nil {
		return "", err
	}
	if w, err := s.readWord(ctx, at); err != nil || slot(w) != sl {
		return "", err
	}
	switch {
	case st == leafTorn:
		return fmt.Sprintf("leaf %v linked at %v fails its checksum", sl.addr(), at), nil
	case v.rev&revMoving == 0 && v.rev != at && v.lock == 0:
		// A split moves the reverse pointer of the leaf it holds locked
		// before its slot CAS: only an unlocked leaf must point back.
		return fmt.Sprintf("leaf %v (key %q) linked at %v points back at %v", sl.addr(), v.key, at, v.rev), nil
	}
	return "", nil
}

// skewPool returns a simulated pool of two memory nodes in Skew mode: verbs
// of one batch to different memory nodes land in either order.
func skewPool(t testing.TB, seed uint64, nodeBytes int64) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: nodeBytes, ChunkBytes: 64 << 10,
		Sim: &remote.SimConfig{Seed: seed, Skew: 40 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// watchers is how many clients watch for unpublished objects at once: a
// watcher catches an object only if it reads it inside its window of
// exposure.
const watchers = 16

// watchLeaf checks, in a simulated goroutine of p with session s and until
// stop is set, the leaf that holds key (which must stay in the tree): it
// reads the leaf's slot, the leaf and the slot again, again and again, and
// reports the first leaf linked before it was complete (see unpublished).
func watchLeaf(p *remote.Pool, s *session, key []byte, stop *atomic.Bool, report func(string)) {
	p.Go(func() {
		ctx := context.Background()
		s.enc = appendEncoded(s.enc[:0], key)
		cur, err := s.root(ctx)
		for err == nil && !stop.Load() {
			s.retries = 0
			var d descent
			if d, err = s.descend(ctx, s.enc, cur); err != nil {
				break
			}
			if d.out != atLeaf {
				report(fmt.Sprintf("key %q not in the tree (%v)", key, d.out))
				return
			}
			cur = d.cur
			var msg string
			if msg, err = unpublishedLeaf(ctx, s, cur.addr, cur.sl); msg != "" {
				report(msg)
				return
			}
			var w uint64
			w, err = s.readWord(ctx, cur.addr)
			cur = cur.with(slot(w))
		}
		if err != nil {
			report(err.Error())
		}
	})
}

// TestMovedLeafPublishedComplete runs out-of-place updates of a key, and an
// insert that splits its leaf into a new node (allocated round-robin, so
// often on the other memory node), while watchers read the key's slot and
// leaf again and again. Verbs to the two memory nodes are not ordered (Skew
// mode), so a watcher must never see a leaf linked before it is complete,
// reverse pointer included (I3; a leaf being split points at its new slot
// under its lock), and the tree must verify.
func TestMovedLeafPublishedComplete(t *testing.T) {
	seed := testseed.Seed(t)
	trials := 60
	if testing.Short() {
		trials = 30
	}
	ctx := context.Background()
	k := []byte("moved-key")
	for trial := range trials {
		p := skewPool(t, seed+uint64(trial), 8<<20)
		tr, err := Open(p.NewComputeNode(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Put(ctx, k, []byte("small")); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var problem string
		p.Go(func() {
			defer stop.Store(true)
			for i := range 8 {
				// Each update outgrows the leaf's size class: out of place.
				if err := tr.Put(ctx, k, make([]byte, 100+i*80)); err != nil {
					problem = err.Error()
					return
				}
				if i == 3 {
					if err := tr.Put(ctx, []byte("moved-kez"), []byte("splits")); err != nil {
						problem = err.Error()
						return
					}
				}
			}
		})
		for range watchers {
			watchLeaf(p, tr.newSession(), k, &stop, func(msg string) { problem = msg })
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if problem != "" {
			t.Errorf("trial %d: %s", trial, problem)
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if got, ok, err := tr.Get(ctx, k); err != nil || !ok || len(got) != 100+7*80 {
			t.Fatalf("trial %d: Get = %d bytes, %v, %v", trial, len(got), ok, err)
		}
	}
}
