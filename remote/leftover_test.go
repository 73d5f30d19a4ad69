package remote

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// leftoverTransports are the transports the Leftovers and Reuse tests run
// on: the allocator is the same behind every one, so the in-process ones
// suffice.
var leftoverTransports = []transportCase{
	{"local", nil},
	{"sim", &SimConfig{Seed: 1}},
}

// memoryUsed returns p.MemoryUsed, failing the test on error.
func memoryUsed(t *testing.T, p *Pool) []uint64 {
	t.Helper()
	used, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// allocOn allocates with c.AllocOn, failing the test on error.
func allocOn(t *testing.T, c *Client, mn, size, align int) Addr {
	t.Helper()
	a, err := c.AllocOn(t.Context(), mn, size, align)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestLeftovers checks that Leftovers returns the unused rest of each
// chunk a client allocated from, once, and that the client's next
// allocation fetches a new chunk.
func TestLeftovers(t *testing.T) {
	for _, tc := range leftoverTransports {
		t.Run(tc.name, func(t *testing.T) {
			const chunk = 4096
			p := tc.pool(t, Config{MemoryNodes: 2, ChunkBytes: chunk})
			cn := p.NewComputeNode()
			c := cn.NewClient()
			if x := c.Leftovers(); len(x) != 0 {
				t.Fatalf("Leftovers of a client that allocated nothing = %+v", x)
			}
			used := memoryUsed(t, p)
			// Node 0: three objects from a new chunk, which starts at the
			// first.
			var objs []Addr
			for range 3 {
				objs = append(objs, allocOn(t, c, 0, 100, 8))
			}
			// Node 1: an object aligned to 64 from a new chunk.
			b := allocOn(t, c, 1, 40, 64)
			if got := memoryUsed(t, p); got[0] != used[0]+chunk || got[1] != used[1]+chunk {
				t.Fatalf("MemoryUsed = %v after allocating from two chunks, was %v", got, used)
			}
			want := []Extent{
				{objs[2].Add(100), chunk - (uint64(objs[2]) + 100 - uint64(objs[0]))},
				{b.Add(40), chunk - 40},
			}
			if got := c.Leftovers(); !slices.Equal(got, want) {
				t.Fatalf("Leftovers = %+v, want %+v (objects at %v and %v)", got, want, objs, b)
			}
			if got := c.Leftovers(); len(got) != 0 {
				t.Fatalf("second Leftovers = %+v, want none", got)
			}
			// The next allocation fetches a new chunk.
			used = memoryUsed(t, p)
			a := allocOn(t, c, 0, 100, 8)
			if got := memoryUsed(t, p); got[0] != used[0]+chunk {
				t.Fatalf("MemoryUsed[0] = %d after Leftovers and an allocation, want %d", got[0], used[0]+chunk)
			}
			if a.MN() != 0 || (a >= objs[0] && a < objs[0].Add(chunk)) {
				t.Fatalf("allocation after Leftovers at %v, inside the chunk handed on at %v", a, objs[0])
			}
			if got := c.Leftovers(); len(got) != 1 || got[0] != (Extent{a.Add(100), chunk - 100}) {
				t.Fatalf("Leftovers of the new chunk = %+v, want the rest after %v", got, a)
			}

			// A chunk used up exactly has no rest; an object too large for a
			// chunk takes none.
			d := cn.NewClient()
			for range chunk / 512 {
				allocOn(t, d, 1, 512, 8)
			}
			allocOn(t, d, 0, 2048, 8)
			if got := d.Leftovers(); len(got) != 0 {
				t.Fatalf("Leftovers of a full chunk and a large object = %+v, want none", got)
			}
		})
	}
}

// TestReuse checks that a compute node given extents allocates small
// objects from inside them, without memory nodes handing out more, until
// they are used up.
func TestReuse(t *testing.T) {
	for _, tc := range leftoverTransports {
		t.Run(tc.name, func(t *testing.T) {
			const chunk = 4096
			p := tc.pool(t, Config{MemoryNodes: 2, ChunkBytes: chunk})
			old := p.NewComputeNode().NewClient()
			allocOn(t, old, 0, 64, 8)
			allocOn(t, old, 1, 64, 8)
			xs := old.Leftovers()
			if len(xs) != 2 {
				t.Fatalf("Leftovers = %+v, want one extent per node", xs)
			}
			cn := p.NewComputeNode()
			for _, x := range xs {
				if err := cn.Reuse(x); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := cn.SpareBytes(), xs[0].Size+xs[1].Size; got != want {
				t.Fatalf("SpareBytes = %d, want %d", got, want)
			}
			used := memoryUsed(t, p)
			c := cn.NewClient()
			// Node 0's extent, object after object.
			x := xs[0]
			next := x.Addr
			for i := range x.Size / 64 {
				a := allocOn(t, c, 0, 64, 8)
				if a != next {
					t.Fatalf("allocation %d at %v, want %v (extent %v, %d bytes)", i, a, next, x.Addr, x.Size)
				}
				next = a.Add(64)
				if i == 0 {
					if got := cn.SpareBytes(); got != xs[1].Size {
						t.Fatalf("SpareBytes = %d once node 0's extent is a chunk, want %d", got, xs[1].Size)
					}
				}
			}
			if got := memoryUsed(t, p); !slices.Equal(got, used) {
				t.Fatalf("MemoryUsed = %v after allocating from the extents, was %v", got, used)
			}
			// Used up: the next object comes from a new chunk.
			a := allocOn(t, c, 0, 64, 8)
			if a >= x.Addr && a < x.Addr.Add(x.Size) {
				t.Fatalf("allocation at %v inside the used-up extent", a)
			}
			if got := memoryUsed(t, p); got[0] != used[0]+chunk {
				t.Fatalf("MemoryUsed[0] = %d once the extent is used up, want %d", got[0], used[0]+chunk)
			}
			// Node 1's extent, to another client of the compute node, with an
			// alignment stricter than the extent's start.
			y := xs[1]
			b := allocOn(t, cn.NewClient(), 1, 128, 256)
			if b.Offset()%256 != 0 || b < y.Addr || b.Add(128) > y.Addr.Add(y.Size) {
				t.Fatalf("allocation of 128 bytes aligned to 256 at %v, want inside [%v, +%d)", b, y.Addr, y.Size)
			}
			if got := memoryUsed(t, p); got[1] != used[1] {
				t.Fatalf("MemoryUsed[1] = %d with an extent to take, was %d", got[1], used[1])
			}
			if got := cn.Spares(); len(got) != 0 {
				t.Fatalf("Spares = %+v after both extents were taken", got)
			}
		})
	}
}

// TestReuseSkips checks that an extent an allocation does not fit in
// (too small, too little aligned, of another memory node) is skipped and
// stays a spare, and that large allocations never take one.
func TestReuseSkips(t *testing.T) {
	const chunk = 4096
	p := newTestPool(t, Config{MemoryNodes: 2, ChunkBytes: chunk})
	old := p.NewComputeNode().NewClient()
	allocOn(t, old, 0, 64, 64)
	allocOn(t, old, 1, 64, 64)
	xs := old.Leftovers() // each starts 64 bytes into a 64-aligned chunk
	if len(xs) != 2 {
		t.Fatalf("Leftovers = %+v", xs)
	}
	x, y := xs[0], xs[1]
	small := Extent{x.Addr, 64}                    // too small for 128 bytes
	skewed := Extent{x.Addr.Add(64 + 8), 128 + 48} // 128 bytes fit, not aligned to 64
	rest := Extent{x.Addr.Add(64 + 8 + 176), x.Size - 64 - 8 - 176}
	cn := p.NewComputeNode()
	for _, e := range []Extent{y, small, skewed, rest} {
		if err := cn.Reuse(e); err != nil {
			t.Fatal(err)
		}
	}
	used := memoryUsed(t, p)
	c := cn.NewClient()
	a := allocOn(t, c, 0, 128, 64)
	if want := Addr((uint64(rest.Addr) + 63) &^ 63); a != want {
		t.Fatalf("allocation of 128 bytes aligned to 64 at %v, want %v (in %+v)", a, want, rest)
	}
	if got, want := cn.SpareBytes(), y.Size+small.Size+skewed.Size; got != want {
		t.Fatalf("SpareBytes = %d, want %d", got, want)
	}
	// Large: size+align above a quarter of a chunk, on node 1 whose spare
	// holds it. The object gets its own memory.
	large := allocOn(t, cn.NewClient(), 1, chunk/4, 8)
	if large >= y.Addr && large < y.Addr.Add(y.Size) {
		t.Fatalf("large allocation at %v, in the spare %+v", large, y)
	}
	if got := memoryUsed(t, p); got[0] != used[0] || got[1] < used[1]+chunk/4 {
		t.Fatalf("MemoryUsed = %v, was %v: want node 1 to hand out the large object, node 0 nothing", got, used)
	}
	// The largest small one takes it.
	used = memoryUsed(t, p)
	if b := allocOn(t, cn.NewClient(), 1, chunk/4-8, 8); b != y.Addr {
		t.Fatalf("allocation of %d bytes at %v, want the spare's start %v", chunk/4-8, b, y.Addr)
	}
	if got := memoryUsed(t, p); !slices.Equal(got, used) {
		t.Fatalf("MemoryUsed = %v after taking a spare, was %v", got, used)
	}
	if got, want := cn.Spares(), []Extent{small, skewed}; !slices.Equal(got, want) {
		t.Fatalf("Spares = %+v, want %+v", got, want)
	}
	if got := cn.SpareBytes(); got != 0 {
		t.Fatalf("SpareBytes = %d after Spares", got)
	}
}

// TestReuseRefuses checks the extents Reuse refuses, and that it accepts
// the first and last bytes a node can hand out.
func TestReuseRefuses(t *testing.T) {
	const node = 1 << 20
	p := newTestPool(t, Config{MemoryNodes: 2, NodeBytes: node})
	cn := p.NewComputeNode()
	for _, tc := range []struct {
		name string
		e    Extent
		want error
	}{
		{"nil", Extent{0, 64}, ErrBadRequest},
		{"zero size", Extent{MakeAddr(0, 8192), 0}, ErrBadRequest},
		{"on chip", Extent{OnChip(0, 0), 64}, ErrBadRequest},
		{"on chip, later", Extent{OnChip(1, 4096), 64}, ErrBadRequest},
		{"unknown node", Extent{MakeAddr(2, 8192), 64}, ErrUnknownNode},
		{"far unknown node", Extent{MakeAddr(MaxMemoryNodes-1, 8192), 64}, ErrUnknownNode},
		{"past the node", Extent{MakeAddr(0, node-8), 64}, ErrOutOfBounds},
		{"at the node's end", Extent{MakeAddr(1, node), 8}, ErrOutOfBounds},
		{"size wraps", Extent{MakeAddr(0, 8192), ^uint64(0) - 4096}, ErrOutOfBounds},
		{"reserved start", Extent{MakeAddr(1, 0), 64}, ErrOutOfBounds},
		{"in the reserved bytes", Extent{MakeAddr(0, reservedBytes-8), 64}, ErrOutOfBounds},
	} {
		if err := cn.Reuse(tc.e); !errors.Is(err, tc.want) {
			t.Errorf("Reuse %s (%+v): %v, want %v", tc.name, tc.e, err, tc.want)
		}
	}
	if got := cn.SpareBytes(); got != 0 {
		t.Fatalf("SpareBytes = %d after refused extents", got)
	}
	ok := []Extent{{MakeAddr(0, reservedBytes), 64}, {MakeAddr(1, node-64), 64}, {MakeAddr(1, reservedBytes), node - reservedBytes}}
	for _, e := range ok {
		if err := cn.Reuse(e); err != nil {
			t.Errorf("Reuse %+v: %v", e, err)
		}
	}
	if got := cn.Spares(); !slices.Equal(got, ok) {
		t.Fatalf("Spares = %+v, want %+v", got, ok)
	}
}

// TestFreeListDrain checks that Drain returns every object once, by memory
// node and size, in an order that does not depend on the map's, and leaves
// the list empty and usable.
func TestFreeListDrain(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	type put struct {
		a    Addr
		size uint64
	}
	var puts []put
	for i := range 300 {
		puts = append(puts, put{MakeAddr(r.IntN(5), uint64(4096+64*i)), 8 * (1 + r.Uint64N(20))})
	}
	fill := func() *FreeList {
		var l FreeList
		for _, p := range puts {
			l.Put(p.a, p.size)
		}
		return &l
	}
	l := fill()
	got := l.Drain()
	if len(got) != len(puts) {
		t.Fatalf("Drain returned %d objects, %d were put", len(got), len(puts))
	}
	if !slices.IsSortedFunc(got, func(a, b Extent) int {
		return cmp.Or(cmp.Compare(a.Addr.MN(), b.Addr.MN()), cmp.Compare(a.Size, b.Size))
	}) {
		t.Fatalf("Drain not by memory node and size: %+v", got)
	}
	want := make(map[Extent]int)
	for _, p := range puts {
		want[Extent{p.a, p.size}]++
	}
	for _, e := range got {
		if want[e] != 1 {
			t.Fatalf("Drain returned %+v, not put or twice", e)
		}
		want[e]--
	}
	// The same puts drain in the same order, every time.
	for range 5 {
		if again := fill().Drain(); !slices.Equal(again, got) {
			t.Fatalf("Drain of the same puts in another order:\n%+v\n%+v", again, got)
		}
	}
	// Empty after.
	if n := l.Bytes(); n != 0 {
		t.Fatalf("Bytes = %d after Drain", n)
	}
	if a := l.Take(-1, puts[0].size, 8); !a.IsNil() {
		t.Fatalf("Take after Drain = %v", a)
	}
	for a, size := range l.All() {
		t.Fatalf("All after Drain yields %v, %d", a, size)
	}
	if again := l.Drain(); len(again) != 0 {
		t.Fatalf("second Drain = %+v", again)
	}
	var empty FreeList
	if got := empty.Drain(); len(got) != 0 {
		t.Fatalf("Drain of the zero FreeList = %+v", got)
	}
	// Usable after.
	l.Put(puts[0].a, puts[0].size)
	if a := l.Take(-1, puts[0].size, 8); a != puts[0].a {
		t.Fatalf("Take after Drain and Put = %v, want %v", a, puts[0].a)
	}
}
