package artcache

import (
	"slices"
	"testing"
	"unsafe"
)

// word returns a non-empty slot word with partial key b.
func word(b byte, child uint64) uint64 { return uint64(b) | child<<16 | 1<<9 }

// Entries of the table tests, by number.
var tableSlots = map[int][]uint64{
	1: {word('a', 1), word('b', 2), 0, 0},                          // partials a, b
	2: {word('b', 3), 0, 0, 0},                                     // b
	3: {word('d', 4), 0, word('x', 5), 0},                          // d, x at index 2
	4: {0, word(0, 6), 0, 0},                                       // partial 0 at index 1; index 0 is empty
	5: {word('b', 7), word('q', 8), 0, 0},                          // b, q: replaces entry 2
	6: {word('e', 9), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // e, 16 slots
}

func TestTable(t *testing.T) {
	type op struct {
		do   byte   // 'I' Insert, 'X' Invalidate, 'L' Lookup, 'G' Get, 'N' expect Stats().Entries == n
		key  string // prefix or lookup key
		n    int    // I, X: entry number; L, G: expected entry (0: none); N: count
		idx  int    // L: expected slot index
		plen int    // L: expected prefix length
	}
	cases := []struct {
		name string
		ops  []op
	}{
		{"empty cache misses", []op{
			{do: 'L', key: "abc"}, {do: 'L', key: ""}, {do: 'G', key: ""}, {do: 'N'},
		}},
		{"root entry under the empty prefix", []op{
			{do: 'I', key: "", n: 1},
			{do: 'L', key: "a", n: 1, idx: 0}, {do: 'L', key: "bzz", n: 1, idx: 1},
			{do: 'L', key: "c"}, {do: 'L', key: ""}, {do: 'G', key: "", n: 1}, {do: 'G', key: "a"},
		}},
		{"deepest matching entry wins", []op{
			{do: 'I', key: "", n: 1}, {do: 'I', key: "a", n: 2}, {do: 'I', key: "abc", n: 3},
			{do: 'L', key: "abcd", n: 3, idx: 0, plen: 3},
			{do: 'L', key: "abcx", n: 3, idx: 2, plen: 3},
			{do: 'L', key: "abcz", n: 2, idx: 0, plen: 1}, // no slot z: falls back to "a"
			{do: 'L', key: "abq", n: 2, idx: 0, plen: 1},
			{do: 'L', key: "abc", n: 2, idx: 0, plen: 1}, // "abc" has no next byte
			{do: 'L', key: "aq", n: 1, idx: 0, plen: 0},  // "a" has no slot q: root's slot a
			{do: 'L', key: "q"},
		}},
		{"slot condition: empty words never match", []op{
			{do: 'I', key: "k", n: 4},
			{do: 'L', key: "k\x00", n: 4, idx: 1, plen: 1},
			{do: 'L', key: "k\x01"},
		}},
		{"prefixes ending inside a compressed path", []op{
			{do: 'I', key: "abcdef", n: 6}, {do: 'I', key: "abc", n: 3}, {do: 'I', key: "abx", n: 2},
			{do: 'I', key: "a", n: 5},
			{do: 'G', key: "abcdef", n: 6}, {do: 'G', key: "abc", n: 3}, {do: 'G', key: "ab"}, {do: 'G', key: "abcd"},
			{do: 'L', key: "abcdefe", n: 6, plen: 6},
			{do: 'L', key: "abcdefz", n: 3, idx: 0, plen: 3}, // abc's slot d
			{do: 'L', key: "abxb", n: 2, plen: 3},
			{do: 'N', n: 4},
		}},
		{"replace, then invalidate the replaced entry: no-op", []op{
			{do: 'I', key: "ab", n: 2}, {do: 'I', key: "ab", n: 5},
			{do: 'G', key: "ab", n: 5}, {do: 'L', key: "abq", n: 5, idx: 1, plen: 2},
			{do: 'X', key: "ab", n: 2}, {do: 'N', n: 1}, {do: 'G', key: "ab", n: 5},
			{do: 'X', key: "ab", n: 5}, {do: 'N', n: 0}, {do: 'L', key: "abb"},
		}},
		{"invalidate under another prefix: no-op", []op{
			{do: 'I', key: "ab", n: 2}, {do: 'X', key: "a", n: 2}, {do: 'X', key: "abc", n: 2},
			{do: 'N', n: 1}, {do: 'X', key: "ab", n: 2}, {do: 'N', n: 0},
		}},
		{"removing inner entries keeps descendants", []op{
			{do: 'I', key: "", n: 1}, {do: 'I', key: "a", n: 2}, {do: 'I', key: "abc", n: 3}, {do: 'I', key: "abcdef", n: 6},
			{do: 'X', key: "a", n: 2}, {do: 'X', key: "", n: 1},
			{do: 'L', key: "abcdefe", n: 6, plen: 6}, {do: 'L', key: "abcx", n: 3, idx: 2, plen: 3},
			{do: 'X', key: "abcdef", n: 6}, {do: 'G', key: "abc", n: 3}, {do: 'N', n: 1},
		}},
	}
	kinds(t, func(t *testing.T, hash bool) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := New(Options{Hash: hash})
				entries := make(map[int]*Entry)
				for n, s := range tableSlots {
					entries[n] = NewEntry(uint64(n)<<6, s, 0)
				}
				for i, o := range tc.ops {
					switch o.do {
					case 'I':
						c.Insert([]byte(o.key), entries[o.n])
					case 'X':
						c.Invalidate([]byte(o.key), entries[o.n])
					case 'L':
						e, idx, plen, ok := c.Lookup([]byte(o.key))
						if want := entries[o.n]; !sameResult(e, idx, plen, ok, want, o.idx, o.plen, want != nil) {
							t.Fatalf("op %d: Lookup(%q) = entry %v, %d, %d, %v; want entry %d, %d, %d",
								i, o.key, e, idx, plen, ok, o.n, o.idx, o.plen)
						}
					case 'G':
						if e, ok := c.Get([]byte(o.key)); e != entries[o.n] || ok != (o.n != 0) {
							t.Fatalf("op %d: Get(%q) = %v, %v; want entry %d", i, o.key, e, ok, o.n)
						}
					case 'N':
						if got := c.Stats().Entries; got != o.n {
							t.Fatalf("op %d: %d entries, want %d", i, got, o.n)
						}
					}
					c.contents(t)
				}
			})
		}
	})
}

