package ycsb

import (
	"encoding/hex"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// quoteKey formats a key for an error message: quoted if it is printable
// UTF-8 text, as 0x-prefixed hex otherwise (binary keys such as KeyInt's
// would print as escape sequences), and an empty key as "".
func quoteKey(key []byte) string {
	if len(key) == 0 || utf8.Valid(key) && printable(key) {
		return strconv.Quote(string(key))
	}
	return "0x" + hex.EncodeToString(key)
}

func printable(s []byte) bool {
	for _, r := range string(s) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
