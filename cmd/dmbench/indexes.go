package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
)

// indexes maps the names accepted by --index and --indexes to constructors
// of Openers. Each run gets a fresh Opener from its constructor. Tests add
// an in-memory index here.
var indexes = map[string]func() ycsb.Opener{
	"smart":   func() ycsb.Opener { return smartOpener(smart.Options{}) },
	"sherman": func() ycsb.Opener { return shermanOpener },
}

// opener returns a fresh Opener of the named index.
func opener(name string) (ycsb.Opener, error) {
	mk, ok := indexes[name]
	if !ok {
		names := make([]string, 0, len(indexes))
		for n := range indexes {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("unknown index %q (want %s)", name, strings.Join(names, " or "))
	}
	return mk(), nil
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

// shermanOpener opens Sherman with the paper's configuration (span 32) and
// entries sized for the run's keys and values.
func shermanOpener(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
	t, err := sherman.Open(cn, sherman.Options{
		Name: cfg.Name, KeySize: cfg.KeySize, ValueSize: cfg.ValueSize, CacheBytes: cfg.CacheBytes,
	})
	if err != nil {
		return nil, err
	}
	return shermanIndex{t}, nil
}

// shermanIndex reports Sherman's index-cache counters as a
// ycsb.CacheReporter: a lookup is a leaf operation's use of the cache.
type shermanIndex struct{ *sherman.Tree }

// CacheStats implements ycsb.CacheReporter.
func (s shermanIndex) CacheStats() (hits, lookups uint64) {
	st := s.Stats()
	return st.CacheHits, st.CacheHits + st.CacheMisses
}
