package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/testseed"
)

func TestVerbSemantics(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: 1 << 20})
			c := p.NewComputeNode().NewClient()
			const size = 4096
			a, err := c.AllocOn(ctx, 0, size, 64)
			if err != nil {
				t.Fatal(err)
			}
			oracle := make([]byte, size)

			t.Run("read-write-alignments", func(t *testing.T) {
				cases := []struct{ off, n int }{
					{0, 8}, {3, 13}, {7, 1}, {8, 64}, {61, 70}, {63, 2}, {1, 4095},
					{100, 0}, {1000, 257}, {4088, 8}, {4095, 1}, {9, 7}, {130, 200},
				}
				for i, cs := range cases {
					data := make([]byte, cs.n)
					for j := range data {
						data[j] = byte(i*31 + j*7 + 1)
					}
					if err := c.Write(ctx, a.Add(uint64(cs.off)), data); err != nil {
						t.Fatalf("write %+v: %v", cs, err)
					}
					copy(oracle[cs.off:], data)
					// Read back the written span and a wider window around it.
					for _, r := range []struct{ off, n int }{cs, {max(cs.off-5, 0), min(cs.n+11, size-max(cs.off-5, 0))}} {
						got := make([]byte, r.n)
						if err := c.Read(ctx, a.Add(uint64(r.off)), got); err != nil {
							t.Fatalf("read %+v: %v", r, err)
						}
						if want := oracle[r.off : r.off+r.n]; !bytes.Equal(got, want) {
							t.Fatalf("after write %+v, read %+v = %x, want %x", cs, r, got, want)
						}
					}
				}
				whole := make([]byte, size)
				if err := c.Read(ctx, a, whole); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(whole, oracle) {
					t.Fatal("region differs from the oracle")
				}
			})

			t.Run("atomics", func(t *testing.T) {
				w := a.Add(2048)
				if err := c.Write(ctx, w, make([]byte, 8)); err != nil {
					t.Fatal(err)
				}
				steps := []struct {
					op      Op
					wantOld uint64
					swapped bool
				}{
					{CAS(w, 0, 5), 0, true},
					{CAS(w, 0, 7), 5, false},
					{CAS(w, 5, 1<<63), 5, true},
					{FAA(w, 10), 1 << 63, false},
					{FAA(w, ^uint64(0)), 1<<63 + 10, false}, // adds -1, wrapping
					{CAS(w, 1<<63+9, 42), 1<<63 + 9, true},
				}
				for i, st := range steps {
					ops := []Op{st.op}
					if err := c.Do(ctx, ops); err != nil {
						t.Fatal(err)
					}
					if ops[0].Old != st.wantOld || ops[0].Succeeded() != st.swapped {
						t.Fatalf("step %d %v: old %d swapped %v, want %d %v", i, st.op.Kind, ops[0].Old,
							ops[0].Succeeded(), st.wantOld, st.swapped)
					}
				}
				got := make([]byte, 8)
				if err := c.Read(ctx, w, got); err != nil {
					t.Fatal(err)
				}
				if v := binary.LittleEndian.Uint64(got); v != 42 {
					t.Fatalf("word = %d, want 42", v)
				}
				chip := OnChip(1, 64)
				if old, err := c.CAS(ctx, chip, 0, 9); err != nil || old != 0 {
					t.Fatalf("on-chip CAS: old %d, %v", old, err)
				}
				if old, err := c.FAA(ctx, chip, 1); err != nil || old != 9 {
					t.Fatalf("on-chip FAA: old %d, %v", old, err)
				}
			})

			t.Run("batch-in-order", func(t *testing.T) {
				x, y := a.Add(3000), a.Add(3200)
				other, err := c.AllocOn(ctx, 1, 256, 64)
				if err != nil {
					t.Fatal(err)
				}
				data := bytes.Repeat([]byte("0123456789abcdef"), 12) // 192 bytes: 3+ lines
				buf, buf2, buf3, buf4 := make([]byte, len(data)), make([]byte, 8), make([]byte, 8), make([]byte, len(data))
				if err := c.Write(ctx, y, make([]byte, 8)); err != nil {
					t.Fatal(err)
				}
				ops := []Op{
					Write(x, data),
					Read(x, buf),
					CAS(y, 0, 1),
					Read(y, buf2),
					FAA(y, 2),
					Write(other, data[:100]),
					Read(y, buf3),
					Read(other, buf4[:100]),
				}
				if err := c.Do(ctx, ops); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, data) {
					t.Fatalf("READ after WRITE in one batch saw %q", buf)
				}
				if ops[2].Old != 0 || binary.LittleEndian.Uint64(buf2) != 1 || ops[4].Old != 1 ||
					binary.LittleEndian.Uint64(buf3) != 3 {
					t.Fatalf("atomics in a batch: CAS old %d, read %d, FAA old %d, read %d", ops[2].Old,
						binary.LittleEndian.Uint64(buf2), ops[4].Old, binary.LittleEndian.Uint64(buf3))
				}
				if !bytes.Equal(buf4[:100], data[:100]) {
					t.Fatal("READ on a second memory node did not see the batch's WRITE there")
				}
			})

			t.Run("unsignaled", func(t *testing.T) {
				z, w := a.Add(3500), a.Add(3600)
				data := []byte("unsignaled write data, longer than one word")
				src := bytes.Clone(data)
				if err := c.Write(ctx, w, make([]byte, 8)); err != nil {
					t.Fatal(err)
				}
				if err := c.Post(ctx, []Op{Write(z, src), FAA(w, 3), CAS(w, 3, 4)}); err != nil {
					t.Fatal(err)
				}
				clear(src) // the caller may reuse the buffer as soon as Post returns
				got := make([]byte, len(data))
				if err := c.Read(ctx, z, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("unsignaled WRITE: read %q", got)
				}
				if old, err := c.FAA(ctx, w, 0); err != nil || old != 4 {
					t.Fatalf("unsignaled FAA+CAS: word %d, %v; want 4", old, err)
				}
			})
		})
	}
}

