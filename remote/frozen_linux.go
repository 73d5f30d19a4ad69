package remote

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// frozen is a read-only copy of a region's words in an anonymous memory
// file (memfd): regions started from it map it privately, so they share its
// pages until they write them (copy on write), and starting one costs no
// copy.
type frozen struct {
	fd int
	n  int // words
}

// freeze copies src into a new memory file. Zero words are not written, so
// the file's pages that hold only zeros stay holes and cost nothing.
func freeze(src []uint64) (*frozen, error) {
	f := &frozen{fd: -1, n: len(src)}
	if len(src) == 0 {
		return f, nil
	}
	fd, err := unix.MemfdCreate("dmindex-snapshot", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: creating a memory file: %v", ErrOutOfMemory, err)
	}
	size := pageRound(len(src) * 8)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: sizing a memory file to %d bytes: %v", ErrOutOfMemory, size, err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: mapping a memory file of %d bytes: %v", ErrOutOfMemory, size, err)
	}
	copyWords(wordsOf(b), src)
	_ = unix.Munmap(b) // the file keeps the words
	f.fd = fd
	runtime.AddCleanup(f, func(fd int) { _ = unix.Close(fd) }, fd)
	return f, nil
}

// thaw returns a region of n ≥ f.n words of owner whose first f.n words are
// a private copy-on-write mapping of f and whose rest is zero.
func thaw(owner *memNode, f *frozen, n int) ([]uint64, error) {
	words, err := newWords(owner, n)
	if err != nil || f.n == 0 {
		return words, err
	}
	_, err = unix.MmapPtr(f.fd, 0, unsafe.Pointer(&words[0]), uintptr(pageRound(f.n*8)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	runtime.KeepAlive(f) // its descriptor stays open until the mapping exists
	if err != nil {
		return nil, fmt.Errorf("%w: mapping a snapshot of %d bytes: %v", ErrOutOfMemory, f.n*8, err)
	}
	return words, nil
}

// pageRound rounds n bytes up to whole pages.
func pageRound(n int) int {
	page := os.Getpagesize()
	return (n + page - 1) &^ (page - 1)
}
