package depot

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// newPool returns a pool of two 4 MiB memory nodes, simulated if sim,
// closed at the end of the test. Its chunks are 64 KiB, so a record holds
// at most 512 entries.
func newPool(t *testing.T, sim bool) *remote.Pool {
	t.Helper()
	cfg := remote.Config{MemoryNodes: 2, NodeBytes: 4 << 20}
	if sim {
		cfg.Sim = &remote.SimConfig{Seed: 1}
	}
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// newHead returns the head word of a depot of p, with a client for it.
func newHead(t *testing.T, p *remote.Pool, name string) (*remote.Client, remote.Addr) {
	t.Helper()
	c := p.NewComputeNode().NewClient()
	head, err := c.Named(t.Context(), name, 64)
	if err != nil {
		t.Fatal(err)
	}
	return c, head
}

// alloc allocates size bytes with c: memory that no other entry, record or
// client's chunk overlaps.
func alloc(t testing.TB, c *remote.Client, size uint64) remote.Addr {
	t.Helper()
	a, err := c.Alloc(t.Context(), int(size))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// readWord returns the word at a.
func readWord(t testing.TB, c *remote.Client, a remote.Addr) uint64 {
	t.Helper()
	var w [8]byte
	if err := c.Read(t.Context(), a, w[:]); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(w[:])
}

// writeWord writes v at a.
func writeWord(t testing.TB, c *remote.Client, a remote.Addr, v uint64) {
	t.Helper()
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], v)
	if err := c.Write(t.Context(), a, w[:]); err != nil {
		t.Fatal(err)
	}
}

// rec is a record found by walking a depot's stack.
type rec struct {
	addr     remote.Addr
	n, cap   int
	next     remote.Addr
	capBytes uint64
}

// walk reads the records of the depot at head, without taking them.
func walk(t *testing.T, c *remote.Client, head remote.Addr) []rec {
	t.Helper()
	var rs []rec
	for a := remote.Addr(readWord(t, c, head)); !a.IsNil(); {
		if len(rs) > 1<<16 {
			t.Fatalf("more than %d records: a cycle?", len(rs))
		}
		var hdr [headerBytes]byte
		if err := c.Read(t.Context(), a, hdr[:]); err != nil {
			t.Fatal(err)
		}
		next, n, capacity, err := decodeHeader(hdr[:])
		if err != nil {
			t.Fatalf("record %d at %v: %v", len(rs), a, err)
		}
		rs = append(rs, rec{a, n, capacity, next, uint64(recordBytes(capacity))})
		a = next
	}
	return rs
}

// span is the byte range [lo, hi) of an extent, in Addr values: extents of
// different memory nodes never overlap.
type span struct{ lo, hi uint64 }

func spanOf(a remote.Addr, size uint64) span { return span{uint64(a), uint64(a) + size} }

func (s span) overlaps(o span) bool { return s.lo < o.hi && o.lo < s.hi }
func (s span) inside(o span) bool   { return o.lo <= s.lo && s.hi <= o.hi }

// disjoint reports the first two overlapping spans of ss, if any.
func disjoint(ss []span) error {
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	for i := 1; i < len(ss); i++ {
		if ss[i-1].hi > ss[i].lo {
			return fmt.Errorf("[%#x, %#x) overlaps [%#x, %#x)", ss[i-1].lo, ss[i-1].hi, ss[i].lo, ss[i].hi)
		}
	}
	return nil
}

