package smart

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestRedoImage cuts the WRITE of every in-place update of a table of
// leaves after every word and checks that the update's redo record
// (redoImage) turns the torn leaf into the new one (applyRedo): for a value
// of the same length the record holds the meta word and the WRITE's bytes
// from the value on, otherwise the whole data part; neither holds the lock
// word, which a repairer keeps.
func TestRedoImage(t *testing.T) {
	cases := []struct{ key, old, new string }{
		{"k", "", "x"},
		{"k", "abc", "xyz"},
		{"key-of-eight", "12345678", "abcdefgh"},
		{"a much longer key that spans words", "short", "other"},
		{"email@example.com", string(bytes.Repeat([]byte("v"), 96)), string(bytes.Repeat([]byte("w"), 96))},
		{"grows", "ab", "abcdefghijk"},
		{"shrinks", "abcdefghijk", "a"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%d->%d", tc.key, len(tc.old), len(tc.new)), func(t *testing.T) {
			key, oldV, newV := []byte(tc.key), []byte(tc.old), []byte(tc.new)
			class := classFor(max(leafPayload(len(key), len(oldV)), leafPayload(len(key), len(newV))))
			n := classBytes(class)
			before := leafImage(nil, 0x1000, key, oldV, class, 7)
			s := &session{img: make([]byte, n)}
			copy(s.img, before)
			meta := fillLeafData(s.img, key, newV, class, 7)
			clear(s.img[n-8:])
			from := leafMetaOff
			if meta == binary.LittleEndian.Uint64(before[leafMetaOff:]) {
				from = leafKeyOff + len(key)
			}
			if same := len(oldV) == len(newV); same != (from != leafMetaOff) {
				t.Fatalf("same length %v, but the WRITE starts at %d", same, from)
			}
			image := s.redoImage(n, from)
			want := 8 + n - 8 - from // the meta word, then the WRITE without the lock word
			if from == leafMetaOff {
				want = n - 16
			}
			if len(image) != want {
				t.Fatalf("redo image of %d bytes for a WRITE from %d in a leaf of %d", len(image), from, n)
			}
			for cut := from; cut <= n-8; cut += 8 {
				torn := bytes.Clone(before)
				copy(torn[from:cut], s.img[from:cut])
				if !applyRedo(torn, image) {
					t.Fatalf("cut at %d: the image does not fit the leaf", cut)
				}
				v, st := parseLeaf(torn, class)
				if st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, newV) {
					t.Fatalf("cut at %d: after the redo %v, %q = %q", cut, st, v.key, v.value)
				}
				if !bytes.Equal(torn[:n-8], s.img[:n-8]) {
					t.Fatalf("cut at %d: the repaired leaf differs from the new one", cut)
				}
			}
		})
	}
	if applyRedo(make([]byte, 48), make([]byte, 48)) || applyRedo(make([]byte, 48), make([]byte, 4)) {
		t.Error("applyRedo accepted an image that does not fit a 48-byte leaf")
	}
}
