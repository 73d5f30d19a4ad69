package ycsb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unicode"
)

// KeyType turns YCSB key numbers into index keys.
type KeyType uint8

const (
	// KeyInt encodes a key number as 8 bytes, big-endian, so that byte order
	// is numeric order (SMART's int2key; index-microbench's "randint").
	KeyInt KeyType = iota
	// KeyEmail encodes a key number as a synthetic e-mail address with the
	// host reversed and moved in front of the user, the pre-processing of the
	// SMART paper and index-microbench ("john@gmail.com" becomes
	// "com.gmail@john…"). Addresses are deterministic, distinct for distinct
	// key numbers and at most EmailMaxLen bytes long.
	KeyEmail
)

// EmailMaxLen is the length bound of KeyEmail keys (the paper's 32-byte
// string keys).
const EmailMaxLen = 32

// ParseKeyType parses "int" (or "randint") and "email".
func ParseKeyType(s string) (KeyType, error) {
	switch s {
	case "int", "randint":
		return KeyInt, nil
	case "email":
		return KeyEmail, nil
	}
	return 0, fmt.Errorf("ycsb: unknown key type %q (want int or email)", s)
}

// String returns "int" or "email".
func (k KeyType) String() string {
	switch k {
	case KeyInt:
		return "int"
	case KeyEmail:
		return "email"
	}
	return fmt.Sprintf("KeyType(%d)", uint8(k))
}

// MaxLen returns the longest key the type produces: 8 for KeyInt,
// EmailMaxLen for KeyEmail. Fixed-size indexes (Sherman) use it as their
// key size.
func (k KeyType) MaxLen() int {
	if k == KeyEmail {
		return EmailMaxLen
	}
	return 8
}

// AppendKey appends the key of key number v to dst and returns the extended
// slice.
func (k KeyType) AppendKey(dst []byte, v uint64) []byte {
	if k == KeyEmail {
		return appendEmail(dst, v)
	}
	return binary.BigEndian.AppendUint64(dst, v)
}

// FormatKey returns key as it appears in an index-microbench trace: the
// decimal number for KeyInt, the address itself for KeyEmail. A key that is
// not one of the type (a KeyInt key that is not 8 bytes long; an empty
// KeyEmail key, or one with white space) has no such text: FormatKey then
// returns a text that ParseKey rejects, a KeyInt key quoted as error
// messages quote keys ("abc", or 0x0102 for binary bytes), a KeyEmail key
// as it is; WriteTrace refuses such keys.
func (k KeyType) FormatKey(key []byte) string {
	switch {
	case k != KeyInt:
		return string(key)
	case len(key) != 8:
		return quoteKey(key)
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(key), 10)
}

// ParseKey is the inverse of FormatKey. KeyInt accepts any unsigned 64-bit
// decimal; KeyEmail accepts any non-empty token without white space (as
// unicode.IsSpace defines it, where ReadTrace splits a line into fields).
func (k KeyType) ParseKey(s string) ([]byte, error) {
	if k == KeyInt {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ycsb: int key %q: %w", s, err)
		}
		return binary.BigEndian.AppendUint64(nil, v), nil
	}
	key := []byte(s)
	if err := k.checkKey(key); err != nil {
		return nil, fmt.Errorf("ycsb: %w", err)
	}
	return key, nil
}

// checkKey returns nil if key is a key of type k, one whose text
// (FormatKey) ParseKey reads back as key: 8 bytes for KeyInt, a non-empty
// token without white space for KeyEmail. Otherwise it says why not.
func (k KeyType) checkKey(key []byte) error {
	switch {
	case k == KeyInt && len(key) != 8:
		return fmt.Errorf("int key %s is %d bytes long, not 8", quoteKey(key), len(key))
	case k != KeyInt && (len(key) == 0 || bytes.ContainsFunc(key, unicode.IsSpace)):
		return fmt.Errorf("email key %s is empty or has white space", quoteKey(key))
	}
	return nil
}

// FNVHash64 is YCSB's Utils.fnvhash64: 64-bit FNV-1a over the eight bytes
// of v, least significant first, then Java's Math.abs (which leaves
// math.MinInt64 unchanged; its bit pattern is returned as is). CoreWorkload
// with insertorder=hashed names record n by FNVHash64(n), and the scrambled
// Zipfian generator uses it to spread popular items over the key space.
func FNVHash64(v uint64) uint64 {
	h := uint64(0xCBF29CE484222325)
	for range 8 {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	if s := int64(h); s < 0 && s != math.MinInt64 {
		return uint64(-s)
	}
	return h
}

// Synthetic addresses: key number v (63 significant bits after FNVHash64) is
// split injectively into a host (4 bits), a first name (6 bits) and the rest
// written in base 36 without leading zeros, so distinct numbers give
// distinct addresses, hosts and names are shared prefixes as in a real
// address list, and the longest address is 11+1+8+11 = 31 bytes.
var (
	emailHosts = [16]string{
		"com.gmail", "com.yahoo", "com.hotmail", "com.outlook",
		"com.aol", "com.icloud", "net.comcast", "de.web",
		"fr.orange", "uk.co.bt", "ru.mail", "com.qq",
		"cn.163", "org.apache", "edu.mit", "jp.co.nifty",
	}
	emailNames = [64]string{
		"john", "mary", "james", "linda", "robert", "susan", "michael", "karen",
		"david", "lisa", "william", "nancy", "richard", "betty", "joseph", "sandra",
		"thomas", "ashley", "charles", "donna", "daniel", "emily", "matthew", "carol",
		"anthony", "michelle", "mark", "amanda", "paul", "melissa", "steven", "deborah",
		"andrew", "laura", "kenneth", "rebecca", "joshua", "sharon", "kevin", "cynthia",
		"brian", "kathleen", "george", "amy", "timothy", "angela", "ronald", "anna",
		"jason", "brenda", "edward", "pamela", "jeffrey", "emma", "ryan", "nicole",
		"jacob", "helen", "gary", "samantha", "info", "admin", "sales", "support",
	}
)

func appendEmail(dst []byte, v uint64) []byte {
	dst = append(dst, emailHosts[v&15]...)
	dst = append(dst, '@')
	dst = append(dst, emailNames[(v>>4)&63]...)
	return strconv.AppendUint(dst, v>>10, 36)
}