// checkTaken checks what Take returned (got) for the entries of one Push
// (pushed) whose records were recs (walked before the Take): every
// record's memory comes back once as an Unused entry; every pushed Retired
// or Free entry comes back once, unchanged, in the order pushed; every
// pushed Unused entry comes back once, unchanged or shrunk by the records
// carved from its start, or not at all if records took all of it; the
// Unused memory returned (entries and records carved) covers the pushed
// Unused memory exactly, and records not carved from it overlap no pushed
// entry.
func checkTaken(t *testing.T, pushed []Entry, recs []rec, got []Entry) {
	t.Helper()
	// Records' memory, each exactly once.
	isRec := make(map[Entry]bool)
	for _, r := range recs {
		e := Entry{Kind: Unused, Addr: r.addr, Size: r.capBytes}
		if isRec[e] {
			t.Fatalf("record %v listed twice in the stack", r.addr)
		}
		isRec[e] = true
	}
	var rest []Entry
	seen := make(map[Entry]bool)
	for _, e := range got {
		if isRec[e] {
			if seen[e] {
				t.Fatalf("record memory %+v returned twice", e)
			}
			seen[e] = true
			continue
		}
		rest = append(rest, e)
	}
	if len(seen) != len(recs) {
		t.Fatalf("Take returned the memory of %d records of %d", len(seen), len(recs))
	}
	// Entries in the order pushed, each once.
	var pushedUnused, pushedAll []span
	var unusedBytes uint64
	for _, e := range pushed {
		pushedAll = append(pushedAll, spanOf(e.Addr, e.Size))
		if e.Kind == Unused {
			pushedUnused = append(pushedUnused, spanOf(e.Addr, e.Size))
			unusedBytes += e.Size
		}
	}
	if err := disjoint(pushedAll); err != nil {
		t.Fatalf("test bug: pushed entries overlap: %v", err)
	}
	last := -1
	var pieces []span // Unused memory returned: shrunk entries and carved records
	for _, e := range rest {
		i := slices.IndexFunc(pushed, func(p Entry) bool {
			if p.Kind != e.Kind || p.Tau != e.Tau {
				return false
			}
			if p.Kind != Unused {
				return p == e
			}
			// An Unused entry keeps its end; records come out of its start.
			return spanOf(e.Addr, e.Size).inside(spanOf(p.Addr, p.Size)) && uint64(e.Addr)+e.Size == uint64(p.Addr)+p.Size
		})
		if i < 0 {
			t.Fatalf("Take returned %+v, which was not pushed", e)
		}
		if i <= last {
			t.Fatalf("Take returned %+v (pushed at %d) after an entry pushed at %d: out of order or twice", e, i, last)
		}
		last = i
		if e.Kind == Unused {
			pieces = append(pieces, spanOf(e.Addr, e.Size))
		}
	}
	var kept, gotKept int // entries other than Unused
	for _, e := range pushed {
		if e.Kind != Unused {
			kept++
		}
	}
	for _, e := range rest {
		if e.Kind != Unused {
			gotKept++
		}
	}
	if gotKept != kept {
		t.Fatalf("Take returned %d Retired and Free entries, pushed %d", gotKept, kept)
	}
	// Records: carved from pushed Unused memory, or fresh.
	var recSpans []span
	for _, r := range recs {
		s := spanOf(r.addr, r.capBytes)
		recSpans = append(recSpans, s)
		if slices.ContainsFunc(pushedUnused, s.inside) {
			pieces = append(pieces, s)
		} else if slices.ContainsFunc(pushedAll, s.overlaps) {
			t.Fatalf("record %v of %d bytes overlaps a pushed entry without lying in an Unused one", r.addr, r.capBytes)
		}
	}
	if err := disjoint(pieces); err != nil {
		t.Fatalf("Unused memory returned twice: %v", err)
	}
	if err := disjoint(recSpans); err != nil {
		t.Fatalf("records overlap: %v", err)
	}
	var pieceBytes uint64
	for _, s := range pieces {
		pieceBytes += s.hi - s.lo
	}
	if pieceBytes != unusedBytes {
		t.Fatalf("Take returned %d bytes of the %d pushed Unused bytes (entries and records carved from them)", pieceBytes, unusedBytes)
	}
}

// genEntries returns n entries of real memory allocated with src, which no
// record can overlap, of the kinds mode says, Retired and Free ones with
// random Taus; the first, if big > 0, Unused of big bytes.
func genEntries(t *testing.T, src *remote.Client, r *rand.Rand, n int, mode string, big uint64) []Entry {
	t.Helper()
	es := make([]Entry, 0, n)
	for i := range n {
		size := 8 * (1 + r.Uint64N(64))
		kind := Retired
		switch {
		case i == 0 && big > 0:
			kind, size = Unused, big
		case mode == "unused":
			kind = Unused
		case mode == "mixed":
			kind = Unused + Kind(r.IntN(3))
		case mode == "tiny":
			kind, size = Unused, 8
		}
		e := Entry{Kind: kind, Addr: alloc(t, src, size), Size: size}
		if kind != Unused {
			e.Tau = r.Uint64()
		}
		es = append(es, e)
	}
	return es
}

