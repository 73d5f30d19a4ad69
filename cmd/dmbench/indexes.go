package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// index is an index dmbench can run: a constructor of Openers (each run
// gets a fresh one), its memory footprint for the run's estimate (nil:
// unknown), and whether its whole state is in the pool, so that runs may
// share a loaded index (ycsb.Load; the test indexes keep theirs in the Go
// heap).
type index struct {
	open      func() ycsb.Opener
	footprint func(ycsb.IndexConfig) ycsb.Footprint
	inPool    bool
}

// indexes maps the names accepted by --index and --indexes to indexes.
// Tests add in-memory indexes here.
var indexes = map[string]index{
	"smart":   {open: func() ycsb.Opener { return smartOpener(smart.Options{}) }, footprint: smartFootprint, inPool: true},
	"sherman": {open: func() ycsb.Opener { return shermanWith(sherman.Options{}) }, footprint: shermanFootprint, inPool: true},
	// Sherman without the redo record of page writes
	// (sherman.Options.NoRedo): the paper's Sherman, which a crash in the
	// middle of a page WRITE leaves torn for good.
	"sherman-noredo": {open: func() ycsb.Opener { return shermanWith(sherman.Options{NoRedo: true}) }, footprint: shermanFootprint, inPool: true},
	// SMART reusing retired leaves (smart.Options.Reclaim), to measure
	// what reclamation costs next to the paper's design.
	"smart-reclaim": {open: func() ycsb.Opener { return smartOpener(smart.Options{Reclaim: true}) }, footprint: smartFootprint, inPool: true},
	// SMART without the redo record of in-place updates
	// (smart.Options.NoRedo): the paper's update, which a crash in the
	// middle of its WRITE leaves torn for good.
	"smart-noredo": {open: func() ycsb.Opener { return smartOpener(smart.Options{NoRedo: true}) }, footprint: smartFootprint, inPool: true},
	// SMART with the paper's internal nodes, room for 256 slots each
	// (smart.Options.PaperNodes), instead of nodes by size class.
	"smart-paper": {open: func() ycsb.Opener { return smartOpener(smart.Options{PaperNodes: true}) }, footprint: smartPaperFootprint, inPool: true},
}

// lookup returns the named index.
func lookup(name string) (index, error) {
	ix, ok := indexes[name]
	if !ok {
		return index{}, fmt.Errorf("unknown index %q (want %s)", name, indexNames(" or "))
	}
	return ix, nil
}

// indexNames lists the names of indexes, sorted, the last two joined by
// last ("a, b or c").
func indexNames(last string) string {
	names := slices.Sorted(maps.Keys(indexes))
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + last + names[len(names)-1]
}

// smartOpener opens SMART trees with the switches of o (Figure 4.14's
// factor analysis varies them); the run decides name and cache size.
func smartOpener(o smart.Options) ycsb.Opener {
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
		o.Name, o.CacheBytes = cfg.Name, cfg.CacheBytes
		if o.CacheBytes == 0 {
			o.CacheBytes = -1 // --cache-mb 0: no cache (smart's zero means its default)
		}
		return smart.Open(cn, o)
	}
}

// smartFootprint is SMART's memory use, fitted to measurements: loading
// 100,000 records into a tree of internal nodes by size class (8-byte and
// e-mail keys, values of 8, 64 and 1024 bytes; `dmbench run --workload c
// --keys K --value-size V --records 100000`, commit c01a66a) took 82–1126
// bytes per record on the memory nodes, which 80 + 2k + 9v/8 bounds from
// above by at most 40%; the cache took 31–66 bytes per record. A compute
// node holds the RDWC table's lock stripes (16 KiB) and its open windows;
// a client its session (node and slot buffers, about 8 KiB) and buffers of
// a leaf, a staged image and a combined value.
func smartFootprint(cfg ycsb.IndexConfig) ycsb.Footprint {
	k, v := int64(cfg.KeySize), int64(cfg.ValueSize)
	return ycsb.Footprint{
		MaxKeyLen: smart.MaxKeyLen, MaxValueLen: smart.MaxValueLen,
		MaxMemoryNodes: smart.MaxMemoryNodes, MaxNodeBytes: smart.MaxNodeBytes,
		RecordBytes:         80 + 2*k + v*9/8,
		CacheBytes:          max(cfg.CacheBytes, 0),
		CacheBytesPerRecord: 16 + 2*k,
		ComputeNodeBytes:    16<<10 + 64<<10,
		ClientBytes:         8<<10 + 3*v,
	}
}

// smartPaperFootprint is smartFootprint with the paper's internal nodes
// (room for 256 slots each), whose memory use was fitted first: loading
// 200,000 records (8-byte and 32-byte keys, values of 8 to 4096 bytes)
// took 419–881 bytes per record on the memory nodes.
func smartPaperFootprint(cfg ycsb.IndexConfig) ycsb.Footprint {
	fp := smartFootprint(cfg)
	fp.RecordBytes = 300 + 16*int64(cfg.KeySize) + int64(cfg.ValueSize)*4/3
	return fp
}

// shermanWith returns an opener of Sherman with opts and the paper's
// configuration (span 32), entries sized for the run's keys and values.
func shermanWith(opts sherman.Options) ycsb.Opener {
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
		o := opts
		o.Name, o.KeySize, o.ValueSize, o.CacheBytes = cfg.Name, cfg.KeySize, cfg.ValueSize, cfg.CacheBytes
		t, err := sherman.Open(cn, o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
}

// shermanFootprint is Sherman's memory use with span 32: leaves hold
// entries of at most 6 bytes of metadata plus the key and value at their
// maximum sizes, and are about two thirds full after a random load
// (docs/sherman-layout.md); the cache holds level-1 pages, one per about
// 430 records. A compute node holds the local lock table (32768 entries of
// about 40 bytes per memory node, one per global lock word of the on-chip
// region); a client three page buffers.
func shermanFootprint(cfg ycsb.IndexConfig) ycsb.Footprint {
	const span = sherman.DefaultSpan
	k, v := int64(cfg.KeySize), int64(cfg.ValueSize)
	entry := 6 + k + v
	leaf := 26 + 2*k + span*entry
	inner := 34 + 2*k + span*(9+k)
	cache := cfg.CacheBytes
	if cache == 0 {
		cache = sherman.DefaultCacheBytes
	}
	return ycsb.Footprint{
		MaxKeyLen: sherman.MaxKeyLen, MaxValueLen: sherman.MaxValueLen,
		RecordBytes:         entry*8/5 + 4,
		CacheBytes:          max(cache, 0),
		CacheBytesPerRecord: 16 + inner/430,
		ComputeNodeBytes:    int64(cfg.MemoryNodes)*(remote.DefaultOnChipBytes/8)*40 + 64<<10,
		ClientBytes:         4<<10 + 3*max(leaf, inner),
	}
}
