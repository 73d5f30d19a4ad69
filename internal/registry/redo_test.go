package registry

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// FuzzRedo checks that a record decodes to what was encoded, and that a
// record cut at any byte, or with any byte changed, is refused.
func FuzzRedo(f *testing.F) {
	f.Add(uint64(8), uint64(1<<62|5), []byte("image"), 3, byte(1))
	f.Add(uint64(1<<40|64), uint64(1<<62), []byte{}, 0, byte(0))
	f.Fuzz(func(t *testing.T, target, tag uint64, image []byte, at int, flip byte) {
		if target == 0 {
			target = 8
		}
		rec := AppendRedo(nil, remote.Addr(target), tag, image)
		r, ok := ParseRedo(append(rec, 0, 0, 0)) // slots are larger than records
		if !ok || r.Target != remote.Addr(target) || r.Tag != tag || !bytes.Equal(r.Image, image) {
			t.Fatalf("record of (%#x, %#x, %x) parses as %+v, %v", target, tag, image, r, ok)
		}
		if at < 0 {
			at = -at
		}
		at %= len(rec)
		if _, ok := ParseRedo(rec[:at]); ok {
			t.Fatalf("a record cut at byte %d of %d parsed", at, len(rec))
		}
		if flip != 0 {
			bad := bytes.Clone(rec)
			bad[at] ^= flip
			if r, ok := ParseRedo(bad); ok && (r.Target != remote.Addr(target) || r.Tag != tag || !bytes.Equal(r.Image, image)) {
				t.Fatalf("a record with byte %d changed parsed as another record %+v", at, r)
			}
		}
	})
}

// TestRedoSlots walks a client slot through two incarnations: the first
// writes a record and dies; a waiter reads the record by the dead tag; the
// second incarnation is handed the record to settle before its slot is
// reused, and a larger record moves it to a larger slot.
func TestRedoSlots(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, true, 1)
	cn := p.NewComputeNode()
	c, other := cn.NewClient(), cn.NewClient()
	n := join(t, c, Options{Blocks: 2, Clients: 1})
	m := register(t, n, c)
	for mn := range 2 {
		slot, err := m.RedoSlot(ctx, c, mn, 40, func(r Redo) error {
			t.Fatalf("a first incarnation was handed a record to settle: %+v", r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if slot.MN() != mn {
			t.Fatalf("redo slot for memory node %d is on %d", mn, slot.MN())
		}
		rec := AppendRedo(nil, remote.MakeAddr(mn, 4096), m.Tag(), bytes.Repeat([]byte{byte(mn + 1)}, 40))
		if err := c.Write(ctx, slot, rec); err != nil {
			t.Fatal(err)
		}
	}
	dead := m.Tag()
	if err := m.MarkDead(ctx, other); err != nil {
		t.Fatal(err)
	}
	wn := join(t, other, Options{Blocks: 2, Clients: 1})
	if d, err := wn.Dead(ctx, other, &Watch{}, dead); err != nil || !d {
		t.Fatalf("a member marked dead: Dead = %v, %v", d, err)
	}
	r, ok, err := wn.RedoOf(ctx, other, dead|1<<61, 1)
	if err != nil || !ok || r.Target != remote.MakeAddr(1, 4096) || r.Image[0] != 2 {
		t.Fatalf("RedoOf the dead tag on node 1 = %+v, %v, %v", r, ok, err)
	}

	m2 := register(t, n, c)
	if m2.Tag() == dead {
		t.Fatal("a new incarnation has the dead tag")
	}
	var settled []Redo
	slot, err := m2.RedoSlot(ctx, c, 0, 40, func(r Redo) error { settled = append(settled, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(settled) != 1 || settled[0].Tag != dead || settled[0].Target != remote.MakeAddr(0, 4096) {
		t.Fatalf("the new incarnation settled %+v, want the dead one's record on node 0", settled)
	}
	bigger, err := m2.RedoSlot(ctx, c, 0, 4000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bigger == slot {
		t.Fatal("a record larger than the slot kept the slot")
	}
	if _, ok, _ := wn.RedoOf(ctx, other, m2.Tag(), 0); ok {
		t.Fatal("RedoOf found a record in a slot nobody wrote")
	}
}

// TestSlotOf checks that every incarnation of a slot, with or without flag
// bits, has one SlotOf, that other slots have others, and that RedoOf finds
// a record tagged with it.
func TestSlotOf(t *testing.T) {
	a, b := tag(3, 7, 1), tag(3, 7, 9)|1<<61
	if SlotOf(a) != SlotOf(b) || !IsTag(SlotOf(a)) {
		t.Fatalf("SlotOf(%#x) = %#x, SlotOf(%#x) = %#x", a, SlotOf(a), b, SlotOf(b))
	}
	if SlotOf(tag(3, 8, 1)) == SlotOf(a) || SlotOf(tag(4, 7, 1)) == SlotOf(a) {
		t.Fatal("two slots share a SlotOf")
	}
	ctx := t.Context()
	p := newPool(t, false, 0)
	c := p.NewComputeNode().NewClient()
	n := join(t, c, Options{Blocks: 2, Clients: 2})
	m := register(t, n, c)
	slot, err := m.RedoSlot(ctx, c, 1, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	target := remote.MakeAddr(1, 4096)
	if err := c.Write(ctx, slot, AppendRedo(nil, target, SlotOf(m.Tag()), []byte{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	r, ok, err := n.RedoOf(ctx, c, SlotOf(m.Tag()|1<<61), 1)
	if err != nil || !ok || r.Target != target {
		t.Fatalf("RedoOf(SlotOf) = %+v, %v, %v", r, ok, err)
	}
}

// TestRedoDirectoryOnReusedMemory: a redo directory allocated from memory
// its compute node freed before (here holding what looks like an entry
// naming a slot out of bounds) reads as empty: the first RedoSlot of a
// member and RedoOf its tag find no record instead of following leftover
// bytes (which failed every operation of a compute node with "address out
// of bounds").
func TestRedoDirectoryOnReusedMemory(t *testing.T) {
	ctx := context.Background()
	p := newPool(t, false, 1)
	cn := p.NewComputeNode()
	c, other := cn.NewClient(), cn.NewClient()
	const dirBytes = 16 * 1 * 2 // Clients: 1, two memory nodes
	junk, err := c.AllocOn(ctx, 0, dirBytes, 8)
	if err != nil {
		t.Fatal(err)
	}
	var e [dirBytes]byte
	for i := 0; i < dirBytes; i += 16 {
		binary.LittleEndian.PutUint64(e[i:], 0x4a000803|1<<40)
		binary.LittleEndian.PutUint64(e[i+8:], 300)
	}
	if err := c.Write(ctx, junk, e[:]); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(junk, dirBytes); err != nil {
		t.Fatal(err)
	}
	n := join(t, c, Options{Blocks: 2, Clients: 1})
	m := register(t, n, c)
	if _, err := m.RedoSlot(ctx, c, 1, 40, func(r Redo) error {
		t.Errorf("a first incarnation was handed a record to settle: %+v", r)
		return nil
	}); err != nil {
		t.Fatalf("RedoSlot on a directory in reused memory: %v", err)
	}
	if r, ok, err := n.RedoOf(ctx, other, m.Tag(), 0); err != nil || ok {
		t.Fatalf("RedoOf a member that wrote no record on node 0 = %+v, %v, %v; want none", r, ok, err)
	}
}
