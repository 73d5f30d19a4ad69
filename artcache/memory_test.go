package artcache

import "testing"

// TestARTHoldsMoreThanHash: under one budget, the ART-indexed cache holds
// more SMART nodes of e-mail keys than the hash-indexed one, because the
// ART stores the long shared prefixes once while the hash map stores each
// node's full prefix.
func TestARTHoldsMoreThanHash(t *testing.T) {
	nodes := smartNodes(emailKeys(50000, 7))
	var prefixBytes int
	for _, n := range nodes {
		prefixBytes += len(n.prefix)
	}
	t.Logf("%d SMART internal nodes of 50000 e-mail keys, mean prefix %.1f bytes",
		len(nodes), float64(prefixBytes)/float64(len(nodes)))
	full := func(hash bool) Stats {
		c := New(Options{Hash: hash, Bytes: 1 << 40})
		for _, n := range nodes {
			c.Insert(n.prefix, n.entry())
		}
		return c.Stats()
	}
	artFull, hashFull := full(false), full(true)
	entryBytes := artFull.Bytes - New(Options{}).Stats().Bytes
	for _, n := range nodes {
		entryBytes -= n.entry().bytes()
	}
	t.Logf("all nodes cached: ART %d bytes (%.1f per entry, index %.1f), hash %d bytes (%.1f per entry, index %.1f)",
		artFull.Bytes, float64(artFull.Bytes)/float64(len(nodes)), float64(entryBytes)/float64(len(nodes)),
		hashFull.Bytes, float64(hashFull.Bytes)/float64(len(nodes)),
		float64(hashFull.Bytes-artFull.Bytes+entryBytes)/float64(len(nodes)))
	if artFull.Bytes >= hashFull.Bytes {
		t.Errorf("ART cache of all nodes takes %d bytes, hash %d", artFull.Bytes, hashFull.Bytes)
	}

	budget := artFull.Bytes / 4
	held := func(hash bool) int {
		c := New(Options{Hash: hash, Bytes: budget})
		for _, n := range nodes {
			c.Insert(n.prefix, n.entry())
		}
		c.contents(t)
		return c.Stats().Entries
	}
	a, h := held(false), held(true)
	t.Logf("budget %d bytes: ART holds %d entries, hash %d (%+.1f%%)", budget, a, h, 100*float64(a-h)/float64(h))
	if a <= h {
		t.Errorf("under %d bytes the ART cache holds %d entries, the hash cache %d", budget, a, h)
	}
}
