//go:build linux

package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dmindex/dmindex/internal/childtest"
)

// fullFSBytes is the size of the file system of TestShmFileSystemFull.
const fullFSBytes = 1 << 20

// TestShmFileSystemFull places on a tmpfs of 1 MiB (mounted by a child
// process in a mount namespace of its own, so nothing outlives it) a
// memory node of 8 MiB, then a pool of 2 memory nodes of 3/4 MiB (each
// fits the free space, both do not), and writes every node whole. Each
// pool must either be refused or fail the allocations or writes that do
// not fit with ErrOutOfMemory; a process killed by SIGBUS when a write
// reaches a page the file system cannot back is a failure.
func TestShmFileSystemFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	probe := make(chan error)
	go func() {
		// The thread leaves the mount namespace of the process: it is
		// never unlocked, so it ends with the goroutine.
		runtime.LockOSThread()
		probe <- unix.Unshare(unix.CLONE_NEWNS)
	}()
	if err := <-probe; err != nil {
		t.Skipf("no mount namespaces: %v", err)
	}
	c := childtest.Start(t, childtest.Options{Test: "TestShmFullChild", Arg: t.TempDir(), Timeout: time.Minute,
		SysProcAttr: &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}})
	if err := c.Wait(); err != nil {
		t.Fatalf("memory nodes larger than their file system: %v", err)
	}
	if skip := c.Lines("SKIP "); len(skip) > 0 {
		t.Skip(skip[0])
	}
	t.Log(c.Lines("RESULT "))
}

// TestShmFullChild is the child of TestShmFileSystemFull.
func TestShmFullChild(t *testing.T) {
	mnt, ok := childtest.Arg()
	if !ok {
		t.Skip("run by TestShmFileSystemFull")
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", fullFSBytes)); err != nil {
		fmt.Printf("SKIP mounting a tmpfs: %v\n", err)
		return
	}
	fillShm(t, Config{NodeBytes: 8 * fullFSBytes, OnChipBytes: 4096, Shm: &ShmConfig{Dir: filepath.Join(mnt, "pool")}})
	fillShm(t, Config{MemoryNodes: 2, NodeBytes: fullFSBytes * 3 / 4, OnChipBytes: 4096, Shm: &ShmConfig{Dir: filepath.Join(mnt, "pool2")}})
}

// fillShm opens a pool of cfg and writes pages on each of its memory nodes
// until an allocation or a write fails with ErrOutOfMemory, and prints
// the outcome.
func fillShm(t *testing.T, cfg Config) {
	p, err := NewPool(cfg)
	if errors.Is(err, ErrOutOfMemory) {
		fmt.Printf("RESULT NewPool refused %d memory node(s): %v\n", max(cfg.MemoryNodes, 1), err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	page := make([]byte, 4096)
	written := 0
	for mn := range p.MemoryNodes() {
		for {
			a, err := c.AllocOn(ctx, mn, len(page), len(page))
			if err == nil {
				err = c.Write(ctx, a, page)
			}
			if errors.Is(err, ErrOutOfMemory) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			written += len(page)
		}
	}
	if written > fullFSBytes {
		t.Fatalf("wrote %d bytes to a file system of %d", written, fullFSBytes)
	}
	fmt.Printf("RESULT wrote %d bytes to %d memory node(s), then ErrOutOfMemory\n", written, p.MemoryNodes())
}
