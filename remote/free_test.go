package remote

import (
	"errors"
	"testing"
)

// TestFreeReuse checks that memory handed back with Free is reused by the
// same compute node for objects of the same size and memory node, with the
// alignment asked for, and that bad frees are refused.
func TestFreeReuse(t *testing.T) {
	ctx := t.Context()
	p := newTestPool(t, Config{MemoryNodes: 2, ChunkBytes: 4096})
	cn, other := p.NewComputeNode(), p.NewComputeNode()
	c, o := cn.NewClient(), other.NewClient()

	a, err := c.AllocOn(ctx, 1, 192, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(a, 192); err != nil {
		t.Fatal(err)
	}
	if got := cn.FreeBytes(); got != 192 {
		t.Fatalf("FreeBytes = %d, want 192", got)
	}
	// An alignment the freed object does not meet.
	strict := 2 * (a.Offset() & -a.Offset())
	for _, tc := range []struct {
		name      string
		client    *Client
		mn, size  int
		align     uint64
		wantReuse bool
	}{
		{"other size", c, 1, 128, 64, false},
		{"other memory node", c, 0, 192, 64, false},
		{"other compute node", o, 1, 192, 64, false},
		{"stricter alignment", c, 1, 192, strict, false},
		{"same size and node", c, 1, 192, 64, true},
		{"list now empty", c, 1, 192, 64, false},
	} {
		b, err := tc.client.AllocOn(ctx, tc.mn, tc.size, int(tc.align))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (b == a) != tc.wantReuse {
			t.Errorf("%s: got %v, freed %v, want reuse %v", tc.name, b, a, tc.wantReuse)
		}
	}
	if got := cn.FreeBytes(); got != 0 {
		t.Fatalf("FreeBytes after reuse = %d, want 0", got)
	}

	for _, tc := range []struct {
		name string
		a    Addr
		size int
		want error
	}{
		{"nil", 0, 8, ErrBadRequest},
		{"zero size", a, 0, ErrBadRequest},
		{"on chip", OnChip(0, 0), 8, ErrBadRequest},
		{"unknown node", MakeAddr(7, 4096), 8, ErrUnknownNode},
		{"past the node", MakeAddr(0, 1<<20-8), 64, ErrOutOfBounds},
	} {
		if err := c.Free(tc.a, tc.size); !errors.Is(err, tc.want) {
			t.Errorf("Free %s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestFreeChurnKeepsUsageFlat allocates and frees the same objects many
// times: after the first round no new memory is taken.
func TestFreeChurnKeepsUsageFlat(t *testing.T) {
	ctx := t.Context()
	p := newTestPool(t, Config{Sim: simConfig(Strict, 0)})
	c := p.NewComputeNode().NewClient()
	var first []uint64
	for round := range 200 {
		var objs []Addr
		for i := range 32 {
			a, err := c.Alloc(ctx, 64*(1+i%4))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			objs = append(objs, a)
		}
		for i, a := range objs {
			if err := c.Free(a, 64*(1+i%4)); err != nil {
				t.Fatal(err)
			}
		}
		used, err := p.MemoryUsed()
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			first = used
			continue
		}
		for mn := range used {
			if used[mn] != first[mn] {
				t.Fatalf("round %d: memory node %d uses %d bytes, %d after the first round", round, mn, used[mn], first[mn])
			}
		}
	}
}
