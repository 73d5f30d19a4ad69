package smart

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestRedoImage cuts the WRITE of every in-place update of a table of
// leaves after every word and checks that the update's redo record (the
// WRITE's bytes from the value to the meta word, without the lock word,
// which a repairer keeps) names its leaf (redoLeaf) and turns the torn leaf
// into the new one, in both leaf formats.
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
	a := remote.MakeAddr(1, 0x1000)
	for _, lf := range []leafFormat{{}, {births: true}} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("births=%v/%s/%d->%d", lf.births, tc.key, len(tc.old), len(tc.new)), func(t *testing.T) {
				key, oldV, newV := []byte(tc.key), []byte(tc.old), []byte(tc.new)
				class := classFor(max(lf.payload(len(key), len(oldV)), lf.payload(len(key), len(newV))))
				n := classBytes(class)
				before := lf.image(nil, 0x2000, key, oldV, class, 7)
				after := bytes.Clone(before)
				lf.fill(after, key, newV, class, 7)
				from := leafKeyOff + len(key)
				image := after[from : n-8]
				if ra, rc, ok := redoLeaf(a.Add(uint64(from)), image); !ok || ra != a || rc != class {
					t.Fatalf("the record names leaf %v of class %d (%v), want %v of class %d", ra, rc, ok, a, class)
				}
				for cut := from; cut <= n-8; cut += 8 {
					torn := bytes.Clone(before)
					copy(torn[from:cut], after[from:cut])
					copy(torn[from:], image)
					v, st := lf.parse(torn, class)
					if st != leafOK || !bytes.Equal(v.key, key) || !bytes.Equal(v.value, newV) {
						t.Fatalf("cut at %d: after the redo %v, %q = %q", cut, st, v.key, v.value)
					}
					if !bytes.Equal(torn, after) {
						t.Fatalf("cut at %d: the repaired leaf differs from the new one", cut)
					}
				}
			})
		}
	}
}

// TestRedoLeafRejects: records that cannot be an in-place update's are
// refused, so that settle leaves them alone.
func TestRedoLeafRejects(t *testing.T) {
	meta := putWord(nil, makeMeta(8, 8, 0)) // class 0: 40 bytes
	for _, c := range []struct {
		name   string
		target remote.Addr
		image  []byte
	}{
		{"empty", remote.MakeAddr(0, 4096), nil},
		{"shorter than a word", remote.MakeAddr(0, 4096), meta[:7]},
		{"a leaf before offset 0", remote.MakeAddr(0, 8), meta},
		{"no room for a key", remote.MakeAddr(0, 4096), append(make([]byte, 24), meta...)},
		{"misaligned", remote.MakeAddr(0, 4100), meta},
	} {
		if a, class, ok := redoLeaf(c.target, c.image); ok {
			t.Errorf("%s: accepted as leaf %v of class %d", c.name, a, class)
		}
	}
	if a, _, ok := redoLeaf(remote.MakeAddr(2, 4096+17), append(make([]byte, 7), meta...)); !ok || a != remote.MakeAddr(2, 4096) {
		t.Errorf("a record of an update from byte 17 names %v, %v; want the leaf at 4096 on memory node 2", a, ok)
	}
}
