package smart

import "errors"

// Keys are arbitrary byte strings, and keys may be prefixes of one another,
// but a radix tree needs prefix-free keys. The tree therefore stores the
// encoding of each key, which is prefix-free and order-preserving:
//
//	0x00 → 0x01 0x01
//	0x01 → 0x01 0x02
//	b    → b            (b ≥ 0x02)
//	then the terminator 0x00
//
// The terminator sorts below every encoded byte, so a key sorts before its
// extensions, and it never occurs inside an encoding, so no encoding is a
// prefix of another. A 255-byte key encodes to at most 511 bytes.

const (
	// MaxKeyLen is the longest key SMART accepts.
	MaxKeyLen = 255
	// MaxValueLen is the largest value SMART accepts.
	MaxValueLen = 64 << 10
)

// appendEncoded appends the encoding of key to dst.
func appendEncoded(dst, key []byte) []byte {
	for _, b := range key {
		switch b {
		case 0x00:
			dst = append(dst, 0x01, 0x01)
		case 0x01:
			dst = append(dst, 0x01, 0x02)
		default:
			dst = append(dst, b)
		}
	}
	return append(dst, 0x00)
}

var errBadEncoding = errors.New("smart: malformed key encoding")

// appendDecoded appends the key whose encoding is enc to dst. It fails on
// input that no key encodes to.
func appendDecoded(dst, enc []byte) ([]byte, error) {
	for i := 0; i < len(enc); i++ {
		switch enc[i] {
		case 0x00:
			if i != len(enc)-1 {
				return dst, errBadEncoding
			}
			return dst, nil
		case 0x01:
			if i+1 >= len(enc) || (enc[i+1] != 0x01 && enc[i+1] != 0x02) {
				return dst, errBadEncoding
			}
			dst = append(dst, enc[i+1]-1)
			i++
		default:
			dst = append(dst, enc[i])
		}
	}
	return dst, errBadEncoding
}
