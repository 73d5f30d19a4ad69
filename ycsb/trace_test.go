package ycsb

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

func TestTraceRoundTrip(t *testing.T) {
	for _, keys := range []KeyType{KeyInt, KeyEmail} {
		for _, name := range []string{"a", "d", "e"} {
			w, _ := Preset(name)
			g, err := NewGenerator(w, keys, 500, 500)
			if err != nil {
				t.Fatal(err)
			}
			var ops []Op
			for n := range uint64(500) {
				ops = append(ops, g.LoadOp(nil, n))
			}
			s := g.Stream(testseed.Base())
			for range 500 {
				op := s.Next()
				op.Key = bytes.Clone(op.Key)
				op.seq = 0
				ops = append(ops, op)
			}
			var buf bytes.Buffer
			if err := WriteTrace(&buf, keys, ops); err != nil {
				t.Fatal(err)
			}
			back, err := ReadTrace(&buf, keys)
			if err != nil {
				t.Fatalf("%v %s: %v", keys, name, err)
			}
			if len(back) != len(ops) {
				t.Fatalf("%v %s: read %d ops, wrote %d", keys, name, len(back), len(ops))
			}
			for i := range ops {
				if back[i].Kind != ops[i].Kind || !bytes.Equal(back[i].Key, ops[i].Key) || back[i].ScanLength != ops[i].ScanLength {
					t.Fatalf("%v %s op %d: read %+v, wrote %+v", keys, name, i, back[i], ops[i])
				}
			}
		}
	}
}

func TestTraceFormat(t *testing.T) {
	in := "INSERT 6284781860667377211\n\nREAD 1\nUPDATE 2\r\nSCAN 3 100\n"
	ops, err := ReadTrace(strings.NewReader(in), KeyInt)
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{
		{Kind: OpInsert, Key: KeyInt.AppendKey(nil, 6284781860667377211)},
		{Kind: OpRead, Key: KeyInt.AppendKey(nil, 1)},
		{Kind: OpUpdate, Key: KeyInt.AppendKey(nil, 2)},
		{Kind: OpScan, Key: KeyInt.AppendKey(nil, 3), ScanLength: 100},
	}
	if len(ops) != len(want) {
		t.Fatalf("parsed %d ops, want %d", len(ops), len(want))
	}
	for i := range want {
		if ops[i].Kind != want[i].Kind || !bytes.Equal(ops[i].Key, want[i].Key) || ops[i].ScanLength != want[i].ScanLength {
			t.Errorf("op %d = %+v, want %+v", i, ops[i], want[i])
		}
	}
	var out bytes.Buffer
	rmw := []Op{{Kind: OpReadModifyWrite, Key: []byte("com.gmail@john1")}}
	if err := WriteTrace(&out, KeyEmail, rmw); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "READ com.gmail@john1\nUPDATE com.gmail@john1\n" {
		t.Errorf("read-modify-write written as %q", got)
	}
	// A trace without operations is an error, not a nil trace that a
	// Config takes for none.
	for _, empty := range []string{"", "\n", "  \n\t\n\r\n"} {
		if ops, err := ReadTrace(strings.NewReader(empty), KeyInt); err == nil || !strings.Contains(err.Error(), "no operations") {
			t.Errorf("ReadTrace(%q) = %d ops, %v; want an error", empty, len(ops), err)
		}
	}
	for _, bad := range []string{"DELETE 1", "READ", "READ 1 2", "SCAN 1", "SCAN 1 0", "SCAN 1 x", "READ x"} {
		if _, err := ReadTrace(strings.NewReader("READ 5\n"+bad+"\n"), KeyInt); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("ReadTrace(%q) error = %v, want one naming line 2", bad, err)
		}
	}
}