// TestPushTake pushes entries of many counts and kinds and takes them back.
func TestPushTake(t *testing.T) {
	seed := testseed.Seed(t)
	for _, tc := range []struct {
		name string
		n    int
		// "retired", "unused", "mixed" (Unused, Retired, Free), "tiny"
		// (Unused of 8 bytes, too small to carve from)
		mode string
		big  uint64 // if > 0, the first entry is Unused of big bytes
		// carved: every record must be carved from the pushed Unused
		// memory; fresh: none can be.
		carved, fresh bool
		records       int // if > 0, the number of records
	}{
		{name: "none", n: 0, mode: "mixed"},
		{name: "one retired", n: 1, mode: "retired", fresh: true, records: 1},
		{name: "one unused", n: 1, mode: "unused", big: 4096, carved: true, records: 1},
		{name: "eight tiny unused", n: 8, mode: "tiny", fresh: true, records: 1},
		{name: "eight mixed", n: 8, mode: "mixed", records: 1},
		{name: "nine mixed", n: 9, mode: "mixed", big: 1 << 14, carved: true, records: 1},
		{name: "record takes a whole entry", n: 2, mode: "retired", big: uint64(recordBytes(minCapacity)), carved: true, records: 1},
		{name: "2048 retired", n: 2048, mode: "retired", fresh: true, records: 4},
		{name: "2049 retired", n: 2049, mode: "retired", fresh: true, records: 5},
		{name: "2049 retired and a big unused", n: 2050, mode: "retired", big: 64 << 10, carved: true, records: 5},
		{name: "5000 mixed", n: 5000, mode: "mixed"},
		{name: "5000 tiny unused", n: 5000, mode: "tiny", fresh: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			p := newPool(t, true)
			c, head := newHead(t, p, "depot-test")
			src := p.NewComputeNode().NewClient()
			r := rand.New(rand.NewPCG(seed, uint64(tc.n)))
			es := genEntries(t, src, r, tc.n, tc.mode, tc.big)
			orig := slices.Clone(es)
			if err := Push(ctx, c, head, es); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(es, orig) {
				t.Fatal("Push modified its argument")
			}
			recs := walk(t, c, head)
			if tc.n == 0 && len(recs) != 0 {
				t.Fatalf("Push of nothing published %d records", len(recs))
			}
			if tc.records > 0 && len(recs) != tc.records {
				t.Errorf("%d records, want %d", len(recs), tc.records)
			}
			chunk := p.Config().ChunkBytes
			var count int
			for i, r := range recs {
				count += r.n
				if int64(r.capBytes)+8 > chunk/4 {
					t.Errorf("record %d: %d bytes, more than a small allocation (%d)", i, r.capBytes, chunk/4-8)
				}
				in := slices.ContainsFunc(orig, func(e Entry) bool {
					return e.Kind == Unused && spanOf(r.addr, r.capBytes).inside(spanOf(e.Addr, e.Size))
				})
				if tc.carved && !in {
					t.Errorf("record %d at %v not carved from the Unused memory pushed", i, r.addr)
				}
				if tc.fresh && in {
					t.Errorf("record %d at %v carved from pushed memory", i, r.addr)
				}
			}
			got, err := Take(ctx, c, head)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != count+len(recs) {
				t.Errorf("Take returned %d entries, the records hold %d and there are %d records", len(got), count, len(recs))
			}
			checkTaken(t, orig, recs, got)
			if w := readWord(t, c, head); w != 0 {
				t.Fatalf("head is %#x after Take", w)
			}
			again, err := Take(ctx, c, head)
			if err != nil || len(again) != 0 {
				t.Fatalf("second Take: %d entries, %v", len(again), err)
			}
		})
	}
}

// TestTakeOrder checks that Take returns the entries of the most recent
// Push first, then the records' own memory.
func TestTakeOrder(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true)
	c, head := newHead(t, p, "depot-test")
	var pushes [][]Entry
	for i := range 3 {
		var es []Entry
		for j := range 3 {
			es = append(es, Entry{Kind: Retired, Addr: remote.MakeAddr(1, uint64(1<<20+64*(3*i+j))), Size: 64, Tau: uint64(i)})
		}
		if err := Push(ctx, c, head, es); err != nil {
			t.Fatal(err)
		}
		pushes = append(pushes, es)
	}
	recs := walk(t, c, head)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	var want []Entry
	for i := range 3 {
		want = append(want, pushes[2-i]...)
	}
	for _, r := range recs {
		want = append(want, Entry{Kind: Unused, Addr: r.addr, Size: r.capBytes})
	}
	got, err := Take(ctx, c, head)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Take:\n got %+v\nwant %+v", got, want)
	}
}

