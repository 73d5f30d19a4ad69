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

// fullFSBytes is the size of the file system of TestShmFileSystemFull, an
// eighth of its memory node.
const fullFSBytes = 1 << 20

// TestShmFileSystemFull places a memory node of 8 MiB on a tmpfs of 1 MiB
// (mounted by a child process in a mount namespace of its own, so nothing
// outlives it) and writes the whole node. The pool must either be refused
// or fail the allocations or writes that do not fit with ErrOutOfMemory; a
// process killed by SIGBUS when a write reaches a page the file system
// cannot back is a failure.
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
		t.Fatalf("a memory node larger than its file system: %v", err)
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
	p, err := NewPool(Config{NodeBytes: 8 * fullFSBytes, OnChipBytes: 4096, Shm: &ShmConfig{Dir: filepath.Join(mnt, "pool")}})
	if errors.Is(err, ErrOutOfMemory) {
		fmt.Printf("RESULT NewPool refused the node: %v\n", err)
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
	for {
		a, err := c.AllocOn(ctx, 0, len(page), len(page))
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
	if written > fullFSBytes {
		t.Fatalf("wrote %d bytes to a file system of %d", written, fullFSBytes)
	}
	fmt.Printf("RESULT wrote %d bytes, then ErrOutOfMemory\n", written)
}
