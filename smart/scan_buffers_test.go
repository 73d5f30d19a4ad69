package smart

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// TestScanBuffersBounded: a scan whose pairs take many times scanCompact
// bytes yields every pair in order, ascending and descending, while
// compact moves the paths and pairs its frontier names between rounds, and
// leaves the session's path and pair buffers bounded by what compact
// keeps, not by the scan's length (20,000 pairs of 64 bytes: 1.28 MB).
func TestScanBuffersBounded(t *testing.T) {
	ctx := t.Context()
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20}, Options{})
	const n = 20000
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15) }
	value := func(k []byte) []byte { return bytes.Repeat(k[:7], 8) } // 56 bytes
	for i := range n {
		if err := tr.Put(ctx, key(i), value(key(i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, desc := range []bool{false, true} {
		seq := tr.Scan(ctx, nil, nil)
		if desc {
			seq = tr.ReverseScan(ctx, nil, nil)
		}
		got := 0
		var prev []byte
		for kv, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil && (bytes.Compare(prev, kv.Key) >= 0) != desc {
				t.Fatalf("desc %v: %x after %x", desc, kv.Key, prev)
			}
			if !bytes.Equal(kv.Value, value(kv.Key)) {
				t.Fatalf("desc %v: %x holds %x", desc, kv.Key, kv.Value)
			}
			prev = kv.Key
			got++
		}
		if got != n {
			t.Fatalf("desc %v: %d pairs, want %d", desc, got, n)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	used := false
	for _, s := range tr.free {
		sc := &s.scan
		b := cap(sc.paths) + cap(sc.paths2) + cap(sc.pairs) + cap(sc.pairs2)
		used = used || cap(sc.pairs) > 0
		if b > 16*scanCompact {
			t.Errorf("a session keeps %d bytes of scan paths and pairs, want at most %d", b, 16*scanCompact)
		}
	}
	if !used {
		t.Fatalf("no session of %d kept the scan's buffers", len(tr.free))
	}
}

// TestScanCompact: compact keeps every path the frontier's entries name
// (siblings sharing theirs) and every ready entry's pair, byte for byte,
// and drops the rest once a buffer is past scanCompact bytes; below that
// it moves nothing.
func TestScanCompact(t *testing.T) {
	sc := &scanner{}
	junk := bytes.Repeat([]byte{0xee}, scanCompact/2)
	var wantPaths, wantPairs [][]byte
	for i := range 40 {
		if i > 1 {
			sc.paths = append(sc.paths, junk[:1700+i*97%1000]...)
		}
		sc.pairs = append(sc.pairs, junk[:1700+i*89%1000]...)
		// Entry 0 is the root (no path, at offset 0), entry 1 the first
		// with a path (also at offset 0), then three siblings per path.
		var e entry
		switch {
		case i == 1 || i > 1 && i%3 == 0:
			sc.setPath(&e, binary.BigEndian.AppendUint32(nil, uint32(i)))
		case i > 1:
			prev := sc.front[len(sc.front)-1]
			e.pathOff, e.pathLen = prev.pathOff, prev.pathLen
		}
		pair := binary.BigEndian.AppendUint64(nil, uint64(i))
		if i%4 != 0 {
			e.readyWith(sc, leafView{key: pair[:3], value: pair[3:]})
		}
		sc.front = append(sc.front, e)
		wantPaths = append(wantPaths, bytes.Clone(sc.path(&e)))
		if e.ready {
			wantPairs = append(wantPairs, pair)
		}
	}
	check := func(when string) {
		t.Helper()
		var pairs [][]byte
		for i := range sc.front {
			e := &sc.front[i]
			if !bytes.Equal(sc.path(e), wantPaths[i]) {
				t.Fatalf("%s: entry %d has path %x, want %x", when, i, sc.path(e), wantPaths[i])
			}
			if e.ready {
				kv := sc.kv(e)
				pairs = append(pairs, append(bytes.Clone(kv.Key), kv.Value...))
			}
		}
		if len(pairs) != len(wantPairs) {
			t.Fatalf("%s: %d pairs, want %d", when, len(pairs), len(wantPairs))
		}
		for i := range pairs {
			if !bytes.Equal(pairs[i], wantPairs[i]) {
				t.Fatalf("%s: pair %d is %x, want %x", when, i, pairs[i], wantPairs[i])
			}
		}
	}
	check("before")
	if len(sc.paths) <= scanCompact || len(sc.pairs) <= scanCompact {
		t.Fatalf("the test's buffers (%d and %d bytes) do not exceed scanCompact", len(sc.paths), len(sc.pairs))
	}
	sc.compact()
	check("after")
	if want := 4 * 14; len(sc.paths) != want || len(sc.pairs) != 8*len(wantPairs) {
		t.Fatalf("compact kept %d bytes of paths and %d of pairs, want %d and %d", len(sc.paths), len(sc.pairs), want, 8*len(wantPairs))
	}
	paths, pairs := len(sc.paths), len(sc.pairs)
	sc.compact()
	if len(sc.paths) != paths || len(sc.pairs) != pairs {
		t.Fatal("compact moved buffers below scanCompact")
	}
	check("again")
}
