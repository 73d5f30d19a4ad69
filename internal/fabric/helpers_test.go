//go:build fabric

package fabric

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testTimeout bounds every connection and batch of the tests.
const testTimeout = 3 * time.Second

// mapRegion returns n zeroed bytes of anonymous mmap'd memory, unmapped at
// the end of the test (after servers registered later are closed).
func mapRegion(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		tb.Fatalf("mmap %d bytes: %v", n, err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// startServer listens on 127.0.0.1 with the sockets provider over regions
// of the given sizes and closes the server at the end of the test.
func startServer(tb testing.TB, sizes ...int) (*Server, [][]byte) {
	tb.Helper()
	regions := make([][]byte, len(sizes))
	for i, n := range sizes {
		regions[i] = mapRegion(tb, n)
	}
	s, err := Listen(ServerConfig{Provider: "sockets", Addr: "127.0.0.1:0"}, regions)
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, regions
}

// dial connects to addr with the sockets provider and closes the
// connection at the end of the test.
func dial(tb testing.TB, addr string) *Conn {
	tb.Helper()
	c, err := Dial(DialConfig{Provider: "sockets", Addr: addr, Timeout: testTimeout})
	if err != nil {
		tb.Fatalf("Dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