// TestRandomVerbs checks random READs and WRITEs at random offsets and
// lengths against a byte-slice oracle, on every transport.
func TestRandomVerbs(t *testing.T) {
	seed := testseed.Seed(t)
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 1))
			p := tc.pool(t, Config{NodeBytes: 1 << 20})
			c := p.NewComputeNode().NewClient()
			const size = 1 << 14
			a, err := c.Alloc(ctx, size)
			if err != nil {
				t.Fatal(err)
			}
			oracle := make([]byte, size)
			for i := range 2000 {
				off := rng.IntN(size)
				n := rng.IntN(min(size-off, 700) + 1)
				buf := make([]byte, n)
				if rng.IntN(2) == 0 {
					for j := range buf {
						buf[j] = byte(rng.Uint32())
					}
					if err := c.Write(ctx, a.Add(uint64(off)), buf); err != nil {
						t.Fatal(err)
					}
					copy(oracle[off:], buf)
					continue
				}
				if err := c.Read(ctx, a.Add(uint64(off)), buf); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf, oracle[off:off+n]) {
					t.Fatalf("op %d: read of %d bytes at %d differs from the oracle", i, n, off)
				}
			}
		})
	}
}

func TestVerbErrors(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const nodeBytes = 1 << 16
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: nodeBytes, OnChipBytes: 1024})
			c := p.NewComputeNode().NewClient()
			a, err := c.AllocOn(ctx, 0, 64, 8)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 16)
			cases := []struct {
				name string
				ops  []Op
				want error
			}{
				{"read past the end", []Op{Read(MakeAddr(0, nodeBytes-8), buf)}, ErrOutOfBounds},
				{"write past the end", []Op{Write(MakeAddr(1, nodeBytes), buf[:1])}, ErrOutOfBounds},
				{"on-chip past the end", []Op{CAS(OnChip(0, 1024), 0, 1)}, ErrOutOfBounds},
				{"misaligned CAS", []Op{CAS(a.Add(4), 0, 1)}, ErrMisaligned},
				{"misaligned FAA", []Op{FAA(a.Add(1), 1)}, ErrMisaligned},
				{"unknown memory node", []Op{Read(MakeAddr(2, 4096), buf)}, ErrUnknownNode},
				{"nil address", []Op{Read(0, buf)}, ErrNilAddr},
				{"bad kind", []Op{{Kind: 9, Addr: a}}, ErrBadRequest},
				{"zero kind", []Op{{Addr: a}}, ErrBadRequest},
				{"bad verb after a good one", []Op{Write(a, []byte("must not land")), Read(0, buf)}, ErrNilAddr},
			}
			for _, cs := range cases {
				for _, signaled := range []bool{true, false} {
					var err error
					if signaled {
						err = c.Do(ctx, cs.ops)
					} else {
						err = c.Post(ctx, cs.ops)
					}
					if !errors.Is(err, cs.want) {
						t.Errorf("%s (signaled %v): err %v, want %v", cs.name, signaled, err, cs.want)
					}
				}
			}
			got := make([]byte, 13)
			if err := c.Read(ctx, a, got); err != nil || !bytes.Equal(got, make([]byte, 13)) {
				t.Errorf("a batch with an invalid verb executed its valid verb: %q, %v", got, err)
			}

			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if err := c.Read(cancelled, a, buf); !errors.Is(err, context.Canceled) {
				t.Errorf("Read with a cancelled context: %v", err)
			}
			if _, err := p.NewComputeNode().NewClient().Alloc(cancelled, 8); !errors.Is(err, context.Canceled) {
				t.Errorf("Alloc with a cancelled context: %v", err)
			}
			if err := c.Wait(cancelled); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait with a cancelled context: %v", err)
			}
			c.Signal()
			if err := c.Wait(cancelled); err != nil {
				t.Errorf("Wait with a permit and a cancelled context: %v (the permit comes first)", err)
			}

			for _, bad := range []struct{ size, align int }{{0, 8}, {-1, 8}, {8, 4}, {8, 24}, {nodeBytes + 1, 8}} {
				if _, err := c.AllocOn(ctx, -1, bad.size, bad.align); !errors.Is(err, ErrBadRequest) {
					t.Errorf("AllocOn(size %d, align %d): %v", bad.size, bad.align, err)
				}
			}
			if _, err := c.AllocOn(ctx, 2, 8, 8); !errors.Is(err, ErrUnknownNode) {
				t.Errorf("AllocOn(unknown node): %v", err)
			}
			if _, err := c.Named(ctx, "x", 0); !errors.Is(err, ErrBadRequest) {
				t.Errorf("Named of 0 bytes: %v", err)
			}

			p.Close()
			if err := p.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if err := c.Read(ctx, a, buf); !errors.Is(err, ErrClosed) {
				t.Errorf("Read after Close: %v", err)
			}
			if err := c.Post(ctx, []Op{FAA(a, 1)}); !errors.Is(err, ErrClosed) {
				t.Errorf("Post after Close: %v", err)
			}
			if _, err := p.NewComputeNode().NewClient().Alloc(ctx, 8); !errors.Is(err, ErrClosed) {
				t.Errorf("Alloc after Close: %v", err)
			}
			if _, err := c.Named(ctx, "root", 8); !errors.Is(err, ErrClosed) {
				t.Errorf("Named after Close: %v", err)
			}
			if err := c.Wait(ctx); !errors.Is(err, ErrClosed) {
				t.Errorf("Wait after Close: %v", err)
			}
		})
	}
}

