package smart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/artcache"
	"github.com/dmindex/dmindex/remote"
)

// TestReclaimStaleCacheSeesNoGhost builds the hazard that birth epochs exist
// for (I8): a cache entry still names the slot of a deleted key's leaf;
// the leaf was reclaimed and is being reused by an insert of the same key
// at the same slot that has written the leaf but not linked it (its CAS may
// yet fail). The leaf then looks like the key's leaf through the stale
// slot: the right key, valid, its reverse pointer naming that slot. A Get
// must not return its value: the key is deleted until the insert links it.
func TestReclaimStaleCacheSeesNoGhost(t *testing.T) {
	ctx := context.Background()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1}, Options{Reclaim: true, ReclaimInterval: 20 * time.Microsecond})
	defer p.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%03d", i) }
	for i := range 100 {
		if err := tr.Put(ctx, key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	victim := key(42)
	if _, _, err := tr.Get(ctx, victim); err != nil { // caches the path
		t.Fatal(err)
	}
	enc := appendEncoded(nil, victim)
	e, idx, plen, ok := tr.cache.Lookup(enc)
	if !ok || !slot(e.Slots()[idx]).isLeaf() {
		t.Fatalf("the victim's leaf slot is not cached (ok %v)", ok)
	}
	stale := artcache.NewEntry(e.Addr, e.Slots(), e.Level())
	stale.Epoch = e.Epoch
	sl := slot(e.Slots()[idx])
	slotAddr := nodeSlotAddr(remote.Addr(e.Addr), idx)

	if found, err := tr.Delete(ctx, victim); err != nil || !found {
		t.Fatalf("Delete = %v, %v", found, err)
	}
	// Operations of the compute node reclaim (one per interval) until the
	// victim's leaf is free; take it, as an insert would.
	size := classBytes(sl.leafClass())
	var reusedAt remote.Addr
	for i := 0; reusedAt.IsNil(); i++ {
		if i == 10_000 {
			t.Fatal("the deleted leaf was never reclaimed")
		}
		if _, _, err := tr.Get(ctx, key(i%100)); err != nil {
			t.Fatal(err)
		}
		if a := tr.leaves.Take(sl.addr().MN(), uint64(size), leafAlign); !a.IsNil() {
			if a != sl.addr() {
				t.Fatalf("reclaimed %v, not the victim's leaf %v", a, sl.addr())
			}
			reusedAt = a
		}
	}
	if birth := tr.epoch(); !bornAfter(birth, stale.Epoch) {
		t.Fatalf("epoch %d not after the cache entry's %d: reclamation without two epoch advances", birth, stale.Epoch)
	}
	// The insert's leaf image, written, not linked: the slot holds the
	// victim's tombstone.
	img := tr.lf.image(nil, slotAddr, victim, []byte("ghost"), sl.leafClass(), tr.epoch())
	c := p.NewComputeNode().NewClient()
	if err := c.Write(ctx, reusedAt, img); err != nil {
		t.Fatal(err)
	}
	// The cache still names the old slot value.
	tr.cache.Insert(enc[:plen], stale)
	if e, idx, _, ok := tr.cache.Lookup(enc); !ok || slot(e.Slots()[idx]) != sl {
		t.Fatal("could not put the stale entry back into the cache")
	}
	v, found, err := tr.Get(ctx, victim)
	if err != nil || found {
		t.Fatalf("Get of the deleted key through the stale cache = %q, %v, %v; want not found", v, found, err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyLinkedFreeLeaf: Verify reports a leaf that is free for reuse
// while a slot still links it (I8).
func TestVerifyLinkedFreeLeaf(t *testing.T) {
	ctx := context.Background()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1}, Options{Reclaim: true})
	defer p.Close()
	for i := range 100 {
		if err := tr.Put(ctx, fmt.Appendf(nil, "key-%03d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	k := []byte("key-042")
	if _, _, err := tr.Get(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	e, idx, _, ok := tr.cache.Lookup(appendEncoded(nil, k))
	if !ok {
		t.Fatal("the key's slot is not cached")
	}
	sl := slot(e.Slots()[idx])
	tr.leaves.Put(sl.addr(), uint64(classBytes(sl.leafClass())))
	if err := tr.Verify(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "I8: ") {
		t.Fatalf("Verify with a linked leaf in the free pool: %v, want an I8 corruption", err)
	}
}

// TestReclaimScanAcrossLostLease: a scan whose consumer pauses longer than
// the lease between pairs is judged dead by the other compute node, which
// meanwhile inserts and deletes keys between the stable ones (reusing their
// leaves). The scan must notice (Renewals), continue after the last pair it
// yielded, and still yield every stable key once, every key in order. (The
// birth rule alone keeps this scan's pairs right; the test checks that the
// renewal happens and that resuming loses and repeats nothing.)
func TestReclaimScanAcrossLostLease(t *testing.T) {
	ctx := context.Background()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	opts := Options{Reclaim: true, ReclaimInterval: 100 * time.Microsecond} // lease 1 ms
	scanner, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	churner, err := Open(p.NewComputeNode(), opts)
	if err != nil {
		t.Fatal(err)
	}
	stable := func(i int) []byte { return fmt.Appendf(nil, "s-%03d", i) }
	churn := func(i int) []byte { return fmt.Appendf(nil, "s-%03d-c", i) }
	for i := range 40 {
		if err := scanner.Put(ctx, stable(i), []byte("stable")); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for r := 0; ; r++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			k := churn(r % 40)
			if err := churner.Put(ctx, k, []byte("churn")); err != nil {
				done <- err
				return
			}
			if _, err := churner.Delete(ctx, k); err != nil {
				done <- err
				return
			}
		}
	}()
	var last []byte
	var stables [][]byte
	for kv, err := range scanner.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && bytes.Compare(kv.Key, last) <= 0 {
			t.Fatalf("key %q after %q: out of order (a reused leaf taken for the one the frontier named?)", kv.Key, last)
		}
		last = kv.Key
		if !bytes.HasSuffix(kv.Key, []byte("-c")) {
			stables = append(stables, kv.Key)
		} else if !bytes.Equal(kv.Value, []byte("churn")) {
			t.Fatalf("churned key %q with value %q", kv.Key, kv.Value)
		}
		time.Sleep(3 * time.Millisecond) // three leases of the churner's clock
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(stables) != 40 {
		t.Fatalf("scan yielded %d stable keys, want 40: %q", len(stables), stables)
	}
	for i, k := range stables {
		if !bytes.Equal(k, stable(i)) {
			t.Fatalf("pair %d: key %q, want %q", i, k, stable(i))
		}
	}
	st, ch := scanner.Stats(), churner.Stats()
	t.Logf("scanner: %v; churner: %v", st, ch)
	if st.Renewals == 0 || ch.Reused == 0 {
		t.Fatalf("renewals %d, leaves reused %d: the scan was never judged dead while leaves were reused", st.Renewals, ch.Reused)
	}
	for _, tr := range []*Tree{scanner, churner} {
		if err := tr.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
