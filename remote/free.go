package remote

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
)

// FreeList holds freed objects by memory node and size for reuse: Take
// returns an object of exactly the size asked, LIFO. Each compute node
// keeps one (Client.Free, and allocation takes from it first); a structure
// whose freed objects must be reused only by itself (e.g. SMART's leaves,
// which stale cached pointers may still name) keeps its own. The zero value
// is empty and ready; it is safe for concurrent use and takes no verb.
type FreeList struct {
	mu    sync.Mutex
	m     map[freeKey][]Addr
	nodes int // 1 + the highest memory node put
}

// freeKey names one list: objects of one size on one memory node.
type freeKey struct {
	mn   int
	size uint64
}

// Put adds the object of size bytes at a. The caller guarantees that
// nobody can still reach it and that it is not in the list already.
func (l *FreeList) Put(a Addr, size uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[freeKey][]Addr)
	}
	k := freeKey{a.MN(), size}
	l.m[k] = append(l.m[k], a)
	l.nodes = max(l.nodes, k.mn+1)
}

// Take removes and returns an object of size bytes aligned to align on
// memory node mn (on the lowest-numbered memory node that has one if
// mn < 0), or nil if there is none.
func (l *FreeList) Take(mn int, size, align uint64) Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	if mn >= 0 {
		return l.take(freeKey{mn, size}, align)
	}
	// Memory nodes in order, not the map's: the simulator's runs must
	// repeat exactly.
	for n := range l.nodes {
		if a := l.take(freeKey{n, size}, align); !a.IsNil() {
			return a
		}
	}
	return 0
}

// take pops an object of list k aligned to align. Called with mu held.
func (l *FreeList) take(k freeKey, align uint64) Addr {
	s := l.m[k]
	for i := len(s) - 1; i >= 0; i-- {
		if a := s[i]; a.Offset()&(align-1) == 0 {
			s[i] = s[len(s)-1]
			l.m[k] = s[:len(s)-1]
			return a
		}
	}
	return 0
}

// Bytes returns the bytes the list holds.
func (l *FreeList) Bytes() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for k, s := range l.m {
		n += k.size * uint64(len(s))
	}
	return n
}

// Drain removes and returns every object in the list, by memory node and
// size (an order that repeats: the simulator's runs must).
func (l *FreeList) Drain() []Extent {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(l.m), func(a, b freeKey) int {
		return cmp.Or(cmp.Compare(a.mn, b.mn), cmp.Compare(a.size, b.size))
	})
	var out []Extent
	for _, k := range keys {
		for _, a := range l.m[k] {
			out = append(out, Extent{a, k.size})
		}
	}
	clear(l.m)
	return out
}

// All yields every object in the list with its size, under the list's
// lock: the loop body must not call the list's methods.
func (l *FreeList) All() iter.Seq2[Addr, uint64] {
	return func(yield func(Addr, uint64) bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for k, s := range l.m {
			for _, a := range s {
				if !yield(a, k.size) {
					return
				}
			}
		}
	}
}

// Free hands back an object of size bytes at a, allocated by Alloc or
// AllocOn of a client of any compute node, to this client's compute node:
// its later allocations of exactly size bytes on a's memory node reuse it
// (when the alignment asked for fits) before taking new memory. The caller
// guarantees that no client of any compute node can still reach the object,
// e.g. with the epochs of package internal/registry. A reused object holds
// what was last written to it, not zeros: its new owner writes every byte it
// relies on. Free takes no verb and does not change Pool.MemoryUsed, which
// counts what memory nodes handed out.
func (c *Client) Free(a Addr, size int) error {
	if a.IsNil() || a.IsOnChip() || size <= 0 {
		return fmt.Errorf("%w: free of %d bytes at %v", ErrBadRequest, size, a)
	}
	mn := a.MN()
	if mn >= len(c.pool.geom) {
		return fmt.Errorf("%w: free at %v (pool has %d)", ErrUnknownNode, a, len(c.pool.geom))
	}
	if err := checkVerb(c.pool.geom[mn], OpWrite, a, uint64(size)); err != nil {
		return fmt.Errorf("free: %w", err)
	}
	c.cn.free.Put(a, uint64(size))
	c.stats.freedBytes.Add(uint64(size))
	return nil
}

// FreeBytes returns the bytes held in the compute node's free lists (see
// Client.Free).
func (cn *ComputeNode) FreeBytes() uint64 { return cn.free.Bytes() }

// Freed yields every object that Client.Free handed back to the compute
// node and no allocation has taken again, with its size, under the list's
// lock: the loop body must not free or allocate on the node. It is for
// consistency checks, such as an index's Verify: no freed object may still
// be linked, and none may be listed twice.
func (cn *ComputeNode) Freed() iter.Seq2[Addr, uint64] { return cn.free.All() }