func TestAllocation(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const nodeBytes = 1 << 16
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: nodeBytes, ChunkBytes: nodeBytes / 16})
			if got := p.Config().ChunkBytes; got != nodeBytes/16 {
				t.Fatalf("ChunkBytes = %d", got)
			}
			c := p.NewComputeNode().NewClient()

			// Fill memory node 0, through chunks and through large objects.
			seen := map[Addr]bool{}
			var n int
			tail := false
			for ; ; n++ {
				size := 40
				if n%7 == 0 {
					size = 2000 // more than a quarter chunk: its own RPC
				}
				if tail {
					size = 8 // the node serves small objects from its tail
				}
				a, err := c.AllocOn(ctx, 0, size, 8)
				if errors.Is(err, ErrOutOfMemory) {
					if tail {
						break
					}
					tail = true
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if a.MN() != 0 || a.Offset() < reservedBytes || a.Offset()%8 != 0 ||
					a.Offset()+uint64(size) > nodeBytes || seen[a] {
					t.Fatalf("allocation %d of %d bytes: bad address %v", n, size, a)
				}
				seen[a] = true
			}
			if n < 100 {
				t.Fatalf("only %d allocations fit in %d bytes", n, nodeBytes)
			}
			// Round-robin skips the full node.
			for range 20 {
				a, err := c.Alloc(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				if a.MN() != 1 {
					t.Fatalf("round-robin allocated on full memory node 0: %v", a)
				}
			}
			aligned, err := c.AllocOn(ctx, 1, 100, 256)
			if err != nil || aligned.Offset()%256 != 0 {
				t.Fatalf("aligned allocation: %v, %v", aligned, err)
			}
			// Exhaust node 1 too: then Alloc fails.
			for {
				if _, err = c.Alloc(ctx, 1000); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrOutOfMemory) {
				t.Fatalf("Alloc on a full pool: %v", err)
			}
			used, err := p.MemoryUsed()
			if err != nil {
				t.Fatal(err)
			}
			if used[0] > nodeBytes || used[1] > nodeBytes || used[0] < nodeBytes-4096 {
				t.Fatalf("MemoryUsed = %v", used)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p := tc.pool(t, Config{MemoryNodes: 2, NodeBytes: 1 << 20})
			c1 := p.NewComputeNode().NewClient()
			c2 := p.NewComputeNode().NewClient()
			a1, err := c1.Named(ctx, "root", 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := c1.Write(ctx, a1, []byte("root pointer")); err != nil {
				t.Fatal(err)
			}
			a2, err := c2.Named(ctx, "root", 64)
			if err != nil {
				t.Fatal(err)
			}
			if a1 != a2 || a1.MN() != 0 || a1.IsNil() {
				t.Fatalf("Named(root) = %v on CN 0, %v on CN 1", a1, a2)
			}
			got := make([]byte, 12)
			if err := c2.Read(ctx, a2, got); err != nil || string(got) != "root pointer" {
				t.Fatalf("CN 1 read %q, %v", got, err)
			}
			b, err := c2.Named(ctx, "other", 64)
			if err != nil || b == a1 {
				t.Fatalf("Named(other) = %v, %v", b, err)
			}
		})
	}
}

