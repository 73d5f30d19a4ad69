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
