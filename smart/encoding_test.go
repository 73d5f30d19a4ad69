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
	f.Add([]byte("k"), []byte("value"), -3, byte(0x10)) // a meta byte
	f.Fuzz(func(t *testing.T, key, value []byte, flip int, mask byte) {
		if len(key) == 0 || len(key) > MaxKeyLen || len(value) > 4096 {
			return
		}
		for _, lf := range []leafFormat{{}, {births: true}} {
			class := lf.classOf(key, value)
			img := lf.image(nil, remote.MakeAddr(1, 4096), key, value, class, 7)
			n := classBytes(class)
			if len(img) != n || len(img)%leafAlign != 0 {
				t.Fatalf("births %v: leaf image of %d bytes for class %d", lf.births, len(img), class)
			}
			wantBirth := uint32(0)
			if lf.births {
				wantBirth = 7
			}
			v, st := lf.parse(img, class)
			if st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, value) || v.lock != 0 || v.birth != wantBirth {
				t.Fatalf("births %v: leaf round trip: state %d, birth %d", lf.births, st, v.birth)
			}
			// A reader's READ leaves the lock word out; one byte less is torn.
			binary.LittleEndian.PutUint64(img[n-8:], 1<<62)
			if v, st := lf.parse(img[:leafReadBytes(class)], class); st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, value) || v.lock != 0 {
				t.Fatalf("births %v: leaf read without its lock word: state %d, lock %#x", lf.births, st, v.lock)
			}
			if _, st := lf.parse(img[:leafReadBytes(class)-1], class); st != leafTorn {
				t.Fatalf("births %v: a leaf read short by a byte: state %d", lf.births, st)
			}
			if v, _ := lf.parse(img, class); v.lock != 1<<62 {
				t.Fatalf("births %v: lock word read as %#x", lf.births, v.lock)
			}
			binary.LittleEndian.PutUint64(img[n-8:], 0)
			// Flipping any bit of the key, the value, the birth or the meta
			// word is detected; flipping only the valid bit reads as
			// retired. (The padding is not covered.) flip < 0 picks a byte
			// of the meta word.
			if mask == 0 {
				continue
			}
			meta := n - 16
			covered := []int{}
			for i := leafKeyOff; i < leafKeyOff+len(key)+len(value); i++ {
				covered = append(covered, i)
			}
			for i := n - lf.trailer(); i < n-8; i++ {
				covered = append(covered, i)
			}
			pos := covered[uint(flip)%uint(len(covered))]
			if flip < 0 {
				pos = meta + int(uint(-flip)%8)
			}
			img[pos] ^= mask
			want := leafTorn
			if pos >= meta && (uint64(mask)<<(8*(pos-meta)))&^uint64(metaValidBit) == 0 {
				want = leafRetired
			}
			if _, st := lf.parse(img, class); st == leafOK || (want == leafRetired && st != leafRetired) {
				t.Fatalf("births %v: corruption at byte %d (mask %#x) read as state %d", lf.births, pos, mask, st)
			}
			// Arbitrary bytes never panic the parser.
			_, _ = lf.parse(value, class)
		}
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
	if classFor((leafFormat{births: true}).payload(MaxKeyLen, MaxValueLen)) < 0 {
		t.Fatal("largest leaf has no class")
	}
	// The data and no padding beyond 8-byte granularity for small leaves:
	// amplification and footprint depend on it (docs/layouts.md). A leaf
	// of a tree with births (Options.Reclaim) takes 8 bytes more.
	for _, c := range []struct {
		births      bool
		k, v, bytes int
	}{
		{false, 8, 8, 40}, {false, 1, 0, 40}, {false, 8, 16, 48}, {false, 32, 8, 64}, {false, 8, 64, 96},
		{false, 32, 64, 120}, {false, 200, 32, 256}, {false, 200, 33, 320}, {false, 13, 0, 40}, {false, 14, 3, 48},
		{true, 8, 8, 48}, {true, 1, 0, 40}, {true, 8, 64, 104}, {true, 200, 24, 256}, {true, 200, 25, 320},
	} {
		if got := classBytes(classFor((leafFormat{births: c.births}).payload(c.k, c.v))); got != c.bytes {
			t.Errorf("births %v: a %d-byte key and %d-byte value take %d bytes, want %d", c.births, c.k, c.v, got, c.bytes)
		}
	}
}

// TestUpdateWrites: an in-place update writes from the value to the end of
// the leaf (value, padding, meta word, the lock's release) and leaves the
// reverse pointer and the key alone, whether or not the value's length
// changes (format SMARTv4; SMARTv3 rewrote the key for another length).
// Without redo records, so that the leaf's WRITE is all that is written.
func TestUpdateWrites(t *testing.T) {
	ctx := t.Context()
	tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 16 << 20}, Options{NoRedo: true})
	defer p.Close()
	cn := tr.cn
	key := []byte("user@example.com")
	class := classFor(tr.lf.payload(len(key), 40))
	n := classBytes(class)
	for _, c := range []struct {
		value []byte
		wrote int
	}{
		{bytes.Repeat([]byte("a"), 40), -1}, // the insert
		{bytes.Repeat([]byte("b"), 40), n - leafKeyOff - len(key)},
		{bytes.Repeat([]byte("c"), 39), n - leafKeyOff - len(key)},
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
		// One WRITE, or two where the leaf's meta and lock words fall on
		// two lines (I7; TestStraddleUpdateVerbs).
		s, cur := leafCursor(t, tr, key)
		tr.release(s)
		writes := uint64(1)
		if tr.lockStartsLine(cur.sl) {
			writes = 2
		}
		if c.wrote >= 0 && (d.Writes != writes || d.WriteBytes != uint64(c.wrote)) {
			t.Errorf("update to a %d-byte value: %d WRITEs of %d bytes, want %d of %d", len(c.value), d.Writes, d.WriteBytes, writes, c.wrote)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeafFormatOfTree: a tree lays its leaves out by the format its
// options imply: a leaf of an 8-byte key and an 8-byte value takes 40
// bytes, 48 in a tree created with Options.Reclaim (the birth word), and
// reads back whole in both.
func TestLeafFormatOfTree(t *testing.T) {
	ctx := t.Context()
	key, value := []byte("key-0001"), []byte("value-01")
	for _, c := range []struct {
		reclaim bool
		bytes   int
	}{{false, 40}, {true, 48}} {
		tr, p := newTree(t, remote.Config{MemoryNodes: 1, NodeBytes: 16 << 20}, Options{Reclaim: c.reclaim})
		if err := tr.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
		s, cur := leafCursor(t, tr, key)
		tr.release(s)
		if got := classBytes(cur.sl.leafClass()); got != c.bytes {
			t.Errorf("reclaim %v: the leaf takes %d bytes, want %d", c.reclaim, got, c.bytes)
		}
		if v, ok, err := tr.Get(ctx, key); err != nil || !ok || !bytes.Equal(v, value) {
			t.Errorf("reclaim %v: Get = %q, %v, %v", c.reclaim, v, ok, err)
		}
		if err := tr.Verify(ctx); err != nil {
			t.Error(err)
		}
		p.Close()
	}
}
