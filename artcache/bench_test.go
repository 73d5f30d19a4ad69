package artcache

import (
	"fmt"
	"slices"
	"testing"
)

// benchCache returns a cache (hash-indexed if hash) holding the internal nodes of a
// SMART tree of n e-mail keys, and the keys (encoded: zero-terminated).
func benchCache(b *testing.B, hash bool, n int) (*Cache, [][]byte) {
	keys := emailKeys(n, 3)
	c := New(Options{Hash: hash})
	for _, nd := range smartNodes(keys) {
		c.Insert(nd.prefix, nd.entry())
	}
	for i, k := range keys {
		keys[i] = append(slices.Clip(k), 0)
	}
	return c, keys
}

// benchKinds runs f for both index kinds, as sub-benchmarks named by
// prefix and the kind.
func benchKinds(b *testing.B, f func(b *testing.B, hash bool), prefix string) {
	for _, hash := range []bool{false, true} {
		b.Run(prefix+map[bool]string{false: "art", true: "hash"}[hash], func(b *testing.B) { f(b, hash) })
	}
}

// BenchmarkLookup looks up whole keys: each hits the cached parent of the
// key's leaf, the deepest of its path. With 1000 keys the cache fits in the
// CPU caches; with 100000 keys (about 23000 nodes) a lookup mostly waits
// for memory.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		benchKinds(b, func(b *testing.B, hash bool) {
			c, keys := benchCache(b, hash, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, _, _, ok := c.Lookup(keys[i]); !ok {
					b.Fatalf("miss %q", keys[i])
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		}, fmt.Sprintf("keys=%d/", n))
	}
}

// BenchmarkLookupParallel is BenchmarkLookup from all cores at once: the
// read lock and the reference bits are shared.
func BenchmarkLookupParallel(b *testing.B) {
	benchKinds(b, func(b *testing.B, hash bool) {
		c, keys := benchCache(b, hash, 100000)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				c.Lookup(keys[i])
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	}, "")
}

// BenchmarkInsert inserts fresh snapshots of SMART nodes into a cache a
// quarter of their size, so most inserts also evict.
func BenchmarkInsert(b *testing.B) {
	benchKinds(b, func(b *testing.B, hash bool) {
		nodes := smartNodes(emailKeys(100000, 3))
		full := New(Options{Hash: hash})
		for _, nd := range nodes {
			full.Insert(nd.prefix, nd.entry())
		}
		c := New(Options{Hash: hash, Bytes: full.Stats().Bytes / 4})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			nd := nodes[i]
			c.Insert(nd.prefix, NewEntry(uint64(i), nd.slots, nd.level))
			if i++; i == len(nodes) {
				i = 0
			}
		}
		b.ReportMetric(float64(c.Stats().Entries), "entries")
	}, "")
}
