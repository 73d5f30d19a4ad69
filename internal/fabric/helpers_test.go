//go:build fabric

package fabric

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testTimeout bounds every connection and batch of the tests.
const testTimeout = 3 * time.Second

// The provider and host the tests run on: sockets on 127.0.0.1 unless the
// environment names others, e.g. on an RDMA machine
//
//	FABRIC_TEST_PROVIDER=verbs FABRIC_TEST_HOST=10.0.0.5 go test -tags fabric ./internal/fabric/
//
// Child processes inherit the environment and so the same choice.
var (
	testProvider = envOr("FABRIC_TEST_PROVIDER", "sockets")
	testHost     = envOr("FABRIC_TEST_HOST", "127.0.0.1")
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// testListen listens on testHost at a free port with testProvider.
func testListen(regions [][]byte) (*Server, error) {
	return Listen(ServerConfig{Provider: testProvider, Addr: net.JoinHostPort(testHost, "0")}, regions)
}

// testDialConfig is the tests' DialConfig for addr. It enables the verbs
// atomics workaround, so that on RDMA hardware with libfabric < 2.2 the
// tests exercise it (it is ignored elsewhere).
func testDialConfig(addr string) DialConfig {
	return DialConfig{Provider: testProvider, Addr: addr, Timeout: testTimeout, VerbsAtomicsWorkaround: true}
}

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

// startServer listens with testListen over regions of the given sizes and closes the server at the end of the test.
func startServer(tb testing.TB, sizes ...int) (*Server, [][]byte) {
	tb.Helper()
	regions := make([][]byte, len(sizes))
	for i, n := range sizes {
		regions[i] = mapRegion(tb, n)
	}
	s, err := testListen(regions)
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, regions
}

// dial connects to addr with testDialConfig and closes the connection at
// the end of the test.
func dial(tb testing.TB, addr string) *Conn {
	tb.Helper()
	c, err := Dial(testDialConfig(addr))
	if err != nil {
		tb.Fatalf("Dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