// TestPushRefuses checks that Push refuses entries of no size, of a size
// beyond 56 bits or of an unknown kind with remote.ErrBadRequest, and
// publishes, allocates and writes nothing then.
func TestPushRefuses(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true)
	c, head := newHead(t, p, "depot-test")
	src := p.NewComputeNode().NewClient()
	// Unused memory Push would carve a record from, filled with a pattern.
	big := Entry{Kind: Unused, Addr: alloc(t, src, 4096), Size: 4096}
	pattern := bytes.Repeat([]byte{0xa5}, 4096)
	if err := src.Write(ctx, big.Addr, pattern); err != nil {
		t.Fatal(err)
	}
	good := Entry{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 64, Tau: 3}
	for _, tc := range []struct {
		name string
		bad  Entry
	}{
		{"zero size", Entry{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 0}},
		{"zero size unused", Entry{Kind: Unused, Addr: remote.MakeAddr(1, 1<<20), Size: 0}},
		{"kind 0", Entry{Kind: 0, Addr: remote.MakeAddr(1, 1<<20), Size: 64}},
		{"kind past Free", Entry{Kind: Free + 1, Addr: remote.MakeAddr(1, 1<<20), Size: 64}},
		{"kind 255", Entry{Kind: 255, Addr: remote.MakeAddr(1, 1<<20), Size: 64}},
		{"size past 56 bits", Entry{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 1 << 56}},
	} {
		for _, es := range [][]Entry{{tc.bad}, {big, good, tc.bad}, {tc.bad, big, good}} {
			before := c.Stats().AllocBytes
			err := Push(ctx, c, head, es)
			if !errors.Is(err, remote.ErrBadRequest) {
				t.Errorf("%s (%d entries): Push: %v, want %v", tc.name, len(es), err, remote.ErrBadRequest)
			}
			if w := readWord(t, c, head); w != 0 {
				t.Fatalf("%s: head is %#x after a refused Push", tc.name, w)
			}
			if after := c.Stats().AllocBytes; after != before {
				t.Errorf("%s: a refused Push allocated %d bytes", tc.name, after-before)
			}
			buf := make([]byte, 4096)
			if err := src.Read(ctx, big.Addr, buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, pattern) {
				t.Fatalf("%s: a refused Push wrote into its Unused memory", tc.name)
			}
		}
	}
	if got, err := Take(ctx, c, head); err != nil || len(got) != 0 {
		t.Fatalf("Take after refused Pushes: %d entries, %v", len(got), err)
	}
}

// TestPushRefusesNil checks that Push refuses an entry at the nil address,
// which Take's decodeEntries rejects as corrupt.
func TestPushRefusesNil(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true)
	c, head := newHead(t, p, "depot-test")
	older := []Entry{{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 64, Tau: 1}}
	if err := Push(ctx, c, head, older); err != nil {
		t.Fatal(err)
	}
	err := Push(ctx, c, head, []Entry{{Kind: Retired, Addr: 0, Size: 64, Tau: 2}})
	if !errors.Is(err, remote.ErrBadRequest) {
		t.Errorf("Push of an entry at nil: %v, want %v", err, remote.ErrBadRequest)
	}
	got, err := Take(ctx, c, head)
	if err != nil || len(got) != 2 || got[0] != older[0] {
		t.Fatalf("Take: %+v, %v, want the older Push's entry and record", got, err)
	}
}

// TestPushTakeConcurrent runs clients of several compute nodes that push
// and take concurrently; a final Take empties the depot. Every entry
// pushed is taken exactly once overall. With the local transport the
// clients are goroutines (for -race); in the simulator they are simulated
// threads whose verbs interleave, so that CASes on the head fail often.
func TestPushTakeConcurrent(t *testing.T) {
	seed := testseed.Seed(t)
	for _, sim := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "sim"}[sim], func(t *testing.T) {
			pushTakeConcurrent(t, seed, sim)
		})
	}
}

