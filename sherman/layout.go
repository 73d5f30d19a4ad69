package sherman

import "fmt"

// Page layout (docs/sherman-layout.md has the bit-level description).
//
// Every page starts with the same header of 8-byte little-endian words:
//
//	0   check    leaf: 64-bit hash of header bytes [8, hdr)
//	             internal: 64-bit hash of bytes [8, hdr+count*innerEntry)
//	8   info     version:32 | level:8 | flags:8 | count:16
//	16  sibling  right sibling (B-link), nil for the rightmost page of a level
//	24  leftmost internal: child left of the first entry; leaf: 0
//	32  fences   lowLen:8 | highLen:8 | 0:48
//	40  low      low fence key, padded to 8 bytes (lowLen 0: -inf)
//	40+kp high   high fence key, padded to 8 bytes (flag highInf: +inf)
//
// then span entries. A leaf entry is
//
//	0   meta     check:32 | keyLen:8 | 0:8 | valLen:16
//	8   key      padded to kp bytes
//	8+kp value   padded to vp bytes
//
// where check is the low 32 bits of a hash of the entry's bytes [4, end)
// seeded with the page version; keyLen 0 marks a free slot. An internal entry
// is
//
//	0   meta     keyLen:8 | 0:56
//	8   key      padded to kp bytes
//	8+kp child
//
// kept sorted by key in slots [0, count).
const (
	offCheck    = 0
	offInfo     = 8
	offSibling  = 16
	offLeftmost = 24
	offFences   = 32
	offLow      = 40

	flagHighInf = 1 << 0

	// lineBytes is the alignment of pages: one cache line of the strict
	// ordering mode.
	lineBytes = 64
	// maxPageBytes bounds a page so a bad geometry cannot exhaust memory.
	maxPageBytes = 1 << 20
	// maxLevel bounds the height of a tree (levels 0..maxLevel).
	maxLevel = 32
)

// geometry is the byte layout of a tree's pages, derived from Options.
type geometry struct {
	keySize, valueSize int
	kp, vp             int // key and value field sizes (padded to 8)
	hdr                int // header bytes
	leafEntry          int // bytes of one leaf entry
	innerEntry         int // bytes of one internal entry
	leafSpan           int // entries per leaf
	innerSpan          int // entries per internal page
	leafBytes          int // bytes of a leaf (header and entries)
	innerBytes         int // bytes of an internal page
	pageBytes          int // allocation unit: max of both, rounded to a line
}

func pad8(n int) int { return (n + 7) &^ 7 }

// newGeometry derives the layout of o, which must be normalized.
func newGeometry(o Options) (geometry, error) {
	g := geometry{keySize: o.KeySize, valueSize: o.ValueSize, kp: pad8(o.KeySize), vp: pad8(o.ValueSize)}
	g.hdr = offLow + 2*g.kp
	g.leafEntry = 8 + g.kp + g.vp
	g.innerEntry = 8 + g.kp + 8
	if o.PageBytes != 0 {
		g.leafSpan = (o.PageBytes - g.hdr) / g.leafEntry
		g.innerSpan = (o.PageBytes - g.hdr) / g.innerEntry
	} else {
		g.leafSpan, g.innerSpan = o.Span, o.Span
	}
	if g.leafSpan < MinSpan || g.innerSpan < MinSpan || g.leafSpan > MaxSpan || g.innerSpan > MaxSpan {
		return g, fmt.Errorf("%w: page geometry gives %d leaf and %d internal entries (want %d..%d)",
			ErrBadOptions, g.leafSpan, g.innerSpan, MinSpan, MaxSpan)
	}
	g.leafBytes = g.hdr + g.leafSpan*g.leafEntry
	g.innerBytes = g.hdr + g.innerSpan*g.innerEntry
	g.pageBytes = (max(g.leafBytes, g.innerBytes) + lineBytes - 1) &^ (lineBytes - 1)
	if g.pageBytes > maxPageBytes {
		return g, fmt.Errorf("%w: pages of %d bytes exceed %d", ErrBadOptions, g.pageBytes, maxPageBytes)
	}
	return g, nil
}

// descriptor packs the geometry into the word stored next to the root
// pointer, so that compute nodes opening one tree agree on it:
// magic:8 | keySize:8 | valueSize:16 | leafSpan:16 | innerSpan:16.
func (g geometry) descriptor() uint64 {
	const magic = 0x5e
	return magic<<56 | uint64(g.keySize)<<48 | uint64(g.valueSize)<<32 |
		uint64(g.leafSpan)<<16 | uint64(g.innerSpan)
}

// bytesFor returns how many bytes to read for a page of the given level:
// leafBytes for level 0, innerBytes above, pageBytes if unknown (-1).
func (g geometry) bytesFor(level int) int {
	switch {
	case level == 0:
		return g.leafBytes
	case level > 0:
		return g.innerBytes
	}
	return g.pageBytes
}
