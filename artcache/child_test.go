package artcache

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// TestWithChild adds, replaces and looks up the slots of children kept in
// their parent's entry, and checks what a copy keeps and what it refuses.
func TestWithChild(t *testing.T) {
	own := []uint64{0x100 | 'a', 0x200 | 'b', 0, 0x300 | 'c'}
	e := NewEntry(7, own, 3)
	e.Epoch = 42
	kidsA := []uint64{0x1000 | 'x', 0x2000 | 'y'}
	kidsC := []uint64{0x3000 | 'p', 0, 0x4000 | 'q', 0x5000 | 'q'}

	c := e.WithChild(0, own[0], kidsA)
	if c == nil {
		t.Fatal("WithChild(0) = nil")
	}
	c = c.WithChild(3, own[3], kidsC)
	if c == nil {
		t.Fatal("WithChild(3) = nil")
	}
	if c.Addr != 7 || c.Epoch != 42 || c.Level() != 3 || !slices.Equal(c.Slots(), own) || c.referenced() {
		t.Fatalf("copy: addr %d epoch %d level %d slots %x referenced %v", c.Addr, c.Epoch, c.Level(), c.Slots(), c.referenced())
	}
	if len(e.ChildSlots(0)) != 0 || len(e.words()) != len(own) {
		t.Fatal("WithChild changed the entry it copied")
	}
	for _, tc := range []struct {
		idx  int
		b    byte
		j    int
		word uint64
		ok   bool
	}{
		{0, 'x', 0, 0x1000 | 'x', true},
		{0, 'y', 1, 0x2000 | 'y', true},
		{0, 'z', 0, 0, false},
		{1, 'x', 0, 0, false}, // slot 1 has no child slots
		{3, 'p', 0, 0x3000 | 'p', true},
		{3, 'q', 2, 0x4000 | 'q', true}, // the first of two
		{3, 0, 0, 0, false},             // an empty word matches nothing
	} {
		j, w, ok := c.Child(tc.idx, tc.b)
		if j != tc.j || w != tc.word || ok != tc.ok {
			t.Errorf("Child(%d, %q) = %d, %#x, %v; want %d, %#x, %v", tc.idx, tc.b, j, w, ok, tc.j, tc.word, tc.ok)
		}
	}

	// Replacing one child keeps the other.
	r := c.WithChild(0, 0x900|'a', []uint64{0x6000 | 'x'})
	if got := r.Slots(); got[0] != 0x900|'a' || !slices.Equal(got[1:], own[1:]) {
		t.Errorf("slots after replacing slot 0: %x", got)
	}
	if got := r.ChildSlots(0); !slices.Equal(got, []uint64{0x6000 | 'x'}) {
		t.Errorf("replaced child slots %x", got)
	}
	if got := r.ChildSlots(3); !slices.Equal(got, kidsC) {
		t.Errorf("the other child's slots %x, want %x", got, kidsC)
	}
	if want := entryStructBytes + 8*int64(slotRooms[roomFor(len(own)+2+1+len(kidsC))].room); r.bytes() != want {
		t.Errorf("bytes() = %d, want %d", r.bytes(), want)
	}

	for _, bad := range []struct {
		idx   int
		slots []uint64
	}{
		{-1, kidsA}, {len(own), kidsA}, {0, nil}, {0, make([]uint64, MaxChildSlots+1)},
	} {
		if e.WithChild(bad.idx, 1, bad.slots) != nil {
			t.Errorf("WithChild(%d, %d slots) accepted", bad.idx, len(bad.slots))
		}
	}
	full := NewEntry(1, make([]uint64, MaxSlots), 0)
	for i := 0; ; i++ {
		next := full.WithChild(i, 0, make([]uint64, MaxChildSlots))
		if next == nil {
			if n := len(full.words()); n+1+MaxChildSlots <= slotRoomMax {
				t.Fatalf("WithChild refused a child with %d of %d words used", n, slotRoomMax)
			}
			break
		}
		full = next
	}
}

