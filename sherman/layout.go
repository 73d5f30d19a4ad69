package sherman

import (
	"fmt"
	"math/bits"
)

// Page layout (docs/sherman-layout.md has the bit-level description).
//
// Every page starts with the same header (ks = KeySize):
//
//	0      check    leaf: 64-bit hash of header bytes [8, leafHdr)
//	                internal: 64-bit hash of bytes [8, innerHdr+count*innerEntry)
//	8      info     version:32 | level:8 | flags:8 | count:16
//	16     sibling  right sibling (B-link), nil for the rightmost page of a level
//	24     lowLen   low fence length (0: -inf)
//	25     highLen  high fence length
//	26     low      low fence key, zero-padded to ks bytes
//	26+ks  high     high fence key, zero-padded to ks bytes (flag highInf: +inf)
//	26+2ks leftmost internal pages only: child left of the first entry
//
// then span entries, at no particular alignment. A leaf entry is
//
//	0          meta   keyLen:keyBits | valLen:valBits | check:checkBits, little-endian
//	metaBytes  key    zero-padded to ks bytes
//	+ks        value  zero-padded to ValueSize bytes
//
// where check is the top checkBits bits of a hash of the key and value
// bytes and both lengths, seeded with the page version; keyLen 0 marks a
// free slot. An internal entry is
//
//	0     keyLen  1..ks
//	1     key     zero-padded to ks bytes
//	1+ks  child
//
// kept sorted by key in slots [0, count).
const (
	offCheck   = 0
	offInfo    = 8
	offSibling = 16
	offLowLen  = 24
	offHighLen = 25
	offLow     = 26

	flagHighInf = 1 << 0

	// minCheckBits is the least width of a leaf entry's check: the meta
	// field is the fewest whole bytes holding both lengths and at least
	// this many check bits (docs/sherman-layout.md says why not fewer).
	minCheckBits = 24

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
	keyBits            int // bits of a leaf entry's key length (0..keySize)
	lenBits            int // bits of both lengths: keyBits + value length bits
	metaBytes          int // bytes of a leaf entry's meta field
	checkBits          int // bits of a leaf entry's check: 8*metaBytes - lenBits
	leafHdr            int // leaf header bytes
	innerHdr           int // internal page header bytes (leafHdr + leftmost)
	leafEntry          int // bytes of one leaf entry
	innerEntry         int // bytes of one internal entry
	leafSpan           int // entries per leaf
	innerSpan          int // entries per internal page
	leafBytes          int // bytes of a leaf (header and entries)
	innerBytes         int // bytes of an internal page
	pageBytes          int // allocation unit: max of both, rounded to a line
}

// newGeometry derives the layout of o, which must be normalized.
func newGeometry(o Options) (geometry, error) {
	g := geometry{keySize: o.KeySize, valueSize: o.ValueSize}
	g.keyBits = bits.Len(uint(o.KeySize))
	g.lenBits = g.keyBits + bits.Len(uint(o.ValueSize))
	g.metaBytes = (g.lenBits + minCheckBits + 7) / 8
	g.checkBits = 8*g.metaBytes - g.lenBits
	g.leafHdr = offLow + 2*g.keySize
	g.innerHdr = g.leafHdr + 8
	g.leafEntry = g.metaBytes + g.keySize + g.valueSize
	g.innerEntry = 1 + g.keySize + 8
	if o.PageBytes != 0 {
		g.leafSpan = (o.PageBytes - g.leafHdr) / g.leafEntry
		g.innerSpan = (o.PageBytes - g.innerHdr) / g.innerEntry
	} else {
		g.leafSpan, g.innerSpan = o.Span, o.Span
	}
	if g.leafSpan < MinSpan || g.innerSpan < MinSpan || g.leafSpan > MaxSpan || g.innerSpan > MaxSpan {
		return g, fmt.Errorf("%w: page geometry gives %d leaf and %d internal entries (want %d..%d)",
			ErrBadOptions, g.leafSpan, g.innerSpan, MinSpan, MaxSpan)
	}
	g.leafBytes = g.leafHdr + g.leafSpan*g.leafEntry
	g.innerBytes = g.innerHdr + g.innerSpan*g.innerEntry
	g.pageBytes = (max(g.leafBytes, g.innerBytes) + lineBytes - 1) &^ (lineBytes - 1)
	if g.pageBytes > maxPageBytes {
		return g, fmt.Errorf("%w: pages of %d bytes exceed %d", ErrBadOptions, g.pageBytes, maxPageBytes)
	}
	return g, nil
}

// descriptor packs the geometry into the word stored next to the root
// pointer, so that compute nodes opening one tree agree on it:
// magic:8 | keySize:8 | valueSize:16 | leafSpan:16 | innerSpan:16. The
// magic names the page layout (0x5f: compact entries), so a tree written
// with another layout is refused.
func (g geometry) descriptor() uint64 {
	const magic = 0x5f
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