func TestBytesReturnToEmpty(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		g := newGen(1)
		c := New(Options{Hash: hash})
		empty := c.Stats().Bytes
		type kv struct {
			p string
			e *Entry
		}
		var all []kv
		for range 3000 {
			p, e := g.prefix(), g.entry()
			c.Insert(p, e)
			all = append(all, kv{string(p), e})
		}
		st := c.Stats()
		if st.Bytes <= empty || st.Evictions != 0 {
			t.Fatalf("after inserts: %+v", st)
		}
		m := c.contents(t)
		t.Logf("%d entries, %d bytes", len(m), st.Bytes)
		for _, x := range all { // replaced ones first: no-ops
			c.Invalidate([]byte(x.p), x.e)
		}
		if st := c.Stats(); st.Entries != 0 || st.Bytes != empty || st.Invalidations != uint64(len(m)) {
			t.Fatalf("after invalidating all: %+v, want %d bytes and %d invalidations", st, empty, len(m))
		}
		c.contents(t)
	})
}

func TestDisabled(t *testing.T) {
	c := New(Options{Bytes: -1})
	e := NewEntry(0, []uint64{word('a', 1), 0, 0, 0}, 0)
	c.Insert(nil, e)
	if _, _, _, ok := c.Lookup([]byte("a")); ok {
		t.Fatal("disabled cache hit")
	}
	if _, ok := c.Get(nil); ok {
		t.Fatal("disabled cache Get hit")
	}
	c.Invalidate(nil, e)
	if st := c.Stats(); st != (Stats{}) {
		t.Fatalf("disabled cache stats %+v", st)
	}
	if n := testing.AllocsPerRun(100, func() { c.Insert([]byte("x"), e) }); n != 0 {
		t.Fatalf("disabled Insert allocates %v", n)
	}
}

func TestDefaultBudget(t *testing.T) {
	if c := New(Options{}); c.budget != DefaultBytes {
		t.Fatalf("budget %d, want %d", c.budget, DefaultBytes)
	}
}

