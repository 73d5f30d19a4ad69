package smart

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

func FuzzKeyEncoding(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"a", "a\x00"}, {"\x00", "\x01"}, {"\x01\x02", "\x01"}, {"\xff", "\xff\xff"}} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ea, eb := appendEncoded(nil, a), appendEncoded(nil, b)
		da, err := appendDecoded(nil, ea)
		if err != nil || !bytes.Equal(da, a) {
			t.Fatalf("decode(encode(%x)) = %x, %v", a, da, err)
		}
		if got, want := bytes.Compare(ea, eb), bytes.Compare(a, b); got != want {
			t.Fatalf("order of %x,%x: encoded %d, plain %d", a, b, got, want)
		}
		if !bytes.Equal(a, b) && (bytes.HasPrefix(ea, eb) || bytes.HasPrefix(eb, ea)) {
			t.Fatalf("encodings of %x and %x are not prefix-free", a, b)
		}
		if len(ea) > 2*len(a)+1 {
			t.Fatalf("encoding of %d bytes is %d bytes", len(a), len(ea))
		}
		// Arbitrary input never panics the decoder, and what it accepts
		// re-encodes to itself.
		if d, err := appendDecoded(nil, a); err == nil && !bytes.Equal(appendEncoded(nil, d), a) {
			t.Fatalf("decoder accepted non-canonical %x", a)
		}
	})
}

func FuzzSlotAndHeader(f *testing.F) {
	f.Add(uint64(0), byte(0), 0, uint64(64), 0, []byte("abc"))
	f.Add(^uint64(0), byte(0xff), 127, uint64(1<<40), 255, []byte("abcdef"))
	f.Fuzz(func(t *testing.T, word uint64, partial byte, class int, off uint64, mn int, prefix []byte) {
		// Decoding any word is total.
		s := slot(word)
		_ = s.String()
		_, _, _ = s.nodeType(), s.leafClass(), s.addr()
		h := header(word)
		_ = h.dropped(min(h.prefixLen(), 6))
		class &= 0x7f
		mn &= 0xff
		off = (off &^ (leafAlign - 1)) % maxSlotOffset
		if off == 0 {
			off = 64
		}
		a := remote.MakeAddr(mn, off)
		ls := leafSlot(partial, class, a)
		if !ls.isLeaf() || ls.isTombstone() || ls.partial() != partial || ls.leafClass() != class || ls.addr() != a {
			t.Fatalf("leaf slot round trip: %v from %x %d %v", ls, partial, class, a)
		}
		for typ := node4; typ <= node256; typ++ {
			ns := nodeSlot(partial, typ, a)
			if ns.isLeaf() || ns.nodeType() != typ || ns.addr() != a || ns.partial() != partial {
				t.Fatalf("node slot round trip: %v", ns)
			}
			if ns.withType(node256).nodeType() != node256 || ns.withType(node256).addr() != a {
				t.Fatal("withType changed more than the type")
			}
		}
		ts := tombstone(partial)
		if ts.isEmpty() || !ts.isTombstone() || ts.isChild() || ts.partial() != partial {
			t.Fatalf("tombstone %v", ts)
		}
		if len(prefix) > maxHeaderBytes {
			prefix = prefix[:maxHeaderBytes]
		}
		depth := int(word % 1024)
		hh := makeHeader(depth, node4, prefix)
		if hh.depth() != depth || hh.nodeType() != node4 || hh.prefixLen() != len(prefix) {
			t.Fatalf("header round trip %x", uint64(hh))
		}
		for i := range prefix {
			if hh.prefixByte(i) != prefix[i] {
				t.Fatalf("header prefix byte %d", i)
			}
		}
		// A node's header is never a forward; a forward names its node.
		if hh.isForwarded() {
			t.Fatalf("header %x reads as a forward", uint64(hh))
		}
		if fw := forwarded(node4+2, a); !fw.isForwarded() || fw.successor() != a || fw.nodeType() != node4+2 {
			t.Fatalf("forward to %v: %x", a, uint64(fw))
		}
		// A word with only one of the two marks is not a forward.
		if w := header(word | fwdPrefixLen<<13); w.depth() != fwdDepth && w.isForwarded() {
			t.Fatalf("word %x without the forward's depth reads as a forward", uint64(w))
		}
		if len(prefix) > 0 && depth+len(prefix) < 1024 {
			d := hh.dropped(1)
			if d.depth() != depth+1 || d.prefixLen() != len(prefix)-1 || (len(prefix) > 1 && d.prefixByte(0) != prefix[1]) {
				t.Fatalf("dropped header %x", uint64(d))
			}
		}
	})
}

