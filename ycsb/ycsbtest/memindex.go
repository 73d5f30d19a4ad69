// Package ycsbtest provides an in-memory index for testing code that runs
// YCSB workloads (package ycsb, cmd/dmbench) without a real index.
package ycsbtest

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
)

// scanBatch is how many pairs a scan copies per remote READ.
const scanBatch = 16

// NewOpener returns an Opener of in-memory indexes. The indexes it opens
// share one ordered map (google/btree under a mutex), whatever the compute
// node or name, so call NewOpener once per run.
//
// Each operation also issues remote I/O on its compute node's pool, so that
// the simulator's clock advances and I/O statistics are meaningful: a Get
// READs, a Put or Delete WRITEs, the pair's bytes (rounded up to 8) in a
// 4 KiB region named after the index; a scan READs once per 16 pairs. The
// index reports a deterministic cache hit ratio of 3/4 (ycsb.StatsReporter).
//
// The indexes recover from crashes (index.Recoverer): an operation whose
// client an injected fault stopped returns an error wrapping
// remote.ErrCrashed without changing the map (it crashed in its only
// verb, before the map changed), and the next operation takes a new
// client. Nothing is left to repair: Recover returns 0.
func NewOpener() ycsb.Opener {
	s := &store{tree: btree.NewG(16, func(a, b pair) bool { return bytes.Compare(a.key, b.key) < 0 })}
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (index.Index, error) {
		c := cn.NewClient()
		addr, err := c.Named(context.Background(), "ycsbtest/"+cfg.Name, regionBytes)
		if err != nil {
			return nil, err
		}
		return &Index{s: s, cn: cn, addr: addr, free: []*remote.Client{c}}, nil
	}
}

const regionBytes = 4096

type pair struct{ key, value []byte }

type store struct {
	mu   sync.Mutex
	tree *btree.BTreeG[pair]
}

// Index is one compute node's handle on the shared map. It implements
// index.Index and ycsb.StatsReporter and is safe for concurrent use.
type Index struct {
	s    *store
	cn   *remote.ComputeNode
	addr remote.Addr

	mu   sync.Mutex // guards free; never held across a verb
	free []*remote.Client

	lookups atomic.Uint64
	crashed atomic.Uint64
	closed  atomic.Bool
}

var (
	_ index.Index        = (*Index)(nil)
	_ index.Recoverer    = (*Index)(nil)
	_ ycsb.StatsReporter = (*Index)(nil)
)

// client takes an idle client of the compute node, or makes one.
func (x *Index) client() *remote.Client {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.free); n > 0 {
		c := x.free[n-1]
		x.free = x.free[:n-1]
		return c
	}
	return x.cn.NewClient()
}

func (x *Index) release(c *remote.Client) {
	x.mu.Lock()
	x.free = append(x.free, c)
	x.mu.Unlock()
}

// io issues one READ or WRITE of n bytes (rounded up to 8, at most the
// region). A client stopped by an injected fault is dropped.
func (x *Index) io(ctx context.Context, write bool, n int) error {
	if x.closed.Load() {
		return index.ErrClosed
	}
	x.lookups.Add(1)
	c := x.client()
	buf := make([]byte, min((n+7)&^7, regionBytes))
	var err error
	if write {
		err = c.Write(ctx, x.addr, buf)
	} else {
		err = c.Read(ctx, x.addr, buf)
	}
	if c.Crashed() {
		x.crashed.Add(1)
		return fmt.Errorf("ycsbtest: %w", err)
	}
	x.release(c)
	return err
}

func check(key []byte) error {
	if len(key) == 0 {
		return index.ErrEmptyKey
	}
	return nil
}

// Get implements index.Index.
func (x *Index) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := check(key); err != nil {
		return nil, false, err
	}
	x.s.mu.Lock()
	p, ok := x.s.tree.Get(pair{key: key})
	x.s.mu.Unlock()
	if err := x.io(ctx, false, len(key)+len(p.value)); err != nil {
		return nil, false, err
	}
	return bytes.Clone(p.value), ok, nil
}

