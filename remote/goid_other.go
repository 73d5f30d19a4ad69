//go:build !amd64 && !arm64

package remote

import (
	"bytes"
	"runtime"
	"strconv"
)

// curG identifies the calling goroutine by its number, parsed from the
// header of its stack trace (slow; amd64 and arm64 read the runtime's
// goroutine pointer instead). The simulator uses it to tell the goroutine
// holding its token from any other (sim.enter).
func curG() uintptr {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, err := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		panic("remote: cannot parse the goroutine number: " + err.Error())
	}
	return uintptr(n)
}
