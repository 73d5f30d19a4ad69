//go:build unix

package remote

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newWords returns a zeroed region of n 8-byte words backed by an anonymous
// private mapping: the kernel provides zero pages on first touch, so a large
// memory node costs only the pages actually written, and the mapping is
// returned to the kernel when owner becomes unreachable (never while a verb
// can still reach it: verbs hold the pool). The Go heap would instead zero
// (and so touch) every reused page of a multi-gigabyte node. A mapping the
// kernel refuses is an error, never a fallback that could exhaust memory.
func newWords(owner *memNode, n int) ([]uint64, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := unix.Mmap(-1, 0, n*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping %d bytes of memory: %v", ErrOutOfMemory, n*8, err)
	}
	runtime.AddCleanup(owner, func(b []byte) { _ = unix.Munmap(b) }, b)
	return wordsOf(b), nil
}

// wordsOf views a mapping as 8-byte words.
func wordsOf(b []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}
