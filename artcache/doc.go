// Package artcache is a compute node's cache of SMART internal nodes (SMART
// §4.4.3): each entry is a snapshot of one remote node, keyed by the node's
// key prefix, the key bytes a search has matched when it reaches the node.
// A search asks Lookup for the deepest cached node with a slot for its next
// key byte and starts its remote traversal there; after reading a node it
// validates the entry (reverse pointer, node type), Invalidates a stale one
// and Inserts fresh snapshots.
//
// # Index
//
// Entries are indexed by a local adaptive radix tree: inner nodes of five
// kinds (4, 8 and 16 sorted keys, 48 behind a byte index, 256 direct) that grow
// and shrink with their child count, and path compression, so a byte shared
// by many prefixes is stored once. Node prefixes are prefixes of their
// descendants' prefixes, so entries live both at leaves (the Entry is the
// leaf, with no separate node) and at inner positions (an inner node holds
// the entry whose prefix ends where it is). Removing an entry restores the
// tree's canonical form: a childless inner node becomes its entry's leaf,
// an inner node with neither entry nor a second child merges into its
// child. Options.Hash selects a hash map of full prefixes instead, the
// baseline of the factor analysis. Any prefix is a valid key, including the
// empty prefix of the root node.
//
// # Memory
//
// Stats.Bytes is the memory the cache holds, counted exactly: every entry
// (one allocation: the Entry struct and room for its slot words, the
// slot words of the small children it holds, Entry.WithChild, and, for a
// snapshot of more than 64 slots, a 256-byte index of its slots by partial
// key that spares Lookup a scan of up to 2 KB of slots; chosen so that they
// fill one of the Go allocator's size classes), every inner
// node of the ART (its struct size by kind) and every stored prefix byte
// (each node's compressed path). The hash index instead counts, per entry,
// a map slot, its ring links and the entry's full prefix. On 64-bit
// platforms an Entry is 48 bytes before its slot words (a node of 15
// slots: 176 bytes in all), an inner node 80 (node4), 112 (node8), 184
// (node16), 680 (node48) or 2088 (node256) bytes and a hash slot 56 bytes. Fixed
// per-cache overhead and the allocator's rounding of inner nodes are not
// counted. Insert evicts until Bytes is within Options.Bytes, and an empty
// cache accounts 0 bytes.
//
// For the prefixes of a SMART tree of e-mail keys (mean prefix 17.5 bytes)
// the ART index costs about 30 bytes per entry and the hash index about 74,
// so the ART cache holds more nodes under the same budget.
//
// # Eviction
//
// CLOCK: Lookup and Get set an entry's reference bit (an atomic store, under
// the read lock); the hand evicts the first entry whose bit is clear and
// clears the bits it passes. The hand sweeps the entries in the order the
// index keeps them, wrapping around: prefix order in the ART (so entries
// need no ring links of their own), insertion order in the hash index
// (where a new entry joins just before the hand). The policy is
// deterministic: it uses no clock, map order or random source, so a
// simulation replays bit for bit.
//
// # Concurrency
//
// A Cache is safe for concurrent use. Entries are immutable once inserted,
// so an entry returned by Lookup stays usable after it is evicted: it is a
// snapshot, to be validated against remote memory anyway.
package artcache