func pushTakeConcurrent(t *testing.T, seed uint64, sim bool) {
	ctx := t.Context()
	var p *remote.Pool
	if sim {
		var err error
		if p, err = remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 4 << 20, Sim: &remote.SimConfig{Seed: seed}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
	} else {
		p = newPool(t, false)
	}
	_, head := newHead(t, p, "depot-test")
	const nodes, clients, rounds = 3, 2, 150
	type result struct{ pushed, taken []Entry }
	results := make([]result, nodes*clients)
	var wg sync.WaitGroup
	start := make(chan struct{}) // local: so that the clients' rounds overlap
	spawn := wg.Go
	if sim {
		spawn = p.Go
		close(start)
	}
	for n := range nodes {
		cn := p.NewComputeNode()
		for k := range clients {
			id := n*clients + k
			c := cn.NewClient()
			spawn(func() {
				res := &results[id]
				r := rand.New(rand.NewPCG(seed, uint64(id)))
				// Each round's entries, allocated before the rounds start so
				// that they contend for the head.
				batches := make([][]Entry, rounds)
				for round := range batches {
					for range r.IntN(12) {
						size := 8 * (1 + r.Uint64N(80))
						a, err := c.Alloc(ctx, int(size))
						if err != nil {
							t.Error(err)
							return
						}
						e := Entry{Kind: Unused, Addr: a, Size: size}
						if k := r.IntN(3); k > 0 {
							e.Kind, e.Tau = Unused+Kind(k), uint64(id)<<32|uint64(round)
						}
						batches[round] = append(batches[round], e)
					}
				}
				<-start
				for _, es := range batches {
					if err := Push(ctx, c, head, es); err != nil {
						t.Error(err)
						return
					}
					res.pushed = append(res.pushed, es...)
					if r.IntN(3) == 0 {
						got, err := Take(ctx, c, head)
						if err != nil {
							t.Error(err)
							return
						}
						res.taken = append(res.taken, got...)
					}
				}
			})
		}
	}
	if sim {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	} else {
		close(start)
		wg.Wait()
	}
	if t.Failed() {
		return
	}
	final := p.NewComputeNode().NewClient()
	got, err := Take(ctx, final, head)
	if err != nil {
		t.Fatal(err)
	}
	var pushed, taken []Entry
	for _, res := range results {
		pushed = append(pushed, res.pushed...)
		taken = append(taken, res.taken...)
	}
	taken = append(taken, got...)
	if again, err := Take(ctx, final, head); err != nil || len(again) != 0 {
		t.Fatalf("Take after the final one: %d entries, %v", len(again), err)
	}

	// Retired and Free entries: each exactly once.
	want := make(map[Entry]int)
	var pushedAll, pushedUnused []span
	var unusedBytes uint64
	for _, e := range pushed {
		pushedAll = append(pushedAll, spanOf(e.Addr, e.Size))
		if e.Kind != Unused {
			want[e]++
		} else {
			pushedUnused = append(pushedUnused, spanOf(e.Addr, e.Size))
			unusedBytes += e.Size
		}
	}
	var unused []span
	for _, e := range taken {
		if e.Kind != Unused {
			if want[e] != 1 {
				t.Fatalf("entry %+v taken but not pushed, or taken twice", e)
			}
			want[e]--
			continue
		}
		unused = append(unused, spanOf(e.Addr, e.Size))
	}
	for e, n := range want {
		if n != 0 {
			t.Fatalf("entry %+v pushed but never taken", e)
		}
	}
	// Unused memory: pieces of the pushed Unused memory, or records
	// allocated fresh, never twice, covering every pushed Unused byte.
	if err := disjoint(unused); err != nil {
		t.Fatalf("Unused memory taken twice: %v", err)
	}
	var covered uint64
	for _, s := range unused {
		switch {
		case slices.ContainsFunc(pushedUnused, s.inside):
			covered += s.hi - s.lo
		case slices.ContainsFunc(pushedAll, s.overlaps):
			t.Fatalf("Unused extent [%#x, %#x) taken overlaps pushed memory it does not lie in", s.lo, s.hi)
		}
	}
	if covered != unusedBytes {
		t.Fatalf("%d bytes of the %d pushed Unused bytes taken", covered, unusedBytes)
	}
	t.Logf("%d entries pushed, %d taken (records included), %d CASes failed", len(pushed), len(taken), p.Stats().CASFailures)
}

// pushTwo pushes two batches of 10 Retired entries and returns them with
// the records, the second batch's first.
func pushTwo(t *testing.T, c *remote.Client, head remote.Addr) (first, second []Entry, recs []rec) {
	t.Helper()
	for i := range 20 {
		e := Entry{Kind: Retired, Addr: remote.MakeAddr(1, uint64(1<<20+64*i)), Size: 64, Tau: uint64(i)}
		if i < 10 {
			first = append(first, e)
		} else {
			second = append(second, e)
		}
	}
	for _, es := range [][]Entry{first, second} {
		if err := Push(t.Context(), c, head, es); err != nil {
			t.Fatal(err)
		}
	}
	recs = walk(t, c, head)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	return first, second, recs
}

// TestTakeCorrupt checks that a record that does not decode ends Take with
// ErrCorrupt and the entries of the records before it.
func TestTakeCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  int // the record corrupted: 0 the newest
		word int // the word of the record overwritten
		val  uint64
	}{
		{"capacity 0", 1, 1, 10},
		{"capacity below the minimum", 1, 1, 7<<32 | 5},
		{"capacity above the maximum", 1, 1, 4096<<32 | 10},
		{"more entries than capacity", 1, 1, 16<<32 | 17},
		{"first record corrupt", 0, 1, 0},
		// Words 2+3*i, 3+3*i hold entry i's address, and size and kind.
		{"first entry of kind 0", 1, 3, 64},
		{"first entry at nil", 1, 2, 0},
		{"fourth entry of kind 0", 1, 12, 64},
		{"fourth entry of kind past Free", 1, 12, uint64(Free+1)<<56 | 64},
		{"fourth entry of size 0", 1, 12, uint64(Retired) << 56},
		{"fourth entry at nil", 1, 11, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			p := newPool(t, true)
			c, head := newHead(t, p, "depot-test")
			_, second, recs := pushTwo(t, c, head)
			writeWord(t, c, recs[tc.rec].addr.Add(8*uint64(tc.word)), tc.val)
			got, err := Take(ctx, c, head)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Take: %v, want %v", err, ErrCorrupt)
			}
			var want []Entry
			if tc.rec == 1 {
				want = append(slices.Clone(second), Entry{Kind: Unused, Addr: recs[0].addr, Size: recs[0].capBytes})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Take:\n got %+v\nwant %+v", got, want)
			}
			if w := readWord(t, c, head); w != 0 {
				t.Fatalf("head is %#x after a Take that failed", w)
			}
		})
	}
}

