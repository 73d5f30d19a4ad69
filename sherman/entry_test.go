package sherman

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// entryGeometries are the geometries whose leaf entry encoding the tests
// below check: SMART's 8-byte setup, the §4.3.1 default, a tiny and the
// largest one.
var entryGeometries = []Options{
	{KeySize: 8, ValueSize: 8},
	{},
	{KeySize: 3, ValueSize: 1, Span: 4},
	{KeySize: 16, ValueSize: 16, Span: 8},
	{KeySize: MaxKeyLen, ValueSize: MaxValueLen, Span: 4},
}

// randomPair returns a key of 1..KeySize and a value of 0..ValueSize random
// bytes.
func randomPair(r *rand.Rand, g *geometry) (key, value []byte) {
	key = make([]byte, 1+r.IntN(g.keySize))
	value = make([]byte, r.IntN(g.valueSize+1))
	for _, b := range [][]byte{key, value} {
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	}
	return key, value
}

// encodeEntry returns a leaf entry of g holding key → value (nil key: free)
// for page version v.
func encodeEntry(g *geometry, v uint32, key, value []byte) []byte {
	e := make([]byte, g.leafEntry)
	g.putEntry(e, v, key, value)
	return e
}

// decodeEntry returns the key and value of a leaf entry (nil key: free).
func decodeEntry(g *geometry, e []byte) (key, value []byte) {
	b := make([]byte, g.leafHdr+g.leafEntry)
	copy(b[g.leafHdr:], e)
	return page{g, b}.leafKV(0)
}

// mixWords returns a mixture of entries a and b placed at byte offset off
// of a memory of grain-byte atomic units: unit i comes from b if bit i%64 of
// mask is set.
func mixWords(a, b []byte, off, grain int, mask uint64) []byte {
	out := bytes.Clone(a)
	for i := range out {
		if mask>>(uint(off+i)/uint(grain)%64)&1 != 0 {
			out[i] = b[i]
		}
	}
	return out
}

// falsePasses counts, for leaf entry pairs (a, b) of one page version, the
// mixtures of a and b at the given grain and entry offsets that equal
// neither and still validate; it returns them and the number of mixtures
// tried. All masks of up to 12 units are enumerated, 256 random masks
// above.
func falsePasses(r *rand.Rand, g *geometry, v uint32, a, b []byte, grain int, offs []int) (passed, tried int) {
	for _, off := range offs {
		units := (off%grain + len(a) + grain - 1) / grain
		masks := []uint64{}
		if units <= 12 {
			for m := range uint64(1) << units {
				masks = append(masks, m<<(off/grain))
			}
		} else {
			for range 256 {
				masks = append(masks, r.Uint64())
			}
		}
		for _, m := range masks {
			x := mixWords(a, b, off, grain, m)
			if bytes.Equal(x, a) || bytes.Equal(x, b) {
				continue
			}
			tried++
			if g.entryValid(x, v) {
				passed++
			}
		}
	}
	return passed, tried
}

// allowed is the most false passes a correct check of w bits shows in n
// independent trials: four times the expectation n·2^-w, plus three.
func allowed(n, w int) int { return 4*(n>>w) + 3 }