func TestInsertSameEntry(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		c := New(Options{Hash: hash})
		e := NewEntry(0, []uint64{word('a', 1), 0, 0, 0}, 0)
		c.Insert([]byte("p"), e)
		c.Insert([]byte("p"), e)
		if st := c.Stats(); st.Entries != 1 || st.Inserts != 1 {
			t.Fatalf("re-insert: %+v", st)
		}
		defer func() {
			if recover() == nil {
				t.Fatal("Insert of an entry cached under another prefix did not panic")
			}
		}()
		c.Insert([]byte("q"), e)
	})
}

func TestLookupDoesNotAllocate(t *testing.T) {
	kinds(t, func(t *testing.T, hash bool) {
		c := New(Options{Hash: hash})
		nodes := smartNodes(emailKeys(2000, 1))
		for _, n := range nodes {
			c.Insert(n.prefix, n.entry())
		}
		hit := append(nodes[len(nodes)-1].prefix, byte(nodes[len(nodes)-1].slots[0]))
		miss := []byte("zzz.nowhere@nobody")
		for _, key := range [][]byte{hit, miss, nil} {
			if n := testing.AllocsPerRun(1000, func() { c.Lookup(key) }); n != 0 {
				t.Errorf("Lookup(%q) allocates %v times", key, n)
			}
		}
		if _, _, _, ok := c.Lookup(hit); !ok {
			t.Fatal("no hit")
		}
	})
}

func TestNewEntry(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 8, 15, 16, 17, 32, 48, 64, 128, 247, 248, 249, 255, 256} {
		slots := make([]uint64, n)
		for i := range slots {
			slots[i] = uint64(i + 1)
		}
		e := NewEntry(1, slots, 4)
		e.Epoch = 7
		if e.Addr != 1 || e.Level() != 4 || e.Epoch != 7 || e.referenced() || !slices.Equal(e.Slots(), slots) {
			t.Fatalf("NewEntry(%d slots) = %+v with slots %v", n, e, e.Slots())
		}
		e.setReferenced(true)
		if !e.referenced() || e.Level() != 4 || len(e.Slots()) != n {
			t.Fatalf("NewEntry(%d slots): the reference bit changed level %d or slots %d", n, e.Level(), len(e.Slots()))
		}
		if n > 0 {
			slots[0] = 99 // the entry owns a copy
			if e.Slots()[0] != 1 {
				t.Fatalf("NewEntry(%d slots) aliases its argument", n)
			}
		}
		// What an entry accounts is one allocation of a size class: the
		// allocator hands out exactly that many bytes for it.
		b, w := e.bytes(), int64(roomWords(n, n)) // slots and index
		if b < entryStructBytes+8*w || (n > 0 && b > entryStructBytes+8*w*5/4+16) {
			t.Errorf("NewEntry(%d slots) accounts %d bytes", n, b)
		}
		if unsafe.Sizeof(uintptr(0)) == 8 && !slices.Contains(sizeClasses, b) {
			t.Errorf("NewEntry(%d slots) accounts %d bytes, not a size class", n, b)
		}
		if got := testing.AllocsPerRun(100, func() { NewEntry(1, slots, 4) }); got != 1 {
			t.Errorf("NewEntry(%d slots) allocates %v times, want 1", n, got)
		}
	}
	for _, bad := range []struct {
		slots, level int
	}{{MaxSlots + 1, 0}, {1, -1}, {1, levelMax + 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewEntry(%d slots, level %d) did not panic", bad.slots, bad.level)
				}
			}()
			NewEntry(0, make([]uint64, bad.slots), bad.level)
		}()
	}
}

// sizeClasses are the Go allocator's size classes (64-bit) from 48 to 2688
// bytes (internal/runtime/gc's SizeClassToSize).
var sizeClasses = []int64{48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352,
	384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688}

// TestEntryFootprint: an entry is 48 bytes before its slot words on 64-bit
// platforms (the figure docs/results' cache bytes per key rely on).
func TestEntryFootprint(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 && entryStructBytes != 48 {
		t.Fatalf("Entry is %d bytes, want 48", entryStructBytes)
	}
}