// TestTakeCycle checks that a stack whose record links to itself ends Take
// with ErrCorrupt instead of looping for ever, and returns the record's
// memory once.
func TestTakeCycle(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, false)
	c, head := newHead(t, p, "depot-test")
	es := []Entry{{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 64, Tau: 1}}
	if err := Push(ctx, c, head, es); err != nil {
		t.Fatal(err)
	}
	recs := walk(t, c, head)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	writeWord(t, c, r.addr, uint64(r.addr))           // next: itself
	writeWord(t, c, r.addr.Add(8), uint64(r.cap)<<32) // no entries
	got, err := Take(ctx, c, head)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Take: %d entries, %v, want %v", len(got), err, ErrCorrupt)
	}
	if w := readWord(t, c, head); w != 0 {
		t.Fatalf("head is %#x after Take", w)
	}
	want := []Entry{{Kind: Unused, Addr: r.addr, Size: r.capBytes}}
	if !slices.Equal(got, want) {
		t.Fatalf("Take of a cycle:\n got %+v\nwant %+v", got, want)
	}
}

// TestRecordHeader checks decodeHeader's bounds.
func TestRecordHeader(t *testing.T) {
	hdr := func(next, w uint64) []byte {
		b := binary.LittleEndian.AppendUint64(nil, next)
		return binary.LittleEndian.AppendUint64(b, w)
	}
	for _, tc := range []struct {
		name        string
		b           []byte
		n, cap      int
		next        remote.Addr
		wantCorrupt bool
	}{
		{"empty", nil, 0, 0, 0, true},
		{"short", make([]byte, 15), 0, 0, 0, true},
		{"zeros", make([]byte, 16), 0, 0, 0, true},
		{"capacity 7", hdr(0, 7<<32), 0, 0, 0, true},
		{"capacity 8, empty", hdr(0, 8<<32), 0, 8, 0, false},
		{"capacity 8, full", hdr(0x1_0000_0000_1000, 8<<32|8), 8, 8, 0x1_0000_0000_1000, false},
		{"capacity 8, 9 entries", hdr(0, 8<<32|9), 0, 0, 0, true},
		{"capacity 2048", hdr(5, 2048<<32|2048), 2048, 2048, 5, false},
		{"capacity 2049", hdr(0, 2049<<32|1), 0, 0, 0, true},
		{"capacity 2^32-1", hdr(0, 0xffff_ffff<<32|1), 0, 0, 0, true},
		{"count 2^32-1", hdr(0, 16<<32|0xffff_ffff), 0, 0, 0, true},
		{"longer buffer", append(hdr(9, 16<<32|3), 1, 2, 3), 3, 16, 9, false},
	} {
		next, n, capacity, err := decodeHeader(tc.b)
		if tc.wantCorrupt {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: decodeHeader = %v, %d, %d, %v, want %v", tc.name, next, n, capacity, err, ErrCorrupt)
			}
			continue
		}
		if err != nil || next != tc.next || n != tc.n || capacity != tc.cap {
			t.Errorf("%s: decodeHeader = %v, %d, %d, %v, want %v, %d, %d", tc.name, next, n, capacity, err, tc.next, tc.n, tc.cap)
		}
	}
}