// Put implements index.Index.
func (x *Index) Put(ctx context.Context, key, value []byte) error {
	if err := check(key); err != nil {
		return err
	}
	if err := x.io(ctx, true, len(key)+len(value)); err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.tree.ReplaceOrInsert(pair{key: bytes.Clone(key), value: bytes.Clone(value)})
	x.s.mu.Unlock()
	return nil
}

// Delete implements index.Index.
func (x *Index) Delete(ctx context.Context, key []byte) (bool, error) {
	if err := check(key); err != nil {
		return false, err
	}
	if err := x.io(ctx, true, len(key)); err != nil {
		return false, err
	}
	x.s.mu.Lock()
	_, ok := x.s.tree.Delete(pair{key: key})
	x.s.mu.Unlock()
	return ok, nil
}

// Scan implements index.Index: it copies 16 pairs at a time under the lock
// and READs once per batch.
func (x *Index) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		from := bytes.Clone(lo)
		for {
			var batch []index.KV
			x.s.mu.Lock()
			x.s.tree.AscendGreaterOrEqual(pair{key: from}, func(p pair) bool {
				if hi != nil && bytes.Compare(p.key, hi) >= 0 || len(batch) == scanBatch {
					return false
				}
				batch = append(batch, index.KV{Key: bytes.Clone(p.key), Value: bytes.Clone(p.value)})
				return true
			})
			x.s.mu.Unlock()
			if !x.yieldBatch(ctx, batch, yield) {
				return
			}
			if len(batch) < scanBatch {
				return
			}
			from = append(batch[len(batch)-1].Key, 0)
		}
	}
}

// yieldBatch charges the remote I/O of a scan batch and yields its pairs;
// it reports false if the scan must stop (an error or the caller).
func (x *Index) yieldBatch(ctx context.Context, batch []index.KV, yield func(index.KV, error) bool) bool {
	n := 0
	for _, kv := range batch {
		n += len(kv.Key) + len(kv.Value)
	}
	if err := x.io(ctx, false, n); err != nil {
		yield(index.KV{}, err)
		return false
	}
	for _, kv := range batch {
		if !yield(kv, nil) {
			return false
		}
	}
	return true
}

// ReverseScan implements index.Index like Scan, from the top of the range
// down.
func (x *Index) ReverseScan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		ub := bytes.Clone(hi)
		for {
			var batch []index.KV
			visit := func(p pair) bool {
				if ub != nil && bytes.Compare(p.key, ub) >= 0 {
					return true // the bound itself: skip
				}
				if bytes.Compare(p.key, lo) < 0 || len(batch) == scanBatch {
					return false
				}
				batch = append(batch, index.KV{Key: bytes.Clone(p.key), Value: bytes.Clone(p.value)})
				return true
			}
			x.s.mu.Lock()
			if ub == nil {
				x.s.tree.Descend(visit)
			} else {
				x.s.tree.DescendLessOrEqual(pair{key: ub}, visit)
			}
			x.s.mu.Unlock()
			if !x.yieldBatch(ctx, batch, yield) {
				return
			}
			if len(batch) < scanBatch {
				return
			}
			ub = batch[len(batch)-1].Key
		}
	}
}

// Close implements index.Index: later operations fail with
// index.ErrClosed; a later Close returns nil.
func (x *Index) Close() error {
	x.closed.Store(true)
	return nil
}

// Recover implements index.Recoverer: a crashed operation leaves nothing
// to repair.
func (x *Index) Recover(context.Context) (int, error) {
	if x.closed.Load() {
		return 0, index.ErrClosed
	}
	return 0, nil
}

// Stats implements ycsb.StatsReporter: three of every four remote accesses
// count as cache hits; the cache holds CacheBytesPerKey bytes per key in
// the map; Crashed counts the clients dropped after a crash.
func (x *Index) Stats() index.Stats {
	l := x.lookups.Load()
	x.s.mu.Lock()
	n := x.s.tree.Len()
	x.s.mu.Unlock()
	return index.Stats{CacheLookups: l, CacheHits: l - l/4, CacheBytes: int64(n) * CacheBytesPerKey, Crashed: x.crashed.Load()}
}

// CacheBytesPerKey is what the fake index reports its cache holds per key.
const CacheBytesPerKey = 16
