//go:build unix

package remote

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newWords returns a zeroed region of n 8-byte words backed by an anonymous
// private mapping: the kernel provides zero pages on first touch, so a large
// memory node costs only the pages actually written, and the mapping is
// returned to the kernel when owner becomes unreachable (never while a verb
// can still reach it: verbs hold the pool). The Go heap would instead zero
// (and so touch) every reused page of a multi-gigabyte node.
func newWords(owner *memNode, n int) []uint64 {
	if n == 0 {
		return nil
	}
	b, err := unix.Mmap(-1, 0, n*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	if err != nil {
		return make([]uint64, n) // fall back to the heap
	}
	runtime.AddCleanup(owner, func(b []byte) { _ = unix.Munmap(b) }, b)
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n)
}
