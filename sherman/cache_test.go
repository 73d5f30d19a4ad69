package sherman

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestCacheHitOneRoundTrip checks that a search whose leaf's parent is
// cached reads exactly one leaf in one round trip.
func TestCacheHitOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{MemoryNodes: 2})
	tr := openTree(t, p, Options{})
	for i := range uint64(5000) {
		if err := tr.Put(ctx, ikey(i*3), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if info := verify(t, tr); info.height < 3 {
		t.Fatalf("tree too low: %+v", info)
	}
	for _, k := range []uint64{0, 777, 14997, 14998} {
		if _, _, err := tr.Get(ctx, ikey(k)); err != nil { // warm
			t.Fatal(err)
		}
		before := tr.cn.Stats()
		v, ok, err := tr.Get(ctx, ikey(k))
		io := tr.cn.Stats().Sub(before)
		if err != nil || ok != (k%3 == 0) || ok && !bytes.Equal(v, ikey(k/3)) {
			t.Fatalf("Get(%d) = %x %v %v", k, v, ok, err)
		}
		if io.RoundTrips != 1 || io.ReadBytes != uint64(tr.g.leafBytes) {
			t.Errorf("cached Get(%d): %d round trips, %d bytes read; want 1 and %d", k, io.RoundTrips, io.ReadBytes, tr.g.leafBytes)
		}
	}
}

// TestCacheInvalidation lets one compute node cache level-1 pages, grows
// the tree under them from another, and checks that the first node's
// operations stay correct, drop the stale entries and use the cache again.
func TestCacheInvalidation(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{MemoryNodes: 2})
	opts := Options{Span: 8}
	a, b := openTree(t, p, opts), openTree(t, p, opts)
	for i := range uint64(400) {
		if err := a.Put(ctx, ikey(i*100), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(400) { // cache every level-1 page on a
		if _, _, err := a.Get(ctx, ikey(i*100)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(4000) { // split the leaves and level-1 pages from b
		if err := b.Put(ctx, ikey(i*10+5), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	before := a.Stats()
	for i := range uint64(4000) {
		v, ok, err := a.Get(ctx, ikey(i*10+5))
		if err != nil || !ok || !bytes.Equal(v, ikey(i)) {
			t.Fatalf("Get(%d) through a stale cache = %x %v %v", i*10+5, v, ok, err)
		}
	}
	if err := a.Put(ctx, ikey(1), ikey(1)); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if inv := st.CacheInvalidations - before.CacheInvalidations; inv == 0 {
		t.Fatalf("no cache entry invalidated: %+v", st)
	}
	before = a.Stats()
	for i := range uint64(4000) {
		if _, _, err := a.Get(ctx, ikey(i*10+5)); err != nil {
			t.Fatal(err)
		}
	}
	st = a.Stats()
	hits := st.CacheHits - before.CacheHits
	if misses := st.CacheLookups - before.CacheLookups - hits; hits < 3900 || misses > 100 {
		t.Fatalf("after refresh: %d hits, %d misses", hits, misses)
	}
	verify(t, a)
}

// TestCacheBudget checks that the cache stays within its byte budget.
func TestCacheBudget(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{})
	budget := int64(4 << 10)
	tr := openTree(t, p, Options{Span: 6, CacheBytes: budget})
	for i := range uint64(3000) {
		if err := tr.Put(ctx, ikey(i*7919%3000), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(3000) {
		if _, ok, err := tr.Get(ctx, ikey(i)); err != nil || !ok {
			t.Fatalf("Get(%d) = %v %v", i, ok, err)
		}
	}
	pages, bytes := tr.cache.size()
	if bytes > budget || pages < 2 {
		t.Fatalf("cache holds %d pages in %d bytes, budget %d", pages, bytes, budget)
	}
	if st := tr.Stats(); st.CacheEntries != pages || st.CacheBytes != bytes {
		t.Fatalf("Stats reports %d cached pages in %d bytes, the cache holds %d in %d", st.CacheEntries, st.CacheBytes, pages, bytes)
	}
	verify(t, tr)
}

// TestCacheOverlap checks how cached ranges replace each other.
func TestCacheOverlap(t *testing.T) {
	g := testGeometry(t, Options{Span: 4})
	mk := func(version uint32, low, high string, child remote.Addr) page {
		h := header{version: version, level: 1, leftmost: child, low: []byte(low), high: []byte(high), highInf: high == ""}
		b := make([]byte, g.pageBytes)
		g.encodeInner(b, &h, nil)
		return page{g, b}
	}
	c := newCache(g, 1<<20, 1)
	A, B := remote.MakeAddr(0, 4096), remote.MakeAddr(0, 8192)
	lookup := func(k string) remote.Addr {
		leaf, _ := c.lookup([]byte(k))
		return leaf
	}
	c.add(A, mk(1, "", "", 100)) // A covers everything
	if lookup("q") != 100 || lookup("") != 100 {
		t.Fatal("wide entry not found")
	}
	c.add(A, mk(2, "", "m", 101)) // A split: now [-inf, m)
	c.add(B, mk(1, "m", "", 102)) // its new sibling [m, +inf)
	if lookup("a") != 101 || lookup("m") != 102 || lookup("z") != 102 {
		t.Fatalf("after split: %v %v %v", lookup("a"), lookup("m"), lookup("z"))
	}
	c.add(A, mk(1, "", "", 100)) // a stale copy of A is ignored
	if lookup("z") != 102 || lookup("a") != 101 {
		t.Fatal("stale copy replaced a newer one")
	}
	if n, _ := c.size(); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
	_, e := c.lookup([]byte("z"))
	c.invalidate(e)
	c.invalidate(e)
	if lookup("z") != 0 || lookup("a") != 101 {
		t.Fatal("invalidation dropped the wrong entry")
	}
}

// TestOutOfMemory fills a tiny pool and checks that allocation failure
// surfaces as remote.ErrOutOfMemory and leaves the tree intact and usable.
func TestOutOfMemory(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{NodeBytes: 256 << 10, ChunkBytes: 16 << 10})
	tr := openTree(t, p, Options{Span: 4})
	var n uint64
	var err error
	for ; n < 1<<20; n++ {
		if err = tr.Put(ctx, ikey(n), ikey(n)); err != nil {
			break
		}
	}
	if !errors.Is(err, remote.ErrOutOfMemory) {
		t.Fatalf("after %d inserts: %v, want ErrOutOfMemory", n, err)
	}
	t.Logf("%d inserts, then: %v", n, err)
	// The failed Put is not applied (a Put whose leaf split succeeded but
	// whose separator insert failed returns nil: TestPutStoredDespiteSeparatorFailure).
	if v, ok, err := tr.Get(ctx, ikey(n)); err != nil || ok {
		t.Fatalf("the failed insert is stored: %x %v %v", v, ok, err)
	}
	for i := range n {
		if v, ok, err := tr.Get(ctx, ikey(i)); err != nil || !ok || !bytes.Equal(v, ikey(i)) {
			t.Fatalf("Get(%d) = %x %v %v", i, v, ok, err)
		}
	}
	if err := tr.Put(ctx, ikey(0), []byte("update")); err != nil { // in place: no allocation
		t.Fatal(err)
	}
	s, _ := tr.session(context.Background())
	defer tr.release(s)
	if _, err := s.verify(ctx, false); err != nil {
		t.Fatal(err)
	}
}

// TestScanEarlyBreakIO checks that a scan stopped early reads about what it
// consumed (its batches double while the caller keeps going) in few round
// trips.
func TestScanEarlyBreakIO(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, remote.Config{MemoryNodes: 2})
	tr := openTree(t, p, Options{})
	for i := range uint64(20000) {
		if err := tr.Put(ctx, ikey(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(0); i < 20000; i += 10 { // cache every level-1 page
		if _, _, err := tr.Get(ctx, ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Sequential inserts leave the leaves half full: 16 pairs each. A scan
	// consuming n pairs needs about n/16+2 leaves (it starts mid-leaf); the
	// doubling batches read at most twice that, plus the first leaf.
	leaf := uint64(tr.g.leafBytes)
	for _, c := range []struct{ pairs, maxRTT, maxLeaves int }{
		{10, 2, 3},
		{100, 4, 2*(100/16+2) + 1},
		{1000, 8, 2*(1000/16+2) + 1},
	} {
		before := tr.cn.Stats()
		n := 0
		for kv, err := range tr.Scan(ctx, ikey(5000), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(kv.Key, ikey(5000+uint64(n))) {
				t.Fatalf("pair %d is %x", n, kv.Key)
			}
			if n++; n == c.pairs {
				break
			}
		}
		io := tr.cn.Stats().Sub(before)
		if io.RoundTrips > uint64(c.maxRTT) || io.ReadBytes > uint64(c.maxLeaves)*leaf {
			t.Errorf("scan of %d pairs: %d round trips, %d leaves read; want at most %d and %d",
				c.pairs, io.RoundTrips, io.ReadBytes/leaf, c.maxRTT, c.maxLeaves)
		}
		t.Logf("scan of %d pairs: %d round trips, %d leaves", c.pairs, io.RoundTrips, io.ReadBytes/leaf)
	}
}