func FuzzLeaf(f *testing.F) {
	f.Add([]byte("k"), []byte(""), 0, byte(1))
	f.Add([]byte("key\x00\xff"), bytes.Repeat([]byte("v"), 300), 40, byte(0x80))
	f.Add([]byte("k"), []byte("value"), -3, byte(0x10)) // a checksum byte
	f.Fuzz(func(t *testing.T, key, value []byte, flip int, mask byte) {
		if len(key) == 0 || len(key) > MaxKeyLen || len(value) > 4096 {
			return
		}
		class := classFor(leafPayload(len(key), len(value)))
		img := leafImage(nil, remote.MakeAddr(1, 4096), key, value, class, 0)
		if len(img) != classBytes(class) || len(img)%leafAlign != 0 {
			t.Fatalf("leaf image of %d bytes for class %d", len(img), class)
		}
		v, st := parseLeaf(img, class)
		if st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, value) || v.lock != 0 {
			t.Fatalf("leaf round trip: state %d", st)
		}
		// A reader's READ leaves the lock word out; one byte less is torn.
		binary.LittleEndian.PutUint64(img[len(img)-8:], 1<<62)
		if v, st := parseLeaf(img[:leafReadBytes(class)], class); st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, value) || v.lock != 0 {
			t.Fatalf("leaf read without its lock word: state %d, lock %#x", st, v.lock)
		}
		if _, st := parseLeaf(img[:leafReadBytes(class)-1], class); st != leafTorn {
			t.Fatalf("a leaf read short by a byte: state %d", st)
		}
		if v, _ := parseLeaf(img, class); v.lock != 1<<62 {
			t.Fatalf("lock word read as %#x", v.lock)
		}
		binary.LittleEndian.PutUint64(img[len(img)-8:], 0)
		// Flipping any bit of meta, checksum, key or value is detected;
		// flipping only the valid bit reads as retired.
		if mask == 0 {
			return
		}
		// (The padding between value and checksum is not covered.)
		pos := leafMetaOff + int(uint(flip)%uint(leafKeyOff+len(key)+len(value)-leafMetaOff))
		if flip < 0 {
			pos = leafSumOff(class) + int(uint(-flip)%8)
		}
		img[pos] ^= mask
		want := leafTorn
		if pos < leafMetaOff+8 && (uint64(mask)<<(8*(pos-leafMetaOff)))&^uint64(metaValidBit) == 0 {
			want = leafRetired
		}
		if _, st := parseLeaf(img, class); st == leafOK || (want == leafRetired && st != leafRetired) {
			t.Fatalf("corruption at byte %d (mask %#x) read as state %d", pos, mask, st)
		}
		// Arbitrary bytes never panic the parser.
		_, _ = parseLeaf(value, class)
	})
}

func TestSizeClasses(t *testing.T) {
	prev := 0
	for c := range numClasses {
		n := classBytes(c)
		if n <= prev || n%leafAlign != 0 {
			t.Fatalf("class %d: %d bytes after %d", c, n, prev)
		}
		if classFor(n) != c || classFor(prev+1) != c {
			t.Fatalf("classFor around class %d", c)
		}
		prev = n
	}
	if classFor(leafPayload(MaxKeyLen, MaxValueLen)) < 0 {
		t.Fatal("largest leaf has no class")
	}
	// The data and no padding beyond 16-byte granularity for small leaves:
	// amplification and footprint depend on it (docs/layouts.md).
	for _, c := range []struct{ k, v, bytes int }{
		{8, 8, 48}, {1, 0, 48}, {8, 16, 64}, {32, 8, 80}, {8, 64, 112}, {32, 64, 128}, {200, 24, 256}, {200, 25, 320},
	} {
		if got := classBytes(classFor(leafPayload(c.k, c.v))); got != c.bytes {
			t.Errorf("a %d-byte key and %d-byte value take %d bytes, want %d", c.k, c.v, got, c.bytes)
		}
	}
}

// TestUpdateWrites: an in-place update of a value of the same length
// writes from the value to the end of the leaf (value, padding, checksum,
// the lock's release) and leaves the meta word and the key alone; a value
// of another length in the same class rewrites them too (format SMARTv3).
// Without redo records, so that the leaf's WRITE is all that is written.
func TestUpdateWrites(t *testing.T) {
	ctx := t.Context()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 16 << 20}, Options{NoRedo: true})
	defer p.Close()
	cn := tr.cn
	key := []byte("user@example.com")
	class := classFor(leafPayload(len(key), 40))
	n := classBytes(class)
	for _, c := range []struct {
		value []byte
		wrote int
	}{
		{bytes.Repeat([]byte("a"), 40), -1}, // the insert
		{bytes.Repeat([]byte("b"), 40), n - leafKeyOff - len(key)},
		{bytes.Repeat([]byte("c"), 39), n - leafMetaOff},
		{bytes.Repeat([]byte("d"), 39), n - leafKeyOff - len(key)},
	} {
		before := cn.Stats()
		if err := tr.Put(ctx, key, c.value); err != nil {
			t.Fatal(err)
		}
		d := cn.Stats().Sub(before)
		if v, ok, err := tr.Get(ctx, key); err != nil || !ok || !bytes.Equal(v, c.value) {
			t.Fatalf("Get after Put(%q) = %q, %v, %v", c.value, v, ok, err)
		}
		if c.wrote >= 0 && (d.Writes != 1 || d.WriteBytes != uint64(c.wrote)) {
			t.Errorf("update to a %d-byte value: %d WRITEs of %d bytes, want 1 of %d", len(c.value), d.Writes, d.WriteBytes, c.wrote)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