// TestEntryEncoding checks, on a fixed corpus (fixed seeds, so the counts
// are deterministic), that leaf entries round-trip and that corruptions and
// torn mixtures are caught except at the rate 2^-checkBits: every
// single-byte change; every mixture of two versions of one entry (an
// update, an insert into a free slot, a delete) at 8-byte word grain (the
// local transport) for each of the 8 offsets an entry can have within a
// word, and at 64-byte line grain (the simulator's Strict mode) for each of
// the 64 offsets within a line; and the entry of another page version.
func TestEntryEncoding(t *testing.T) {
	for _, o := range entryGeometries {
		g := testGeometry(t, o)
		r := rand.New(rand.NewPCG(uint64(g.keySize), uint64(g.valueSize)))
		var bytePassed, byteTried, mixPassed, mixTried, verPassed, verTried int
		for range 8 {
			v := r.Uint32()
			k1, v1 := randomPair(r, g)
			k2, v2 := randomPair(r, g)
			a := encodeEntry(g, v, k1, v1)
			if !g.entryValid(a, v) {
				t.Fatalf("%+v: encoded entry %x is invalid", o, a)
			}
			if k, val := decodeEntry(g, a); !bytes.Equal(k, k1) || !bytes.Equal(val, v1) {
				t.Fatalf("%+v: %x→%x decoded as %x→%x", o, k1, v1, k, val)
			}
			free := encodeEntry(g, v, nil, nil)
			if k, _ := decodeEntry(g, free); k != nil || !g.entryValid(free, v) {
				t.Fatalf("%+v: free slot %x decodes as key %x", o, free, k)
			}
			for i := range a {
				for _, x := range []byte{1, 0x80, byte(1 + r.IntN(255))} {
					c := bytes.Clone(a)
					c[i] ^= x
					byteTried++
					if g.entryValid(c, v) {
						bytePassed++
					}
				}
			}
			for _, w := range [][2][]byte{
				{a, encodeEntry(g, v, k1, v2)}, // update
				{free, a},                      // insert
				{a, free},                      // delete
				{a, encodeEntry(g, v, k2, v2)}, // another key in a reused slot
			} {
				p, n := falsePasses(r, g, v, w[0], w[1], 8, []int{0, 1, 2, 3, 4, 5, 6, 7})
				mixPassed, mixTried = mixPassed+p, mixTried+n
				p, n = falsePasses(r, g, v, w[0], w[1], lineBytes, []int{0, 1, 13, 31, 40, 57, 62, 63})
				mixPassed, mixTried = mixPassed+p, mixTried+n
			}
			for _, d := range []uint32{1, 2, 1 << 31, r.Uint32() | 1} {
				verTried++
				if g.entryValid(a, v+d) {
					verPassed++
				}
			}
		}
		t.Logf("%+v: %d-bit check; false passes: %d of %d byte changes, %d of %d mixtures, %d of %d other versions",
			o, g.checkBits, bytePassed, byteTried, mixPassed, mixTried, verPassed, verTried)
		if mixTried < 100 || bytePassed > allowed(byteTried, g.checkBits) ||
			mixPassed > allowed(mixTried, g.checkBits) || verPassed > allowed(verTried, g.checkBits) {
			t.Errorf("%+v: too many false passes for a %d-bit check", o, g.checkBits)
		}
	}
}

// wideGeometry returns g with an 8-byte meta field, so that its check has
// 64 - lenBits bits and a false pass (2^-48 or less) never happens in a
// test: the encoding is otherwise the same, so every corruption must be
// caught.
func wideGeometry(g *geometry) *geometry {
	w := *g
	w.metaBytes = 8
	w.checkBits = 64 - w.lenBits
	w.leafEntry = w.metaBytes + w.keySize + w.valueSize
	return &w
}

// FuzzLeafEntry round-trips a pair and a second version of its slot (other
// pair, or a free slot if key2 is empty) through the entry encoding, then
// checks that a single-byte change, a mixture of the two versions at
// 8-byte word or 64-byte line grain at the entry offset off, and the entry
// of another page version never validate. It runs on the production
// geometry for the round trip and on the same encoding with a wide check
// (wideGeometry) for detection, where a pass would be a 2^-48 accident
// rather than the 2^-checkBits of a real leaf (TestEntryEncoding measures
// that rate).
func FuzzLeafEntry(f *testing.F) {
	base := testGeometry(f, Options{KeySize: 12, ValueSize: 10, Span: 4})
	f.Add([]byte("key"), []byte("value"), []byte("key"), []byte("other"), uint32(7), uint8(3), uint64(0b10), uint8(5), uint8(1))
	f.Add([]byte("k"), []byte{}, []byte{}, []byte{}, uint32(0), uint8(60), uint64(1), uint8(0), uint8(0x80))
	f.Add(bytes.Repeat([]byte{0xff}, 12), bytes.Repeat([]byte{0}, 10), []byte("a"), []byte("b"), ^uint32(0), uint8(7), ^uint64(0)>>1, uint8(25), uint8(0xff))
	f.Fuzz(func(t *testing.T, key, value, key2, value2 []byte, v uint32, off uint8, mask uint64, pos, x uint8) {
		clip := func(b []byte, n int) []byte { return b[:min(len(b), n)] }
		key, value = clip(key, base.keySize), clip(value, base.valueSize)
		key2, value2 = clip(key2, base.keySize), clip(value2, base.valueSize)
		if len(key) == 0 {
			return
		}
		if len(key2) == 0 {
			key2, value2 = nil, nil
		}
		for _, g := range []*geometry{base, wideGeometry(base)} {
			a, b := encodeEntry(g, v, key, value), encodeEntry(g, v, key2, value2)
			if k, val := decodeEntry(g, a); !g.entryValid(a, v) || !bytes.Equal(k, key) || !bytes.Equal(val, value) {
				t.Fatalf("%d-bit check: %x→%x decoded as %x→%x", g.checkBits, key, value, k, val)
			}
			if k, val := decodeEntry(g, b); !g.entryValid(b, v) || !bytes.Equal(k, key2) || !bytes.Equal(val, value2) {
				t.Fatalf("%d-bit check: %x→%x decoded as %x→%x", g.checkBits, key2, value2, k, val)
			}
		}
		g := wideGeometry(base)
		a, b := encodeEntry(g, v, key, value), encodeEntry(g, v, key2, value2)
		if x != 0 {
			c := bytes.Clone(a)
			c[int(pos)%len(c)] ^= x
			if g.entryValid(c, v) {
				t.Fatalf("byte %d ^ %#x of %x validates", int(pos)%len(c), x, a)
			}
		}
		for _, grain := range []int{8, lineBytes} {
			m := mixWords(a, b, int(off)%lineBytes, grain, mask)
			if !bytes.Equal(m, a) && !bytes.Equal(m, b) && g.entryValid(m, v) {
				t.Fatalf("mixture %x of %x and %x (grain %d) validates", m, a, b, grain)
			}
		}
		if g.entryValid(a, v+1+uint32(pos)) {
			t.Fatalf("entry of version %d validates for version %d", v, v+1+uint32(pos))
		}
	})
}

