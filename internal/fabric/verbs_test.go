//go:build fabric

package fabric

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/internal/testseed"
)

// word reads the 8-byte word at off of mem.
func word(mem []byte, off uint64) uint64 { return binary.LittleEndian.Uint64(mem[off:]) }

// pattern returns n bytes of a recognisable pattern starting at seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// TestVerbSemantics checks each verb against the server's memory, which the
// test process can see directly: WRITE and READ at any size and alignment
// (partial words, several KB), CAS that swaps and that fails, FAA with
// carry and wrap-around, and a second region with its own key.
func TestVerbSemantics(t *testing.T) {
	s, mems := startServer(t, 64<<10, 4096)
	c := dial(t, s.Addr())
	r := s.Regions()
	tests := []struct {
		name   string
		region int
		init   func(mem []byte)                         // sets the memory before the batch
		ops    func(r Region) []Op                      // the batch
		check  func(t *testing.T, mem []byte, ops []Op) // memory and results after
	}{
		{
			name: "write-read-word",
			ops: func(r Region) []Op {
				return []Op{{Kind: OpWrite, Region: r, Off: 64, Buf: pattern(8, 1)}, {Kind: OpRead, Region: r, Off: 64, Buf: make([]byte, 8)}}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if !bytes.Equal(mem[64:72], pattern(8, 1)) || !bytes.Equal(ops[1].Buf, pattern(8, 1)) {
					t.Errorf("memory %x, read %x, want %x", mem[64:72], ops[1].Buf, pattern(8, 1))
				}
			},
		},
		{
			name: "partial-word-write",
			init: func(mem []byte) { copy(mem[128:144], bytes.Repeat([]byte{0xee}, 16)) },
			ops: func(r Region) []Op {
				return []Op{{Kind: OpWrite, Region: r, Off: 133, Buf: []byte{1, 2, 3}}}
			},
			check: func(t *testing.T, mem []byte, _ []Op) {
				want := bytes.Repeat([]byte{0xee}, 16)
				copy(want[5:], []byte{1, 2, 3})
				if !bytes.Equal(mem[128:144], want) {
					t.Errorf("memory %x, want %x", mem[128:144], want)
				}
			},
		},
		{
			name: "partial-word-read",
			init: func(mem []byte) { copy(mem[256:272], pattern(16, 9)) },
			ops: func(r Region) []Op {
				return []Op{{Kind: OpRead, Region: r, Off: 259, Buf: make([]byte, 5)}}
			},
			check: func(t *testing.T, _ []byte, ops []Op) {
				if want := pattern(16, 9)[3:8]; !bytes.Equal(ops[0].Buf, want) {
					t.Errorf("read %x, want %x", ops[0].Buf, want)
				}
			},
		},
		{
			name: "multi-KB-unaligned",
			ops: func(r Region) []Op {
				return []Op{
					{Kind: OpWrite, Region: r, Off: 1003, Buf: pattern(20000, 3)},
					{Kind: OpRead, Region: r, Off: 1003, Buf: make([]byte, 20000)},
				}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if !bytes.Equal(mem[1003:21003], pattern(20000, 3)) || !bytes.Equal(ops[1].Buf, pattern(20000, 3)) {
					t.Error("20000-byte WRITE/READ mismatch")
				}
				if mem[1002] != 0 || mem[21003] != 0 {
					t.Errorf("bytes around the write changed: %x %x", mem[1002], mem[21003])
				}
			},
		},
		{
			name: "cas-swaps",
			init: func(mem []byte) { binary.LittleEndian.PutUint64(mem[512:], 7) },
			ops: func(r Region) []Op {
				return []Op{{Kind: OpCAS, Region: r, Off: 512, Compare: 7, Swap: 1 << 63}}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if ops[0].Old != 7 || !ops[0].Succeeded() || word(mem, 512) != 1<<63 {
					t.Errorf("old %d, word %#x, want 7 and 1<<63", ops[0].Old, word(mem, 512))
				}
			},
		},
		{
			name: "cas-fails",
			init: func(mem []byte) { binary.LittleEndian.PutUint64(mem[520:], 7) },
			ops: func(r Region) []Op {
				return []Op{{Kind: OpCAS, Region: r, Off: 520, Compare: 8, Swap: 9}}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if ops[0].Old != 7 || ops[0].Succeeded() || word(mem, 520) != 7 {
					t.Errorf("old %d, word %d, want 7 and 7", ops[0].Old, word(mem, 520))
				}
			},
		},
		{
			name: "faa-carry-and-wrap",
			init: func(mem []byte) {
				binary.LittleEndian.PutUint64(mem[528:], 0xffffffff)
				binary.LittleEndian.PutUint64(mem[536:], 5)
			},
			ops: func(r Region) []Op {
				return []Op{
					{Kind: OpFAA, Region: r, Off: 528, Swap: 1},
					{Kind: OpFAA, Region: r, Off: 536, Swap: ^uint64(1)}, // -2
				}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if ops[0].Old != 0xffffffff || word(mem, 528) != 1<<32 {
					t.Errorf("carry: old %#x, word %#x", ops[0].Old, word(mem, 528))
				}
				if ops[1].Old != 5 || word(mem, 536) != 3 {
					t.Errorf("wrap: old %d, word %d, want 5 and 3", ops[1].Old, word(mem, 536))
				}
			},
		},
		{
			name:   "second-region",
			region: 1,
			init:   func(mem []byte) { binary.LittleEndian.PutUint64(mem[4088:], 40) },
			ops: func(r Region) []Op {
				return []Op{
					{Kind: OpFAA, Region: r, Off: 4088, Swap: 2},
					{Kind: OpRead, Region: r, Off: 4080, Buf: make([]byte, 16)},
				}
			},
			check: func(t *testing.T, mem []byte, ops []Op) {
				if ops[0].Old != 40 || word(ops[1].Buf, 8) != 42 || word(mem, 4088) != 42 {
					t.Errorf("old %d, read %d, word %d, want 40, 42, 42", ops[0].Old, word(ops[1].Buf, 8), word(mem, 4088))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := mems[tc.region]
			if tc.init != nil {
				tc.init(mem)
			}
			ops := tc.ops(r[tc.region])
			if err := c.Do(ops); err != nil {
				t.Fatalf("Do: %v", err)
			}
			tc.check(t, mem, ops)
		})
	}
}

// TestBatchOrder runs one batch whose every result depends on the
// operations posted before it in the same batch.
func TestBatchOrder(t *testing.T) {
	s, mem := startServer(t, 4096)
	c := dial(t, s.Addr())
	r := s.Regions()[0]
	le := binary.LittleEndian.AppendUint64
	ops := []Op{
		{Kind: OpWrite, Region: r, Off: 0, Buf: le(nil, 1)},
		{Kind: OpRead, Region: r, Off: 0, Buf: make([]byte, 8)},
		{Kind: OpCAS, Region: r, Off: 0, Compare: 1, Swap: 2},
		{Kind: OpRead, Region: r, Off: 0, Buf: make([]byte, 8)},
		{Kind: OpFAA, Region: r, Off: 0, Swap: 10},
		{Kind: OpWrite, Region: r, Off: 0, Buf: le(nil, 100)},
		{Kind: OpCAS, Region: r, Off: 0, Compare: 12, Swap: 0},
		{Kind: OpFAA, Region: r, Off: 0, Swap: 1},
		{Kind: OpRead, Region: r, Off: 0, Buf: make([]byte, 8)},
	}
	if err := c.Do(ops); err != nil {
		t.Fatal(err)
	}
	got := []uint64{word(ops[1].Buf, 0), ops[2].Old, word(ops[3].Buf, 0), ops[4].Old, ops[6].Old, ops[7].Old, word(ops[8].Buf, 0), word(mem[0], 0)}
	want := []uint64{1, 1, 2, 2, 100, 100, 101, 101}
	if !equalU64(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// randomBatch returns n random operations on the first size bytes of r:
// READs and WRITEs of 1 to 300 bytes at any offset, CAS and FAA on aligned
// words (CAS compares with a recent value half of the time).
func randomBatch(rng *rand.Rand, r Region, size uint64, n int, model []byte) []Op {
	ops := make([]Op, n)
	for i := range ops {
		switch rng.IntN(4) {
		case 0, 1:
			l := 1 + rng.IntN(300)
			off := rng.Uint64N(size - uint64(l) + 1)
			if rng.IntN(2) == 0 {
				ops[i] = Op{Kind: OpRead, Region: r, Off: off, Buf: make([]byte, l)}
			} else {
				ops[i] = Op{Kind: OpWrite, Region: r, Off: off, Buf: pattern(l, byte(rng.Uint32()))}
			}
		case 2:
			off := rng.Uint64N(size/8) * 8
			cmp := rng.Uint64()
			if rng.IntN(2) == 0 {
				cmp = word(model, off)
			}
			ops[i] = Op{Kind: OpCAS, Region: r, Off: off, Compare: cmp, Swap: rng.Uint64()}
		default:
			ops[i] = Op{Kind: OpFAA, Region: r, Off: rng.Uint64N(size/8) * 8, Swap: rng.Uint64N(1000)}
		}
	}
	return ops
}

// applyModel executes ops in posting order on model and returns the
// expected READ contents and Old values.
func applyModel(model []byte, ops []Op) (reads [][]byte, olds []uint64) {
	reads = make([][]byte, len(ops))
	olds = make([]uint64, len(ops))
	for i, o := range ops {
		switch o.Kind {
		case OpRead:
			reads[i] = bytes.Clone(model[o.Off : o.Off+uint64(len(o.Buf))])
		case OpWrite:
			copy(model[o.Off:], o.Buf)
		case OpCAS:
			olds[i] = word(model, o.Off)
			if olds[i] == o.Compare {
				binary.LittleEndian.PutUint64(model[o.Off:], o.Swap)
			}
		case OpFAA:
			olds[i] = word(model, o.Off)
			binary.LittleEndian.PutUint64(model[o.Off:], olds[i]+o.Swap)
		}
	}
	return reads, olds
}

// checkAgainstModel runs random batches of the given sizes on c and compares
// every result and the final memory with the sequential model.
func checkAgainstModel(t *testing.T, c *Conn, r Region, mem []byte, seed uint64, sizes []int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const size = 512
	model := bytes.Clone(mem[:size])
	for b, n := range sizes {
		ops := randomBatch(rng, r, size, n, model)
		reads, olds := applyModel(model, ops)
		if err := c.Do(ops); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		for i, o := range ops {
			switch {
			case o.Kind == OpRead && !bytes.Equal(o.Buf, reads[i]):
				t.Fatalf("batch %d op %d: READ %d bytes at %d got %x, want %x", b, i, len(o.Buf), o.Off, o.Buf, reads[i])
			case (o.Kind == OpCAS || o.Kind == OpFAA) && o.Old != olds[i]:
				t.Fatalf("batch %d op %d: %v at %d old %d, want %d", b, i, o.Kind, o.Off, o.Old, olds[i])
			}
		}
		if !bytes.Equal(mem[:size], model) {
			t.Fatalf("batch %d: memory differs from the model", b)
		}
	}
}

// TestRandomBatchesOracle runs random mixed batches (one operation, a
// round of the window, and batches longer than the window) and checks them
// against a sequential model applied in posting order.
func TestRandomBatchesOracle(t *testing.T) {
	s, mem := startServer(t, 4096)
	c := dial(t, s.Addr())
	checkAgainstModel(t, c, s.Regions()[0], mem[0], testseed.Seed(t), []int{1, 2, 7, 32, 64, c.Window(), c.Window() + 37, 1})
}

// TestStagingRounds forces batches over a small staging buffer: several
// rounds per batch, and a single READ larger than the buffer (which grows).
func TestStagingRounds(t *testing.T) {
	s, mem := startServer(t, 64<<10)
	cfg := testDialConfig(s.Addr())
	cfg.StagingBytes = 1024
	c, err := Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := s.Regions()[0]
	checkAgainstModel(t, c, r, mem[0], testseed.Seed(t), []int{10, 40})
	big := pattern(50000, 5)
	copy(mem[0][1000:], big)
	ops := []Op{{Kind: OpRead, Region: r, Off: 1000, Buf: make([]byte, 50000)}, {Kind: OpFAA, Region: r, Off: 0, Swap: 1}}
	if err := c.Do(ops); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ops[0].Buf, big) {
		t.Error("READ through a grown staging buffer differs")
	}
	if got := len(c.staging); got < 50000 {
		t.Errorf("staging buffer %d bytes after a 50000-byte READ", got)
	}
}

// TestInvalidOps checks that malformed operations are refused before
// anything is posted and leave the connection usable.
func TestInvalidOps(t *testing.T) {
	s, mem := startServer(t, 4096)
	c := dial(t, s.Addr())
	r := s.Regions()[0]
	tests := []struct {
		name string
		op   Op
	}{
		{"empty-read", Op{Kind: OpRead, Region: r}},
		{"empty-write", Op{Kind: OpWrite, Region: r, Buf: []byte{}}},
		{"misaligned-cas", Op{Kind: OpCAS, Region: r, Off: 4}},
		{"misaligned-faa", Op{Kind: OpFAA, Region: r, Off: 9}},
		{"unknown-kind", Op{Kind: 9, Region: r}},
		{"zero-kind", Op{Region: r, Buf: make([]byte, 8)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := []Op{{Kind: OpFAA, Region: r, Off: 0, Swap: 1}, tc.op}
			if err := c.Do(ops); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Do = %v, want ErrInvalid", err)
			}
			if word(mem[0], 0) != 0 {
				t.Fatal("an operation of a refused batch was posted")
			}
		})
	}
	if err := c.Do([]Op{{Kind: OpFAA, Region: r, Swap: 1}}); err != nil {
		t.Fatalf("valid Do after refused ones: %v", err)
	}
}
