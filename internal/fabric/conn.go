//go:build fabric

package fabric

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
	"unsafe"
)

// Defaults of DialConfig.
const (
	// DefaultTimeout bounds connection setup and, unless BatchTimeout is
	// set, every batch.
	DefaultTimeout = 5 * time.Second
	// DefaultStagingBytes is the initial size of a Conn's registered
	// staging buffer.
	DefaultStagingBytes = 1 << 20
)

// DialConfig configures Dial. Only Addr is required.
type DialConfig struct {
	// Provider is the libfabric provider: "verbs" or "sockets"; "" takes
	// the first that offers FI_EP_MSG with FI_RMA|FI_ATOMIC at Addr (verbs
	// when an RDMA device is present).
	Provider string
	// Addr is the Server's host:port (Server.Addr).
	Addr string
	// Domain optionally names the local domain: a device ("mlx5_0") for
	// verbs, an interface ("lo") for sockets.
	Domain string
	// Timeout bounds connection setup; 0 means DefaultTimeout.
	Timeout time.Duration
	// BatchTimeout is the watchdog of one Do: a batch not completed in
	// this time fails with ErrUnavailable and breaks the Conn. 0 means
	// Timeout.
	BatchTimeout time.Duration
	// StagingBytes is the initial size of the registered staging buffer
	// that READ and WRITE data and atomic operands pass through; a batch
	// needing more runs in several rounds, and a single operation needing
	// more grows the buffer. 0 means DefaultStagingBytes.
	StagingBytes int
	// VerbsAtomicsWorkaround enables CAS and FAA over verbs on libfabric
	// < 2.2 by passing the values where its buggy code reads them (see the
	// package doc). Untested on hardware; ignored on other providers and
	// on fixed libraries.
	VerbsAtomicsWorkaround bool
}

// Conn is one connected FI_EP_MSG endpoint (like an RC queue pair) with its
// own fabric, domain, completion and event queues and staging buffer. It is
// safe for concurrent use: batches are serialized, each one completing
// before the next is posted. Close it to release its libfabric objects and
// C memory: they are not garbage collected.
type Conn struct {
	mu           sync.Mutex
	h            *C.struct_fs_conn // nil once closed
	pub          *C.struct_fs_conn_pub
	ops          []C.struct_fs_op // the C array of one round
	staging      []byte           // view of the C staging buffer
	prov         string
	window       int
	maxMsg       uint64
	batchTimeout time.Duration
	atomicsErr   error // non-nil: CAS and FAA are refused with it
	broken       error // non-nil: every Do returns it
}

// Dial connects to the Server at cfg.Addr. Errors wrap ErrUnavailable (the
// server refused or did not answer in cfg.Timeout), ErrUnsupported (no such
// provider) or ErrInvalid (a malformed address).
func Dial(cfg DialConfig) (*Conn, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("%w: dial address %q: want host:port", ErrInvalid, cfg.Addr)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	batch := cfg.BatchTimeout
	if batch <= 0 {
		batch = timeout
	}
	staging := cfg.StagingBytes
	if staging <= 0 {
		staging = DefaultStagingBytes
	}
	initEnv()
	cs := newCStrings(cfg.Provider, host, port, cfg.Domain)
	defer cs.free()
	h := C.fs_conn_new()
	if h == nil {
		return nil, errors.New("fabric: out of memory")
	}
	pub := C.fs_conn_pub(h)
	workaround := C.int(0)
	if cfg.VerbsAtomicsWorkaround {
		workaround = 1
	}
	rc := C.fs_conn_open(h, cs.p[0], cs.p[1], cs.p[2], cs.p[3], millis(timeout),
		C.uint64_t(staging), workaround)
	if rc != C.FS_OK {
		err := shimError(rc, C.GoString(&pub.err[0]))
		C.fs_conn_close(h)
		return nil, err
	}
	c := &Conn{
		h:            h,
		pub:          pub,
		prov:         C.GoString(&pub.prov[0]),
		window:       int(pub.window),
		maxMsg:       uint64(pub.max_msg),
		batchTimeout: batch,
	}
	c.ops = unsafe.Slice(pub.ops, c.window)
	c.viewStaging()
	switch {
	case pub.atomics == 0:
		c.atomicsErr = fmt.Errorf("%w: provider %s has no 8-byte CSWAP/SUM atomics", ErrUnsupported, c.prov)
	case pub.verbs_atomic_bug != 0 && pub.workaround == 0:
		major, minor := Version()
		c.atomicsErr = fmt.Errorf("%w: verbs atomics are broken in libfabric %d.%d (< 2.2: operands are sent as pointers); "+
			"upgrade libfabric or set DialConfig.VerbsAtomicsWorkaround", ErrUnsupported, major, minor)
	}
	return c, nil
}

// viewStaging points c.staging at the C staging buffer.
func (c *Conn) viewStaging() {
	c.staging = unsafe.Slice((*byte)(unsafe.Pointer(c.pub.staging)), int(c.pub.staging_len))
}

// Provider returns the name of the connection's provider ("verbs",
// "sockets").
func (c *Conn) Provider() string { return c.prov }

// Window returns the most operations posted before completions are reaped:
// the endpoint's send-queue size, at most 256. Longer batches run in
// several rounds.
func (c *Conn) Window() int { return c.window }

// Close shuts the connection down and releases every libfabric object and
// the staging buffer. Closing a closed Conn returns nil.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != nil {
		C.fs_conn_close(c.h)
		c.h, c.pub, c.ops, c.staging = nil, nil, nil, nil
	}
	return nil
}

// cStrings holds C copies of Go strings for the duration of one call.
type cStrings struct{ p []*C.char }

// newCStrings copies ss into C memory; free releases them.
func newCStrings(ss ...string) cStrings {
	cs := cStrings{p: make([]*C.char, len(ss))}
	for i, s := range ss {
		cs.p[i] = C.CString(s)
	}
	return cs
}

func (cs cStrings) free() {
	for _, p := range cs.p {
		C.free(unsafe.Pointer(p))
	}
}
