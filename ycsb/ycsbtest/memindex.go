// Package ycsbtest provides an in-memory index for testing code that runs
// YCSB workloads (package ycsb, cmd/dmbench) without a real index.
package ycsbtest

import (
	"bytes"
	"context"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
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
// index reports a deterministic cache hit ratio of 3/4 (ycsb.CacheReporter).
func NewOpener() ycsb.Opener {
	s := &store{tree: btree.NewG(16, func(a, b pair) bool { return bytes.Compare(a.key, b.key) < 0 })}
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (smart.Index, error) {
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
// smart.Index and ycsb.CacheReporter and is safe for concurrent use.
type Index struct {
	s    *store
	cn   *remote.ComputeNode
	addr remote.Addr

	mu   sync.Mutex // guards free; never held across a verb
	free []*remote.Client

	lookups atomic.Uint64
	closed  atomic.Bool
}

var (
	_ smart.Index        = (*Index)(nil)
	_ ycsb.CacheReporter = (*Index)(nil)
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
// region).
func (x *Index) io(ctx context.Context, write bool, n int) error {
	if x.closed.Load() {
		return smart.ErrClosed
	}
	x.lookups.Add(1)
	c := x.client()
	defer x.release(c)
	buf := make([]byte, min((n+7)&^7, regionBytes))
	if write {
		return c.Write(ctx, x.addr, buf)
	}
	return c.Read(ctx, x.addr, buf)
}

func check(key []byte) error {
	if len(key) == 0 {
		return smart.ErrEmptyKey
	}
	return nil
}

// Get implements smart.Index.
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

// Put implements smart.Index.
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

// Delete implements smart.Index.
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

// Scan implements smart.Index: it copies 16 pairs at a time under the lock
// and READs once per batch.
func (x *Index) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[smart.KV, error] {
	return func(yield func(smart.KV, error) bool) {
		from := bytes.Clone(lo)
		for {
			var batch []smart.KV
			x.s.mu.Lock()
			x.s.tree.AscendGreaterOrEqual(pair{key: from}, func(p pair) bool {
				if hi != nil && bytes.Compare(p.key, hi) >= 0 || len(batch) == scanBatch {
					return false
				}
				batch = append(batch, smart.KV{Key: bytes.Clone(p.key), Value: bytes.Clone(p.value)})
				return true
			})
			x.s.mu.Unlock()
			n := 0
			for _, kv := range batch {
				n += len(kv.Key) + len(kv.Value)
			}
			if err := x.io(ctx, false, n); err != nil {
				yield(smart.KV{}, err)
				return
			}
			for _, kv := range batch {
				if !yield(kv, nil) {
					return
				}
			}
			if len(batch) < scanBatch {
				return
			}
			from = append(batch[len(batch)-1].Key, 0)
		}
	}
}

// Close implements smart.Index.
func (x *Index) Close() error {
	if x.closed.Swap(true) {
		return smart.ErrClosed
	}
	return nil
}

// CacheStats implements ycsb.CacheReporter: three of every four remote
// accesses count as hits.
func (x *Index) CacheStats() (hits, lookups uint64) {
	l := x.lookups.Load()
	return l - l/4, l
}
