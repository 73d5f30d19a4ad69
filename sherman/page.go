package sherman

import (
	"bytes"
	"encoding/binary"

	farm "github.com/dgryski/go-farm"

	"github.com/dmindex/dmindex/remote"
)

var le = binary.LittleEndian

// header holds the decoded header fields of a page that encoders take.
type header struct {
	version  uint32
	level    int
	sibling  remote.Addr
	leftmost remote.Addr
	low      []byte // empty: -inf
	high     []byte // ignored if highInf
	highInf  bool
}

// page is a view of one page's bytes. Accessors assume the bytes passed
// valid (or were just encoded); valid never panics on arbitrary bytes.
type page struct {
	g *geometry
	b []byte
}

func (p page) info() uint64         { return le.Uint64(p.b[offInfo:]) }
func (p page) version() uint32      { return uint32(p.info()) }
func (p page) level() int           { return int(p.info() >> 32 & 0xff) }
func (p page) flags() uint8         { return uint8(p.info() >> 40) }
func (p page) count() int           { return int(p.info() >> 48) }
func (p page) sibling() remote.Addr { return remote.Addr(le.Uint64(p.b[offSibling:])) }
func (p page) isLeaf() bool         { return p.level() == 0 }
func (p page) highInf() bool        { return p.flags()&flagHighInf != 0 }

// leftmost returns an internal page's child for keys below its first entry;
// leaves have none (0).
func (p page) leftmost() remote.Addr {
	if p.isLeaf() {
		return 0
	}
	return remote.Addr(le.Uint64(p.b[p.g.leafHdr:]))
}

// low returns the low fence; an empty fence is -inf.
func (p page) low() []byte {
	n := int(p.b[offLowLen])
	return p.b[offLow : offLow+n]
}

// high returns the high fence (meaningless if highInf).
func (p page) high() []byte {
	n := int(p.b[offHighLen])
	o := offLow + p.g.keySize
	return p.b[o : o+n]
}

// covers reports where key lies relative to the page's fences: -1 below the
// low fence, 0 inside [low, high), +1 at or above the high fence.
func (p page) covers(key []byte) int {
	if bytes.Compare(key, p.low()) < 0 {
		return -1
	}
	if !p.highInf() && bytes.Compare(key, p.high()) >= 0 {
		return 1
	}
	return 0
}

// reaches reports whether the page's high fence is at or above hi, i.e. no key
// of a later page is below hi (nil hi: no bound).
func (p page) reaches(hi []byte) bool {
	if p.highInf() {
		return true
	}
	return hi != nil && bytes.Compare(p.high(), hi) >= 0
}

// valid reports whether the bytes form a consistent page: lengths in range,
// the header (and for internal pages, the entries) matching its check, and
// for leaves every entry matching its version-salted check. A torn read of a
// page fails valid except with the probabilities of
// docs/sherman-layout.md; valid never panics on arbitrary bytes.
func (p page) valid() bool {
	g := p.g
	if len(p.b) < g.leafHdr {
		return false
	}
	if int(p.b[offLowLen]) > g.keySize || int(p.b[offHighLen]) > g.keySize {
		return false
	}
	lvl, n := p.level(), p.count()
	if lvl > maxLevel || p.flags()&^flagHighInf != 0 || len(p.b) < g.bytesFor(lvl) {
		return false
	}
	if lvl == 0 {
		if n != 0 || farm.Hash64(p.b[offInfo:g.leafHdr]) != le.Uint64(p.b[offCheck:]) {
			return false
		}
		v := p.version()
		for i := range g.leafSpan {
			if !g.entryValid(p.entry(i), v) {
				return false
			}
		}
		return true
	}
	if n > g.innerSpan || p.leftmost() == 0 {
		return false
	}
	end := g.innerHdr + n*g.innerEntry
	if farm.Hash64(p.b[offInfo:end]) != le.Uint64(p.b[offCheck:]) {
		return false
	}
	for i := range n {
		if kl := int(p.b[g.innerHdr+i*g.innerEntry]); kl == 0 || kl > g.keySize {
			return false
		}
	}
	return true
}

// entryOffset returns the byte offset of leaf slot i in the page.
func (g *geometry) entryOffset(i int) int { return g.leafHdr + i*g.leafEntry }

// entry returns the bytes of leaf slot i.
func (p page) entry(i int) []byte {
	o := p.g.entryOffset(i)
	return p.b[o : o+p.g.leafEntry]
}

// leafKV returns the key and value of leaf slot i (nil key: free slot).
func (p page) leafKV(i int) (key, value []byte) {
	g := p.g
	e := p.entry(i)
	kl, vl, _ := g.meta(e)
	if kl == 0 {
		return nil, nil
	}
	k := e[g.metaBytes:]
	return k[:kl], k[g.keySize : g.keySize+vl]
}

// findLeaf returns the slot holding key (or -1) and the first free slot (or
// -1).
func (p page) findLeaf(key []byte) (slot, free int) {
	slot, free = -1, -1
	for i := range p.g.leafSpan {
		k, _ := p.leafKV(i)
		switch {
		case k == nil:
			if free < 0 {
				free = i
			}
		case slot < 0 && bytes.Equal(k, key):
			slot = i
		}
	}
	return slot, free
}

// innerKey returns the key of internal entry i.
func (p page) innerKey(i int) []byte {
	o := p.g.innerHdr + i*p.g.innerEntry
	return p.b[o+1 : o+1+int(p.b[o])]
}

// innerChild returns the child of internal entry i.
func (p page) innerChild(i int) remote.Addr {
	o := p.g.innerHdr + i*p.g.innerEntry + 1 + p.g.keySize
	return remote.Addr(le.Uint64(p.b[o:]))
}

