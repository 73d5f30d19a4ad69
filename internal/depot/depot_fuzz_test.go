package depot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// FuzzRecord checks the record encoding. Arbitrary bytes: decodeHeader and
// decodeEntries never panic, fail only with ErrCorrupt, accept only what
// Take may trust (a capacity in [minCapacity, maxCapacity], no more
// entries than that, entries of a known kind, a size and an address), and
// what they accept encodes back to the same bytes. Entries built from the
// fuzzed addr, size, kind, tau and count: encode then decode gives them
// back, with the next address and the capacity, and an entry of an
// unknown kind (the fuzzed kind when it is not one) does not decode.
func FuzzRecord(f *testing.F) {
	le := binary.LittleEndian
	valid := make([]byte, recordBytes(8))
	encode(valid, remote.MakeAddr(1, 4096), 8, []Entry{
		{Kind: Unused, Addr: remote.MakeAddr(0, 8192), Size: 100},
		{Kind: Retired, Addr: remote.MakeAddr(1, 1<<20), Size: 64, Tau: 5},
		{Kind: Free, Addr: remote.MakeAddr(1, 2<<20), Size: 64, Tau: 6},
	})
	f.Add(valid, uint64(remote.MakeAddr(1, 4096)), uint64(64), uint8(Retired), uint64(7), uint16(3))
	f.Add([]byte{}, uint64(0), uint64(0), uint8(0), uint64(0), uint16(0))
	f.Add(make([]byte, 16), uint64(1), uint64(1)<<56-1, uint8(Free), ^uint64(0), uint16(2048))
	f.Add(valid[:40], uint64(1), uint64(1)<<60, uint8(255), uint64(1), uint16(9))
	// Records with one bad entry after a good one.
	for _, bad := range []Entry{
		{Kind: Retired, Addr: 0, Size: 64},
		{Kind: Retired, Addr: 1, Size: 0},
		{Kind: 0, Addr: 1, Size: 64},
		{Kind: Free + 1, Addr: 1, Size: 64},
	} {
		b := make([]byte, recordBytes(8))
		encode(b, 0, 8, []Entry{{Kind: Unused, Addr: 4096, Size: 8}, bad})
		f.Add(b, uint64(0), uint64(0), uint8(0), uint64(0), uint16(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, addr, size uint64, kind uint8, tau uint64, count uint16) {
		// Arbitrary bytes.
		next, n, capacity, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeHeader: %v, not %v", err, ErrCorrupt)
			}
		} else {
			if capacity < minCapacity || capacity > maxCapacity || n < 0 || n > capacity {
				t.Fatalf("decodeHeader accepted %d entries of capacity %d", n, capacity)
			}
			if next != remote.Addr(le.Uint64(b)) {
				t.Fatalf("decodeHeader: next %v, the word is %#x", next, le.Uint64(b))
			}
			es, err := decodeEntries(nil, b[headerBytes:], n)
			switch {
			case err != nil && !errors.Is(err, ErrCorrupt):
				t.Fatalf("decodeEntries: %v, not %v", err, ErrCorrupt)
			case err == nil:
				if len(es) != n {
					t.Fatalf("decodeEntries: %d entries, want %d", len(es), n)
				}
				for i, e := range es {
					if (e.Kind != Unused && e.Kind != Retired && e.Kind != Free) || e.Addr.IsNil() || e.Size == 0 || e.Size > sizeMask {
						t.Fatalf("decodeEntries accepted entry %d: %+v", i, e)
					}
				}
				img := make([]byte, recordBytes(capacity))
				encode(img, next, capacity, es)
				if m := headerBytes + entryBytes*n; !bytes.Equal(img[:m], b[:m]) {
					t.Fatalf("decoded record encodes to\n%x\nnot\n%x", img[:m], b[:m])
				}
			}
		}
		// decodeEntries on any length and count.
		if _, err := decodeEntries(nil, b, int(count)); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeEntries(%d bytes, %d): %v", len(b), count, err)
		}

		// Valid entries from the fuzzed values.
		capacity = capacityFor(int(count), 1<<30)
		n = min(int(count), capacity)
		es := make([]Entry, n)
		for i := range es {
			es[i] = Entry{
				Kind: Unused + Kind((uint64(kind)+uint64(i))%3),
				Addr: remote.Addr(addr + uint64(i)),
				Size: (size + uint64(i)) & sizeMask,
				Tau:  tau ^ uint64(i),
			}
			if es[i].Addr.IsNil() {
				es[i].Addr = 1
			}
			if es[i].Size == 0 {
				es[i].Size = 1
			}
		}
		img := make([]byte, recordBytes(capacity))
		encode(img, remote.Addr(addr), capacity, es)
		gotNext, gotN, gotCap, err := decodeHeader(img)
		if err != nil || gotNext != remote.Addr(addr) || gotN != n || gotCap != capacity {
			t.Fatalf("decodeHeader of %d entries of capacity %d, next %#x: %v, %d, %d, %v", n, capacity, addr, gotNext, gotN, gotCap, err)
		}
		got, err := decodeEntries(nil, img[headerBytes:], gotN)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, es) && !(len(got) == 0 && len(es) == 0) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, es)
		}
		// An entry of the fuzzed kind, if it is not a known one.
		if k := Kind(kind); k != Unused && k != Retired && k != Free && n > 0 {
			bad := slices.Clone(es)
			bad[n-1].Kind = k
			encode(img, remote.Addr(addr), capacity, bad)
			got, err := decodeEntries(nil, img[headerBytes:], n)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("entry of kind %d decoded: %+v, %v", k, got, err)
			}
		}
	})
}
