package ycsb

import (
	"bytes"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

func TestPresets(t *testing.T) {
	for _, c := range []struct {
		name string
		mix  [numOpKinds]float64 // expected shares in YCSB's order
		dist Distribution
	}{
		{"a", [numOpKinds]float64{0.5, 0.5, 0, 0, 0}, DistZipfian},
		{"B", [numOpKinds]float64{0.95, 0.05, 0, 0, 0}, DistZipfian},
		{"c", [numOpKinds]float64{1, 0, 0, 0, 0}, DistZipfian},
		{"d", [numOpKinds]float64{0.95, 0, 0.05, 0, 0}, DistLatest},
		{"e", [numOpKinds]float64{0, 0, 0.05, 0.95, 0}, DistZipfian},
		{"f", [numOpKinds]float64{0.5, 0, 0, 0, 0.5}, DistZipfian},
		{"la", [numOpKinds]float64{0, 0, 1, 0, 0}, DistZipfian},
		{"30-", [numOpKinds]float64{0.7, 0, 0.3, 0, 0}, DistLatest},
		{"0-", [numOpKinds]float64{1, 0, 0, 0, 0}, DistLatest},
		{"100-", [numOpKinds]float64{0, 0, 1, 0, 0}, DistLatest},
	} {
		w, err := Preset(c.name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", c.name, err)
		}
		if w.Distribution != c.dist {
			t.Errorf("%s: distribution %v, want %v", c.name, w.Distribution, c.dist)
		}
		g, err := NewGenerator(w, KeyInt, 10_000, 10_000)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := g.Stream(testseed.Base())
		draws := scaled(100_000)
		var counts [numOpKinds]int
		for range draws {
			op := s.Next()
			counts[op.Kind]++
			g.Ack(op)
		}
		for k := range numOpKinds {
			within(t, c.name+" "+k.String(), counts[k], draws, c.mix[k])
		}
	}
	for _, bad := range []string{"g", "101-", "-", "x-", ""} {
		if _, err := Preset(bad); err == nil {
			t.Errorf("Preset(%q) succeeded", bad)
		}
	}
	if w, _ := Preset("load"); !w.LoadOnly {
		t.Error("load is not LoadOnly")
	}
}

func TestInsertsContinueRecordNumbering(t *testing.T) {
	w, _ := Preset("la")
	g, err := NewGenerator(w, KeyInt, 100, 10)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(testseed.Base())
	for n := uint64(100); n < 110; n++ {
		op := s.Next()
		if want := KeyInt.AppendKey(nil, FNVHash64(n)); op.Kind != OpInsert || !bytes.Equal(op.Key, want) {
			t.Fatalf("insert %d: %v %x, want INSERT %x", n, op.Kind, op.Key, want)
		}
	}
	if op := g.LoadOp(nil, 7); !bytes.Equal(op.Key, KeyInt.AppendKey(nil, FNVHash64(7))) || op.Kind != OpInsert {
		t.Fatalf("LoadOp(7) = %v %x", op.Kind, op.Key)
	}
}

func TestStreamsAreSeeded(t *testing.T) {
	w, _ := Preset("e")
	ops := func(seed uint64) []Op {
		g, err := NewGenerator(w, KeyEmail, 1000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		s := g.Stream(seed)
		var out []Op
		for range 1000 {
			op := s.Next()
			op.Key = bytes.Clone(op.Key)
			g.Ack(op)
			out = append(out, op)
		}
		return out
	}
	a, b, c := ops(1), ops(1), ops(2)
	same := func(x, y []Op) bool {
		for i := range x {
			if x[i].Kind != y[i].Kind || !bytes.Equal(x[i].Key, y[i].Key) || x[i].ScanLength != y[i].ScanLength {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("equal seeds gave different streams")
	}
	if same(a, c) {
		t.Error("different seeds gave equal streams")
	}
}

func TestNewGeneratorRejects(t *testing.T) {
	c, _ := Preset("c")
	if _, err := NewGenerator(c, KeyInt, 0, 10); err == nil {
		t.Error("reads over 0 records accepted")
	}
	if _, err := NewGenerator(Workload{Name: "none"}, KeyInt, 10, 10); err == nil {
		t.Error("all-zero proportions accepted")
	}
	if _, err := NewGenerator(Workload{Name: "t", Read: 1, ZipfTheta: 1}, KeyInt, 10, 10); err == nil {
		t.Error("θ = 1 accepted")
	}
	if _, err := NewGenerator(Workload{Name: "s", Scan: 1, MinScanLength: 5, MaxScanLength: 2}, KeyInt, 10, 10); err == nil {
		t.Error("scan lengths 5..2 accepted")
	}
}
