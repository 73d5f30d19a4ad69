package smart

import (
	"bytes"
	"encoding/binary"

	farm "github.com/dgryski/go-farm"
	"github.com/dmindex/dmindex/remote"
)

// leafFormat is the layout of a tree's leaves (docs/layouts.md):
//
//	offset 0      reverse pointer
//	offset 8      key, value, zero padding
//	size − 24     birth epoch (births: a tree opened with Options.Reclaim)
//	size − 16     meta word: lengths, valid bit, size class, checksum
//	size − 8      rear lock word
//
// Everything after the key is one contiguous range ending at the lock word,
// so an in-place update writes the value, the padding, the birth, the meta
// word and (by default) the lock's release in one WRITE, whatever the new
// value's length.
type leafFormat struct {
	births bool
}

// trailer is how many bytes follow a leaf's data: the birth word (with
// births), the meta word and the lock word.
func (f leafFormat) trailer() int {
	if f.births {
		return 24
	}
	return 16
}

// payload is the size of a leaf holding a key of k bytes and a value of v
// bytes, without padding.
func (f leafFormat) payload(k, v int) int { return leafKeyOff + k + v + f.trailer() }

// classOf returns the smallest size class of a leaf holding key and value
// (-1 if none does).
func (f leafFormat) classOf(key, value []byte) int { return classFor(f.payload(len(key), len(value))) }

// fits reports whether key and value fit a leaf of class c.
func (f leafFormat) fits(key, value []byte, c int) bool {
	return f.payload(len(key), len(value)) <= classBytes(c)
}

// image builds the bytes of a new leaf of class c holding key and value,
// born in epoch birth, into buf (grown as needed) and returns them. The
// lock word (last 8 bytes) is 0 (free) and the reverse pointer is rev.
func (f leafFormat) image(buf []byte, rev remote.Addr, key, value []byte, class int, birth uint32) []byte {
	buf = grow(buf, classBytes(class))
	binary.LittleEndian.PutUint64(buf[leafRevOff:], uint64(rev))
	f.fill(buf, key, value, class, birth)
	return buf
}

// fill writes the key, the value, zero padding, the birth (with births),
// the meta word and a free lock word into buf, the image of a leaf of
// class c (all but the reverse pointer).
func (f leafFormat) fill(buf, key, value []byte, class int, birth uint32) {
	n := classBytes(class)
	copy(buf[leafKeyOff:], key)
	end := leafKeyOff + len(key) + len(value)
	copy(buf[leafKeyOff+len(key):], value)
	clear(buf[end:])
	if !f.births {
		birth = 0
	} else {
		binary.LittleEndian.PutUint64(buf[n-24:], uint64(birth&birthMask))
	}
	meta := makeMeta(len(key), len(value), class)
	meta |= leafChecksum(meta, birth, buf[leafKeyOff:end]) << metaSumShift
	binary.LittleEndian.PutUint64(buf[n-16:], meta)
}

// leafChecksum is the 31-bit check of a leaf: a hash of its key and value
// seeded with its meta fields (lengths and class, without the valid bit)
// and its birth. A reader that sees a torn leaf (a writer's lines half
// applied) fails the check, except with probability 2^-31, and reads
// again.
func leafChecksum(meta uint64, birth uint32, kv []byte) uint64 {
	return farm.Hash64WithSeed(kv, meta&metaFields&^metaValidBit|uint64(birth)<<metaSumShift) >> metaSumShift
}

// leafView is a decoded leaf read from remote memory.
type leafView struct {
	rev   remote.Addr
	meta  uint64
	birth uint32 // 0 in a tree without births
	key   []byte // aliases the read buffer
	value []byte // aliases the read buffer
	lock  uint64 // 0 if the read left it out (leafReadBytes)
}

// leafState classifies a leaf read.
type leafState uint8

const (
	leafOK      leafState = iota
	leafTorn              // checksum mismatch or lengths out of range: read again
	leafRetired           // valid bit clear: re-read the slot
)

// leafReadBytes is what a reader that does not need the lock word reads of
// a leaf of class c (Get, Scan): all but the rear lock word, 8 bytes less
// per search (a fifth of a 40-byte leaf).
func leafReadBytes(c int) int { return classBytes(c) - 8 }

// parse decodes a leaf of class c read into buf: the whole leaf, or
// leafReadBytes of it (lock is then 0).
func (f leafFormat) parse(buf []byte, class int) (leafView, leafState) {
	var v leafView
	n := classBytes(class)
	if len(buf) < n-8 {
		return v, leafTorn
	}
	v.rev = remote.Addr(binary.LittleEndian.Uint64(buf[leafRevOff:]))
	v.meta = binary.LittleEndian.Uint64(buf[n-16:])
	if len(buf) >= n {
		v.lock = binary.LittleEndian.Uint64(buf[n-8:])
	}
	var birth uint64
	if f.births {
		birth = binary.LittleEndian.Uint64(buf[n-24:])
		v.birth = uint32(birth)
	}
	k, l := metaKeyLen(v.meta), metaValLen(v.meta)
	if k == 0 || f.payload(k, l) > n || metaClass(v.meta) != class || birth > birthMask {
		if v.meta != 0 && !metaValid(v.meta) {
			return v, leafRetired
		}
		return v, leafTorn
	}
	kv := buf[leafKeyOff : leafKeyOff+k+l]
	if leafChecksum(v.meta, v.birth, kv) != v.meta>>metaSumShift {
		return v, leafTorn
	}
	v.key, v.value = kv[:k], kv[k:]
	if !metaValid(v.meta) {
		return v, leafRetired
	}
	return v, leafOK
}

// matches reports whether the leaf holds key.
func (v *leafView) matches(key []byte) bool { return bytes.Equal(v.key, key) }

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, max(n, 2*cap(b)))
	}
	return b[:n]
}
