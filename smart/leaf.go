package smart

import (
	"bytes"
	"encoding/binary"

	farm "github.com/dgryski/go-farm"
	"github.com/dmindex/dmindex/remote"
)

// leafImage builds the bytes of a new leaf of class c holding key and value,
// born in epoch birth, into buf (grown as needed) and returns them. The lock
// word (last 8 bytes) is 0 (free) and the reverse pointer is rev.
func leafImage(buf []byte, rev remote.Addr, key, value []byte, class int, birth uint32) []byte {
	n := classBytes(class)
	buf = grow(buf, n)
	clear(buf)
	binary.LittleEndian.PutUint64(buf[leafRevOff:], uint64(rev))
	fillLeafData(buf, key, value, class, birth)
	return buf
}

// fillLeafData writes meta, key, value, zero padding and checksum into the
// image of a leaf of class c (all but the reverse pointer and the lock
// word), and returns the meta word.
func fillLeafData(buf, key, value []byte, class int, birth uint32) uint64 {
	meta := makeMeta(len(key), len(value), class, birth)
	binary.LittleEndian.PutUint64(buf[leafMetaOff:], meta)
	copy(buf[leafKeyOff:], key)
	end := leafKeyOff + len(key) + len(value)
	copy(buf[leafKeyOff+len(key):], value)
	sum := leafSumOff(class)
	clear(buf[end:sum])
	binary.LittleEndian.PutUint64(buf[sum:], leafChecksum(meta, buf[leafKeyOff:end]))
	return meta
}

// leafSumOff is the offset of the checksum in a leaf of class c: the word
// before the lock word, so that the value, the padding, the checksum and
// the lock word are one contiguous range an in-place update of the value
// writes (the meta word and the key stay as they are).
func leafSumOff(c int) int { return classBytes(c) - 16 }

// leafChecksum covers the meta word without its valid bit, the key and the
// value: a reader that sees a torn leaf (a writer's lines half applied)
// fails the check and reads again.
func leafChecksum(meta uint64, kv []byte) uint64 {
	return farm.Hash64WithSeed(kv, meta&^metaValidBit)
}

// leafView is a decoded leaf read from remote memory.
type leafView struct {
	rev   remote.Addr
	meta  uint64
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
// per search (a sixth of a 48-byte leaf).
func leafReadBytes(c int) int { return classBytes(c) - 8 }

// parseLeaf decodes a leaf of class c read into buf: the whole leaf, or
// leafReadBytes of it (lock is then 0).
func parseLeaf(buf []byte, class int) (leafView, leafState) {
	var v leafView
	n := classBytes(class)
	if len(buf) < n-8 {
		return v, leafTorn
	}
	v.rev = remote.Addr(binary.LittleEndian.Uint64(buf[leafRevOff:]))
	v.meta = binary.LittleEndian.Uint64(buf[leafMetaOff:])
	if len(buf) >= n {
		v.lock = binary.LittleEndian.Uint64(buf[n-8:])
	}
	k, l := metaKeyLen(v.meta), metaValLen(v.meta)
	if k == 0 || leafPayload(k, l) > n || metaClass(v.meta) != class {
		if v.meta != 0 && !metaValid(v.meta) {
			return v, leafRetired
		}
		return v, leafTorn
	}
	kv := buf[leafKeyOff : leafKeyOff+k+l]
	if leafChecksum(v.meta, kv) != binary.LittleEndian.Uint64(buf[leafSumOff(class):]) {
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