// TestRecordEntries checks which entries decodeEntries accepts.
func TestRecordEntries(t *testing.T) {
	ok := []Entry{
		{Kind: Unused, Addr: remote.MakeAddr(0, 4096), Size: 1},
		{Kind: Retired, Addr: remote.MakeAddr(1, 8192), Size: sizeMask, Tau: ^uint64(0)},
		{Kind: Free, Addr: 1, Size: 64, Tau: 3},
	}
	raw := func(es []Entry) []byte {
		b := make([]byte, recordBytes(minCapacity))
		encode(b, 0, minCapacity, es)
		return b[headerBytes : headerBytes+entryBytes*len(es)]
	}
	prefix := []Entry{{Kind: Retired, Addr: 9, Size: 9}} // es given: kept
	for _, tc := range []struct {
		name string
		b    []byte
		n    int
		want []Entry // nil: ErrCorrupt
	}{
		{"none", nil, 0, prefix},
		{"valid", raw(ok), 3, append(slices.Clone(prefix), ok...)},
		{"fewer than the bytes hold", raw(ok), 2, append(slices.Clone(prefix), ok[:2]...)},
		{"bytes short", raw(ok)[:3*entryBytes-1], 3, nil},
		{"kind 0", raw([]Entry{{Kind: 0, Addr: 1, Size: 1}}), 1, nil},
		{"kind past Free", raw([]Entry{{Kind: Free + 1, Addr: 1, Size: 1}}), 1, nil},
		{"kind 255", raw([]Entry{{Kind: 255, Addr: 1, Size: 1}}), 1, nil},
		{"nil address", raw([]Entry{{Kind: Retired, Addr: 0, Size: 1}}), 1, nil},
		{"size 0", raw([]Entry{{Kind: Retired, Addr: 1, Size: 0}}), 1, nil},
		{"bad after good", raw(append(slices.Clone(ok), Entry{Kind: Unused, Addr: 0, Size: 8})), 4, nil},
	} {
		got, err := decodeEntries(slices.Clone(prefix), tc.b, tc.n)
		if tc.want == nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: decodeEntries = %+v, %v, want %v", tc.name, got, err, ErrCorrupt)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: decodeEntries = %+v, %v, want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestRecordCapacityFor checks record capacities: powers of two from minCapacity
// to maxCapacity, enough for n entries when the limit allows.
func TestRecordCapacityFor(t *testing.T) {
	const big = 1 << 30
	for _, tc := range []struct {
		n     int
		limit int64
		want  int
	}{
		{0, big, 8},
		{1, big, 8},
		{8, big, 8},
		{9, big, 16},
		{16, big, 16},
		{17, big, 32},
		{1000, big, 1024},
		{2048, big, 2048},
		{2049, big, 2048},
		{5000, big, 2048},
		{9, 0, 8},                            // below the minimum: the minimum
		{9, int64(recordBytes(16)) - 1, 8},   // 16 does not fit
		{9, int64(recordBytes(16)), 16},      // 16 fits exactly
		{5000, int64(recordBytes(512)), 512}, // the limit caps it
		{5000, int64(recordBytes(1024)) - 1, 512}, // 1024 just does not fit
		{5000, 16<<10 - 8, 512},                   // 64 KiB chunks
	} {
		if got := capacityFor(tc.n, tc.limit); got != tc.want {
			t.Errorf("capacityFor(%d, %d) = %d, want %d", tc.n, tc.limit, got, tc.want)
		}
	}
}

// TestRecordCarve checks that records are carved from the start of the first
// Unused entry with room, and never from a Retired or Free one.
func TestRecordCarve(t *testing.T) {
	a := func(off uint64) remote.Addr { return remote.MakeAddr(1, off) }
	for _, tc := range []struct {
		name string
		es   []Entry
		n    uint64
		want remote.Addr
		rest []Entry
	}{
		{"none", nil, 208, 0, nil},
		{"retired and free only", []Entry{{Kind: Retired, Addr: a(4096), Size: 1000}, {Kind: Free, Addr: a(8192), Size: 1000}}, 208, 0,
			[]Entry{{Kind: Retired, Addr: a(4096), Size: 1000}, {Kind: Free, Addr: a(8192), Size: 1000}}},
		{"too small", []Entry{{Kind: Unused, Addr: a(4096), Size: 207}}, 208, 0,
			[]Entry{{Kind: Unused, Addr: a(4096), Size: 207}}},
		{"exact", []Entry{{Kind: Unused, Addr: a(4096), Size: 208}}, 208, a(4096),
			[]Entry{{Kind: Unused, Addr: a(4096 + 208), Size: 0}}},
		{"first with room", []Entry{
			{Kind: Retired, Addr: a(8192), Size: 1000},
			{Kind: Unused, Addr: a(4096), Size: 100},
			{Kind: Unused, Addr: a(16384), Size: 1000, Tau: 7},
			{Kind: Unused, Addr: a(32768), Size: 1000},
		}, 208, a(16384), []Entry{
			{Kind: Retired, Addr: a(8192), Size: 1000},
			{Kind: Unused, Addr: a(4096), Size: 100},
			{Kind: Unused, Addr: a(16384 + 208), Size: 792, Tau: 7},
			{Kind: Unused, Addr: a(32768), Size: 1000},
		}},
	} {
		es := slices.Clone(tc.es)
		if got := carve(es, tc.n); got != tc.want {
			t.Errorf("%s: carve = %v, want %v", tc.name, got, tc.want)
		}
		if !slices.Equal(es, tc.rest) {
			t.Errorf("%s: entries after carve:\n got %+v\nwant %+v", tc.name, es, tc.rest)
		}
	}
}

// TestLeftoversReuse checks that Leftovers lists the rest of the clients'
// chunks and the compute node's spares as Unused entries, and that Reuse
// gives the Unused entries to a compute node and returns the others.
func TestLeftoversReuse(t *testing.T) {
	ctx := t.Context()
	p := newPool(t, true)
	chunk := uint64(p.Config().ChunkBytes)
	cn := p.NewComputeNode()
	c1, c2 := cn.NewClient(), cn.NewClient()
	var last [2]remote.Addr
	for mn := range 2 {
		for range 3 {
			a, err := c1.AllocOn(ctx, mn, 100, 8)
			if err != nil {
				t.Fatal(err)
			}
			last[mn] = a
		}
	}
	// A spare: the rest of another compute node's chunk.
	o := p.NewComputeNode().NewClient()
	oa := alloc(t, o, 64)
	ox := o.Leftovers()
	if len(ox) != 1 || ox[0].Addr != oa.Add(64) {
		t.Fatalf("other client's Leftovers = %+v after an allocation at %v", ox, oa)
	}
	if err := cn.Reuse(ox[0]); err != nil {
		t.Fatal(err)
	}
	given := []Entry{{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 8, Tau: 1}, {Kind: Free, Addr: remote.MakeAddr(1, 2<<20), Size: 8, Tau: 2}}
	es := leftovers(slices.Clone(given), cn, c1, c2)
	if len(es) != 5 || !slices.Equal(es[:2], given) {
		t.Fatalf("Leftovers = %+v, want the entries given, two chunks' rests and a spare", es)
	}
	for mn := range 2 {
		e := es[2+mn]
		if e.Kind != Unused || e.Addr != last[mn].Add(100) || e.Tau != 0 {
			t.Errorf("Leftovers entry %d = %+v, want Unused at %v", 2+mn, e, last[mn].Add(100))
		}
		// The chunk is 64-byte aligned and ends chunk bytes after its start,
		// where the first of the three allocations is.
		if end := uint64(e.Addr) + e.Size; end != uint64(last[mn])-208+chunk {
			t.Errorf("Leftovers entry %d ends at %#x, want %#x", 2+mn, end, uint64(last[mn])-208+chunk)
		}
	}
	if want := (Entry{Kind: Unused, Addr: ox[0].Addr, Size: ox[0].Size}); es[4] != want {
		t.Errorf("Leftovers spare = %+v, want %+v", es[4], want)
	}
	if cn.SpareBytes() != 0 {
		t.Errorf("SpareBytes = %d after Leftovers took the spares", cn.SpareBytes())
	}
	if again := leftovers(nil, cn, c1, c2); len(again) != 0 {
		t.Errorf("second Leftovers = %+v, want none", again)
	}

	next := p.NewComputeNode()
	bad := Entry{Kind: Unused, Addr: remote.MakeAddr(7, 4096), Size: 64} // not in the pool: dropped
	rest := Reuse(next, append(slices.Clone(es), bad))
	if want := es[:2]; !slices.Equal(rest, want) {
		t.Errorf("Reuse returned %+v, want %+v", rest, want)
	}
	var want uint64
	for _, e := range es[2:] {
		want += e.Size
	}
	if got := next.SpareBytes(); got != want {
		t.Errorf("SpareBytes after Reuse = %d, want %d", got, want)
	}
}

// TestHandOnKeepsNothing checks that HandOn hands on every byte of the
// chunks its client held or fetched for records: a compute node that
// gave its Unused memory away before pushing 3,000 entries needs 72 KB of
// records, more than the rest of its chunk, and the chunk its allocations
// fetch must not be lost with it (Push alone keeps its rest in the client,
// which is closing: 57 KB of 131 KB).
func TestHandOnKeepsNothing(t *testing.T) {
	ctx := t.Context()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20, ChunkBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, head := newHead(t, p, "depot-test")
	if _, err := c.Alloc(ctx, 8); err != nil { // the client's chunk, 8 bytes used
		t.Fatal(err)
	}
	used := func() uint64 {
		u, err := p.MemoryUsed()
		if err != nil {
			t.Fatal(err)
		}
		return u[0]
	}
	before := used()
	var es []Entry
	for i := range 3000 {
		es = append(es, Entry{Kind: Retired, Addr: remote.MakeAddr(0, uint64(1<<20+64*i)), Size: 64, Tau: 1})
	}
	if err := HandOn(ctx, c.ComputeNode(), []*remote.Client{c}, head, es); err != nil {
		t.Fatal(err)
	}
	if rest := c.Leftovers(); len(rest) != 0 {
		t.Errorf("the client still holds %v after HandOn", rest)
	}
	got, err := Take(ctx, c, head)
	if err != nil {
		t.Fatal(err)
	}
	var unused uint64
	for _, e := range got {
		if e.Kind == Unused {
			unused += e.Size
		}
	}
	held := 64<<10 - 8 + used() - before // the chunk's rest, and what HandOn fetched
	t.Logf("held %d bytes, handed on %d (records included)", held, unused)
	// A chunk's rest too small for the next record stays behind when a
	// client moves to a new chunk (remote.Client.Alloc): up to a record.
	if unused+16<<10 < held {
		t.Errorf("%d bytes held or fetched, %d handed on: %d lost", held, unused, held-unused)
	}
}