// TestNewPoolTooLarge: memory nodes the machine cannot map are an error,
// never a fallback that exhausts memory; a bad size names the value given.
func TestNewPoolTooLarge(t *testing.T) {
	p, err := NewPool(Config{MemoryNodes: 4, NodeBytes: 1 << 46})
	if err == nil {
		p.Close() // the kernel mapped 256 TiB lazily: nothing to refuse here
		t.Skip("this kernel maps 4 × 64 TiB")
	}
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("NewPool of 4 × 64 TiB: %v, want ErrOutOfMemory", err)
	}
	if _, err := NewPool(Config{NodeBytes: -1}); err == nil || !strings.Contains(err.Error(), "NodeBytes -1") {
		t.Fatalf("NewPool with NodeBytes -1: %v", err)
	}
}

// TestDoBy checks DoBy's deadline on every transport: a batch whose
// deadline has passed is refused with ErrLate and nothing of it lands; one
// within its deadline runs like Do. In the simulator the deadline is also
// checked at the batch's virtual posting instant, after the client got its
// turn (a plain goroutine queued for it while the clock moved on): the
// test sets the deadline behind DoBy's own check to reach that one.
func TestDoBy(t *testing.T) {
	for _, tc := range allTransports {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			p := tc.pool(t, Config{MemoryNodes: 1})
			c := p.NewComputeNode().NewClient()
			a, err := c.Alloc(ctx, 8)
			if err != nil {
				t.Fatal(err)
			}
			word := func() uint64 {
				t.Helper()
				var b [8]byte
				if err := c.Read(ctx, a, b[:]); err != nil {
					t.Fatal(err)
				}
				return binary.LittleEndian.Uint64(b[:])
			}
			c.Compute(time.Microsecond)
			if err := c.DoBy(ctx, []Op{CAS(a, 0, 1)}, c.Now()-time.Nanosecond); !errors.Is(err, ErrLate) {
				t.Fatalf("DoBy past its deadline: %v, want ErrLate", err)
			}
			if w := word(); w != 0 {
				t.Fatalf("a late batch landed: word %d", w)
			}
			if err := c.DoBy(ctx, []Op{CAS(a, 0, 2)}, c.Now()+time.Hour); err != nil {
				t.Fatal(err)
			}
			if w := word(); w != 2 {
				t.Fatalf("a batch within its deadline: word %d, want 2", w)
			}
			if p.Config().Sim == nil {
				return
			}
			c.by = c.Now() - time.Nanosecond
			err = c.Do(ctx, []Op{CAS(a, 2, 3)})
			c.by = 0
			if !errors.Is(err, ErrLate) || word() != 2 {
				t.Fatalf("the simulator posted a batch past its deadline: %v, word %d", err, word())
			}
		})
	}
}
