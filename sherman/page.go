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

func (p page) info() uint64          { return le.Uint64(p.b[offInfo:]) }
func (p page) version() uint32       { return uint32(p.info()) }
func (p page) level() int            { return int(p.info() >> 32 & 0xff) }
func (p page) flags() uint8          { return uint8(p.info() >> 40) }
func (p page) count() int            { return int(p.info() >> 48) }
func (p page) sibling() remote.Addr  { return remote.Addr(le.Uint64(p.b[offSibling:])) }
func (p page) leftmost() remote.Addr { return remote.Addr(le.Uint64(p.b[offLeftmost:])) }
func (p page) isLeaf() bool          { return p.level() == 0 }
func (p page) highInf() bool         { return p.flags()&flagHighInf != 0 }

// low returns the low fence; an empty fence is -inf.
func (p page) low() []byte {
	n := int(p.b[offFences])
	return p.b[offLow : offLow+n]
}

// high returns the high fence (meaningless if highInf).
func (p page) high() []byte {
	n := int(p.b[offFences+1])
	o := offLow + p.g.kp
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
// page fails valid with overwhelming probability.
func (p page) valid() bool {
	g := p.g
	if len(p.b) < g.hdr {
		return false
	}
	lowLen, highLen := int(p.b[offFences]), int(p.b[offFences+1])
	if lowLen > g.keySize || highLen > g.keySize || le.Uint64(p.b[offFences:])>>16 != 0 {
		return false
	}
	lvl, n := p.level(), p.count()
	if lvl > maxLevel || p.flags()&^flagHighInf != 0 || len(p.b) < g.bytesFor(lvl) {
		return false
	}
	if lvl == 0 {
		if n != 0 || p.leftmost() != 0 || farm.Hash64(p.b[offInfo:g.hdr]) != le.Uint64(p.b[offCheck:]) {
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
	end := g.hdr + n*g.innerEntry
	if farm.Hash64(p.b[offInfo:end]) != le.Uint64(p.b[offCheck:]) {
		return false
	}
	for i := range n {
		if kl := int(p.b[g.hdr+i*g.innerEntry]); kl == 0 || kl > g.keySize {
			return false
		}
	}
	return true
}

// entry returns the bytes of leaf slot i.
func (p page) entry(i int) []byte {
	o := p.g.hdr + i*p.g.leafEntry
	return p.b[o : o+p.g.leafEntry]
}

// entryOffset returns the byte offset of leaf slot i in the page.
func (g *geometry) entryOffset(i int) int { return g.hdr + i*g.leafEntry }

// leafKV returns the key and value of leaf slot i (nil key: free slot).
func (p page) leafKV(i int) (key, value []byte) {
	e := p.entry(i)
	kl := int(e[4])
	if kl == 0 {
		return nil, nil
	}
	vl := int(le.Uint16(e[6:]))
	return e[8 : 8+kl], e[8+p.g.kp : 8+p.g.kp+vl]
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
	o := p.g.hdr + i*p.g.innerEntry
	return p.b[o+8 : o+8+int(p.b[o])]
}

// innerChild returns the child of internal entry i.
func (p page) innerChild(i int) remote.Addr {
	o := p.g.hdr + i*p.g.innerEntry + 8 + p.g.kp
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

// entryCheck computes the check of a leaf entry: the low 32 bits of a hash of
// its bytes after the check field, seeded with the page version, so that an
// entry of another version of the page never validates.
func entryCheck(e []byte, version uint32) uint32 {
	return uint32(farm.Hash64WithSeed(e[4:], uint64(version)))
}

// entryValid reports whether leaf entry e is consistent for page version v.
func (g *geometry) entryValid(e []byte, v uint32) bool {
	kl, vl := int(e[4]), int(le.Uint16(e[6:]))
	if kl > g.keySize || vl > g.valueSize || e[5] != 0 || (kl == 0 && vl != 0) {
		return false
	}
	return le.Uint32(e) == entryCheck(e, v)
}

// putEntry encodes a leaf entry (nil key: a free slot) into e for page
// version v.
func (g *geometry) putEntry(e []byte, v uint32, key, value []byte) {
	clear(e)
	if key != nil {
		e[4] = byte(len(key))
		le.PutUint16(e[6:], uint16(len(value)))
		copy(e[8:], key)
		copy(e[8+g.kp:], value)
	}
	le.PutUint32(e, entryCheck(e, v))
}

// putHeader encodes h into b, leaving the check for the caller.
func (g *geometry) putHeader(b []byte, h *header, count int) {
	var flags uint64
	if h.highInf {
		flags = flagHighInf
	}
	le.PutUint64(b[offInfo:], uint64(h.version)|uint64(h.level)<<32|flags<<40|uint64(count)<<48)
	le.PutUint64(b[offSibling:], uint64(h.sibling))
	le.PutUint64(b[offLeftmost:], uint64(h.leftmost))
	b[offFences] = byte(len(h.low))
	copy(b[offLow:offLow+g.kp], h.low)
	if !h.highInf {
		b[offFences+1] = byte(len(h.high))
		copy(b[offLow+g.kp:offLow+2*g.kp], h.high)
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
	le.PutUint64(b[offCheck:], farm.Hash64(b[offInfo:g.hdr]))
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
		o := g.hdr + i*g.innerEntry
		b[o] = byte(len(s.key))
		copy(b[o+8:], s.key)
		le.PutUint64(b[o+8+g.kp:], uint64(s.child))
	}
	end := g.hdr + len(seps)*g.innerEntry
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