// search returns the number of entries whose key is <= key: the child for
// key is leftmost if 0, else entry search-1.
func (p page) search(key []byte) int {
	lo, hi := 0, p.count()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(p.innerKey(m), key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// route returns the child of an internal page that covers key.
func (p page) route(key []byte) remote.Addr {
	if i := p.search(key); i > 0 {
		return p.innerChild(i - 1)
	}
	return p.leftmost()
}

// meta decodes the meta field of leaf entry e: the key and value lengths
// (unchecked) and the stored check.
func (g *geometry) meta(e []byte) (keyLen, valLen int, check uint64) {
	var m uint64
	if len(e) >= 8 { // one load, masked: a byte copy would stall the load
		m = le.Uint64(e) & (1<<(8*g.metaBytes) - 1)
	} else {
		var w [8]byte
		copy(w[:], e[:g.metaBytes])
		m = le.Uint64(w[:])
	}
	return int(m & (1<<g.keyBits - 1)), int(m >> g.keyBits & (1<<(g.lenBits-g.keyBits) - 1)), m >> g.lenBits
}

// entryCheck computes the check of a leaf entry with the given lengths and
// key and value bytes kv (both zero-padded fields): checkBits bits of a hash
// of kv seeded with the page version and the lengths, so that an entry of
// another version of the page, or a mixture of two versions of one entry,
// validates only by a chance of 2^-checkBits.
func (g *geometry) entryCheck(keyLen, valLen int, kv []byte, version uint32) uint64 {
	lens := uint64(keyLen) | uint64(valLen)<<g.keyBits
	return farm.Hash64WithSeeds(kv, uint64(version), lens) >> (64 - g.checkBits)
}

// entryValid reports whether leaf entry e is consistent for page version v:
// lengths in range (a free slot has both zero) and the check matching.
func (g *geometry) entryValid(e []byte, v uint32) bool {
	kl, vl, check := g.meta(e)
	if kl > g.keySize || vl > g.valueSize || (kl == 0 && vl != 0) {
		return false
	}
	return check == g.entryCheck(kl, vl, e[g.metaBytes:], v)
}

// putEntry encodes a leaf entry (nil key and value: a free slot) into e,
// which must be leafEntry bytes, for page version v. key and value must fit
// the geometry.
func (g *geometry) putEntry(e []byte, v uint32, key, value []byte) {
	clear(e)
	kv := e[g.metaBytes:]
	copy(kv, key)
	copy(kv[g.keySize:], value)
	kl, vl := len(key), len(value)
	m := uint64(kl) | uint64(vl)<<g.keyBits | g.entryCheck(kl, vl, kv, v)<<g.lenBits
	var w [8]byte
	le.PutUint64(w[:], m)
	copy(e[:g.metaBytes], w[:])
}

// putHeader encodes h into b, leaving the check for the caller. The
// leftmost child is written for internal pages only.
func (g *geometry) putHeader(b []byte, h *header, count int) {
	var flags uint64
	if h.highInf {
		flags = flagHighInf
	}
	le.PutUint64(b[offInfo:], uint64(h.version)|uint64(h.level)<<32|flags<<40|uint64(count)<<48)
	le.PutUint64(b[offSibling:], uint64(h.sibling))
	b[offLowLen] = byte(len(h.low))
	copy(b[offLow:offLow+g.keySize], h.low)
	if !h.highInf {
		b[offHighLen] = byte(len(h.high))
		copy(b[offLow+g.keySize:g.leafHdr], h.high)
	}
	if h.level > 0 {
		le.PutUint64(b[g.leafHdr:], uint64(h.leftmost))
	}
}

// kv is one leaf pair during a page rewrite.
type kv struct{ key, value []byte }

// encodeLeaf writes a whole leaf with header h and the given pairs in slots
// [0, len(kvs)) into b[:leafBytes]; every other slot is free.
func (g *geometry) encodeLeaf(b []byte, h *header, kvs []kv) {
	b = b[:g.leafBytes]
	clear(b)
	g.putHeader(b, h, 0)
	le.PutUint64(b[offCheck:], farm.Hash64(b[offInfo:g.leafHdr]))
	p := page{g, b}
	for i := range g.leafSpan {
		if i < len(kvs) {
			g.putEntry(p.entry(i), h.version, kvs[i].key, kvs[i].value)
		} else {
			g.putEntry(p.entry(i), h.version, nil, nil)
		}
	}
}

// sep is one internal entry during a page rewrite.
type sep struct {
	key   []byte
	child remote.Addr
}

// encodeInner writes a whole internal page with header h and the sorted
// entries seps into b[:innerBytes].
func (g *geometry) encodeInner(b []byte, h *header, seps []sep) {
	b = b[:g.innerBytes]
	clear(b)
	g.putHeader(b, h, len(seps))
	for i, s := range seps {
		o := g.innerHdr + i*g.innerEntry
		b[o] = byte(len(s.key))
		copy(b[o+1:], s.key)
		le.PutUint64(b[o+1+g.keySize:], uint64(s.child))
	}
	end := g.innerHdr + len(seps)*g.innerEntry
	le.PutUint64(b[offCheck:], farm.Hash64(b[offInfo:end]))
}

// headerOf returns a copy of p's header fields (fence slices alias p).
func (p page) headerOf() header {
	return header{
		version: p.version(), level: p.level(), sibling: p.sibling(), leftmost: p.leftmost(),
		low: p.low(), high: p.high(), highInf: p.highInf(),
	}
}

// seps returns copies of an internal page's entries.
func (p page) seps() []sep {
	out := make([]sep, p.count(), p.count()+1)
	for i := range out {
		out[i] = sep{bytes.Clone(p.innerKey(i)), p.innerChild(i)}
	}
	return out
}