// TestEntryWriteBytes checks that an update and a delete write exactly the
// entry's bytes, at slots that start and end inside 8-byte words, plus the
// 8-byte unlock and, unless NoRedo, the redo record of the entry, and that
// every other byte of the leaf keeps its value.
func TestEntryWriteBytes(t *testing.T) {
	for _, noRedo := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoRedo=%v", noRedo), func(t *testing.T) { entryWriteBytes(t, noRedo) })
	}
}

func entryWriteBytes(t *testing.T, noRedo bool) {
	ctx := context.Background()
	tr := openTree(t, simPool(t, remote.InOrder, 1), Options{KeySize: 8, ValueSize: 8, Span: 8, NoRedo: noRedo})
	want := uint64(tr.g.leafEntry + 8)
	if !noRedo {
		want += registry.RedoHeader + redoPrefix + uint64(tr.g.leafEntry)
	}
	for i := range uint64(5) {
		if err := tr.Put(ctx, ikey(i), ikey(i)); err != nil {
			t.Fatal(err)
		}
	}
	c := tr.cn.Pool().NewComputeNode().NewClient()
	leaf := tr.root.Load().addr
	read := func() page {
		t.Helper()
		p := page{&tr.g, make([]byte, tr.g.leafBytes)}
		if err := c.Read(ctx, leaf, p.b); err != nil || !p.valid() {
			t.Fatalf("leaf read: %v, valid %v", err, p.valid())
		}
		return p
	}
	before := read()
	upd, _ := before.findLeaf(ikey(2))
	del, _ := before.findLeaf(ikey(3))
	if tr.g.entryOffset(upd)%8 == 0 && tr.g.entryOffset(del)%8 == 0 {
		t.Fatalf("slots %d and %d are word-aligned: the test needs unaligned entries", upd, del)
	}
	for _, op := range []func() error{
		func() error { return tr.Put(ctx, ikey(2), []byte("new")) },
		func() error { _, err := tr.Delete(ctx, ikey(3)); return err },
	} {
		io := tr.cn.Stats()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		if w := tr.cn.Stats().Sub(io).WriteBytes; w != want {
			t.Errorf("entry write moved %d bytes, want %d: the %d of an entry, 8 of the unlock and the redo record", w, want, tr.g.leafEntry)
		}
	}
	after := read()
	for i := range tr.g.leafBytes {
		slot := (i - tr.g.leafHdr) / tr.g.leafEntry
		if i >= tr.g.leafHdr && (slot == upd || slot == del) {
			continue
		}
		if before.b[i] != after.b[i] {
			t.Fatalf("byte %d (outside slots %d and %d) changed", i, upd, del)
		}
	}
	if k, v := after.leafKV(upd); !bytes.Equal(k, ikey(2)) || string(v) != "new" {
		t.Errorf("updated slot holds %x→%x", k, v)
	}
	if k, _ := after.leafKV(del); k != nil {
		t.Errorf("deleted slot holds %x", k)
	}
}