// TestWithSlot appends and replaces slot words of entries with and without
// children and checks what a copy keeps and when it refuses.
func TestWithSlot(t *testing.T) {
	own := []uint64{0x100 | 'a', 0x200 | 'b'}
	e := NewEntry(7, own, 3)
	e.Epoch = 42
	e.setReferenced(true)
	kids := []uint64{0x1000 | 'x', 0x2000 | 'y'}
	withKids := e.WithChild(1, own[1], kids)
	for _, src := range []*Entry{e, withKids} {
		c := src.WithSlot(2, 0x300|'c')
		if c == nil {
			t.Fatal("WithSlot = nil")
		}
		want := append(slices.Clone(own), 0x300|'c')
		if c.Addr != 7 || c.Epoch != 42 || c.Level() != 3 || !slices.Equal(c.Slots(), want) || c.referenced() {
			t.Fatalf("copy: addr %d epoch %d level %d slots %x referenced %v", c.Addr, c.Epoch, c.Level(), c.Slots(), c.referenced())
		}
		if !slices.Equal(c.ChildSlots(1), src.ChildSlots(1)) {
			t.Errorf("children %x, want %x", c.ChildSlots(1), src.ChildSlots(1))
		}
		if i := c.slot('c'); i != 2 {
			t.Errorf("slot('c') = %d, want 2", i)
		}
		if !slices.Equal(src.Slots(), own) {
			t.Fatal("WithSlot changed the entry it copied")
		}
	}
	if NewEntry(1, make([]uint64, MaxSlots), 0).WithSlot(MaxSlots, 1) != nil {
		t.Error("WithSlot grew an entry of MaxSlots slots")
	}
	// 255 or 254 own words and three children of 8 (27 words): the
	// largest allocation (282 words) is full, or has room for one more.
	for ownN, fits := range map[int]bool{255: false, 254: true} {
		big := NewEntry(1, make([]uint64, ownN), 0)
		for i := range 3 {
			big = big.WithChild(i, 0, make([]uint64, MaxChildSlots))
		}
		if got := big.WithSlot(ownN, 1); (got != nil) != fits {
			t.Errorf("WithSlot on an entry of %d words: %v, want fits %v", len(big.words()), got, fits)
		} else if got != nil && len(got.ChildSlots(2)) != MaxChildSlots {
			t.Errorf("WithSlot lost a child: %x", got.ChildSlots(2))
		}
	}
	if got := NewEntry(1, nil, 0).WithSlot(0, 5); got == nil || !slices.Equal(got.Slots(), []uint64{5}) {
		t.Errorf("WithSlot on an empty entry: %v", got)
	}
	// Replacing a slot keeps the count and the children; out of range is
	// refused.
	if got := withKids.WithSlot(0, 0x900|'a'); got == nil || !slices.Equal(got.Slots(), []uint64{0x900 | 'a', own[1]}) || !slices.Equal(got.ChildSlots(1), kids) {
		t.Errorf("WithSlot(0) = %v", got)
	}
	for _, idx := range []int{-1, len(own) + 1} {
		if e.WithSlot(idx, 1) != nil {
			t.Errorf("WithSlot(%d) accepted", idx)
		}
	}
}

// TestSlotIndex: an entry of more than IndexedSlots slots finds a partial
// key through its index, as a scan of its slots would (the first non-empty
// slot of the key), after NewEntry and after every kind of copy. Partial
// keys repeat and slots are empty at random, which no node holds but a
// scan answers all the same.
func TestSlotIndex(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	scan := func(e *Entry, b byte) int {
		for i, w := range e.Slots() {
			if w != 0 && byte(w) == b {
				return i
			}
		}
		return -1
	}
	check := func(what string, e *Entry) {
		t.Helper()
		if e == nil {
			t.Fatalf("%s: nil", what)
		}
		if (e.index() != nil) != (len(e.Slots()) > IndexedSlots) {
			t.Fatalf("%s: %d slots, indexed %v", what, len(e.Slots()), e.index() != nil)
		}
		for b := range 256 {
			want := scan(e, byte(b))
			if got := e.slot(byte(b)); got != want {
				t.Fatalf("%s (%d slots): slot(%#02x) = %d, want %d", what, len(e.Slots()), b, got, want)
			}
			if i, w, ok := e.Slot(byte(b)); ok != (want >= 0) || ok && (i != want || w != e.Slots()[want]) {
				t.Fatalf("%s (%d slots): Slot(%#02x) = %d, %#x, %v, want slot %d", what, len(e.Slots()), b, i, w, ok, want)
			}
		}
	}
	for range 200 {
		n := IndexedSlots - 2 + r.IntN(MaxSlots-IndexedSlots+3)
		slots := make([]uint64, n)
		for i := range slots {
			if r.IntN(8) > 0 {
				slots[i] = uint64(r.IntN(256)) | r.Uint64N(1<<20)<<8
			}
		}
		e := NewEntry(64, slots, 1)
		check("NewEntry", e)
		i := r.IntN(n)
		check("WithSlot (replaced)", e.WithSlot(i, uint64(r.IntN(256))|1<<8))
		if n < MaxSlots {
			check("WithSlot (added)", e.WithSlot(n, uint64(r.IntN(256))|1<<8))
		}
		if c := e.WithChild(i, uint64(r.IntN(256))|2<<8, []uint64{0x100 | 'x'}); c != nil {
			check("WithChild", c)
			check("WithSlot of a copy with a child", c.WithSlot(r.IntN(n), 0))
		}
		check("the original after its copies", e)
	}
}