// WriteTrace refuses an operation that ReadTrace would not read back as it
// is, naming it, and writes nothing (it wrote "SCAN 7 0", "INSERT abc" and
// "INSERT a b", which ReadTrace rejects, and returned nil).
func TestWriteTraceRefuses(t *testing.T) {
	key7 := KeyInt.AppendKey(nil, 7)
	// The longest line ReadTrace reads is maxTraceLine bytes, its newline
	// included.
	longest := strings.Repeat("k", maxTraceLine-len("UPDATE \n"))
	for _, c := range []struct {
		keys   KeyType
		op     Op
		phrase string
	}{
		{KeyInt, Op{Kind: OpScan, Key: key7}, "ops[1] to a trace: SCAN of length 0, want at least 1 pair"},
		{KeyInt, Op{Kind: OpScan, Key: key7, ScanLength: -3}, "SCAN of length -3"},
		{KeyInt, Op{Kind: OpInsert, Key: []byte("abc")}, `ops[1] to a trace: int key "abc" is 3 bytes long, not 8`},
		{KeyInt, Op{Kind: OpRead}, `int key "" is 0 bytes long, not 8`},
		{KeyInt, Op{Kind: OpUpdate, Key: make([]byte, 9)}, "int key 0x000000000000000000 is 9 bytes long, not 8"},
		{KeyInt, Op{Kind: OpKind(9), Key: key7}, "unknown operation kind OpKind(9)"},
		{KeyEmail, Op{Kind: OpInsert, Key: []byte("a b")}, `email key "a b" is empty or has white space`},
		{KeyEmail, Op{Kind: OpRead}, `email key "" is empty or has white space`},
		{KeyEmail, Op{Kind: OpRead, Key: []byte("a\tb")}, "email key 0x610962 is empty"},
		{KeyEmail, Op{Kind: OpRead, Key: []byte("a\u00a0b")}, "email key 0x61c2a062 is empty"}, // strings.Fields splits there
		{KeyEmail, Op{Kind: OpReadModifyWrite, Key: []byte(longest + "k")}, "a line of 1048577 bytes, more than ReadTrace reads (1048576)"},
		{KeyEmail, Op{Kind: OpScan, Key: []byte(longest), ScanLength: 100}, "a line of 1048578 bytes"},
	} {
		ops := []Op{{Kind: OpInsert, Key: c.keys.AppendKey(nil, 1)}, c.op}
		var buf bytes.Buffer
		err := WriteTrace(&buf, c.keys, ops)
		if err == nil || !strings.Contains(err.Error(), c.phrase) || buf.Len() > 0 {
			t.Errorf("WriteTrace(%v, %v of a %d-byte key) = %.200v, wrote %d bytes; want an error naming %q and nothing written",
				c.keys, c.op.Kind, len(c.op.Key), err, buf.Len(), c.phrase)
		}
	}
	// The longest line is written and read back.
	var buf bytes.Buffer
	ops := []Op{{Kind: OpReadModifyWrite, Key: []byte(longest)}}
	if err := WriteTrace(&buf, KeyEmail, ops); err != nil {
		t.Fatalf("WriteTrace of a line of %d bytes: %v", maxTraceLine, err)
	}
	if back, err := ReadTrace(&buf, KeyEmail); err != nil || len(back) != 2 || string(back[1].Key) != longest {
		t.Errorf("ReadTrace of a line of %d bytes: %d ops, %v", maxTraceLine, len(back), err)
	}
}

// FuzzTraceRoundTrip: whatever the operations, WriteTrace either fails and
// writes nothing, or writes a trace that ReadTrace reads back as them (a
// READ-MODIFY-WRITE as a READ and an UPDATE of its key).
func FuzzTraceRoundTrip(f *testing.F) {
	key7 := KeyInt.AppendKey(nil, 7)
	f.Add(false, uint8(OpScan), key7, 0, uint8(OpRead), key7, 0)
	f.Add(false, uint8(OpInsert), []byte("abc"), 0, uint8(OpRead), key7, 0)
	f.Add(false, uint8(OpScan), key7, 100, uint8(OpReadModifyWrite), key7, 5)
	f.Add(false, uint8(OpUpdate), []byte{}, 0, uint8(9), key7, 0)
	f.Add(true, uint8(OpInsert), []byte("a b"), 0, uint8(OpRead), []byte("com.gmail@john1"), 0)
	f.Add(true, uint8(OpInsert), []byte{}, 0, uint8(OpScan), []byte("x"), 1)
	f.Add(true, uint8(OpReadModifyWrite), []byte("com.gmail@john1"), 0, uint8(OpScan), []byte("a\u0085b"), 3)
	f.Add(true, uint8(OpRead), []byte("\xff\xfe"), 0, uint8(OpScan), []byte("a\vb"), 3)
	f.Fuzz(func(t *testing.T, email bool, kind1 uint8, key1 []byte, n1 int, kind2 uint8, key2 []byte, n2 int) {
		keys := KeyInt
		if email {
			keys = KeyEmail
		}
		ops := []Op{{Kind: OpKind(kind1), Key: key1, ScanLength: n1}, {Kind: OpKind(kind2), Key: key2, ScanLength: n2}}
		var buf bytes.Buffer
		if err := WriteTrace(&buf, keys, ops); err != nil {
			if buf.Len() > 0 {
				t.Fatalf("WriteTrace(%v, %+v) failed (%v) and wrote %q", keys, ops, err, buf.Bytes())
			}
			return
		}
		var want []Op
		for _, op := range ops {
			switch op.Kind {
			case OpReadModifyWrite:
				want = append(want, Op{Kind: OpRead, Key: op.Key}, Op{Kind: OpUpdate, Key: op.Key})
			case OpScan:
				want = append(want, op)
			default:
				want = append(want, Op{Kind: op.Kind, Key: op.Key})
			}
		}
		text := buf.String()
		back, err := ReadTrace(&buf, keys)
		if err != nil {
			t.Fatalf("WriteTrace(%v, %+v) wrote %q, which ReadTrace rejects: %v", keys, ops, text, err)
		}
		if len(back) != len(want) {
			t.Fatalf("WriteTrace(%v, %+v) wrote %q, read back as %+v", keys, ops, text, back)
		}
		for i := range want {
			if back[i].Kind != want[i].Kind || !bytes.Equal(back[i].Key, want[i].Key) || back[i].ScanLength != want[i].ScanLength {
				t.Fatalf("WriteTrace(%v, %+v) wrote %q, read back as %+v", keys, ops, text, back)
			}
		}
	})
}
