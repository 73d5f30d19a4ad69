//go:build fabric

package fabric

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// pollSlice is how long the server's event loop blocks in fi_eq_sread
// before it looks at its stop signal; it bounds Close's latency.
const pollSlice = 50 * time.Millisecond

// ServerConfig configures Listen. Its zero value listens on every address
// at a free port with the first suitable provider.
type ServerConfig struct {
	// Provider is the libfabric provider: "verbs" or "sockets"; "" takes
	// the first that offers FI_EP_MSG with FI_RMA|FI_ATOMIC (verbs when an
	// RDMA device is present).
	Provider string
	// Addr is the host:port to listen on; port 0 (or an empty Addr) picks
	// a free port. With verbs the host must be an address of an RDMA
	// device's network interface.
	Addr string
	// Domain optionally names the domain: a device ("mlx5_0") for verbs,
	// an interface ("lo") for sockets.
	Domain string
}

// Server is a memory node's side: its regions registered for remote READ,
// WRITE and atomics, and a passive endpoint accepting FI_EP_MSG
// connections. An event loop goroutine accepts connections and closes the
// endpoints of peers that shut down or die (a SIGKILLed client is one), so
// the others keep being served. The data path needs no server CPU beyond
// the provider's own (none with verbs; the sockets provider's progress
// thread emulates the NIC).
type Server struct {
	h         *C.struct_fs_server
	pub       *C.struct_fs_server_pub
	addr      string
	prov      string
	regions   []Region
	endpoints atomic.Int64
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Listen registers regions and starts accepting connections. Every region
// must be non-empty memory outside the Go heap (mmap'd or C-allocated) that
// stays mapped until Close returns: the provider reads and writes it at any
// time. Errors wrap ErrInvalid (bad address, empty region) or
// ErrUnsupported (no such provider).
func Listen(cfg ServerConfig, regions [][]byte) (*Server, error) {
	host, port := "", "0"
	if cfg.Addr != "" {
		var err error
		if host, port, err = net.SplitHostPort(cfg.Addr); err != nil {
			return nil, fmt.Errorf("%w: listen address %q: %v", ErrInvalid, cfg.Addr, err)
		}
		if port == "" {
			port = "0"
		}
	}
	for i, r := range regions {
		if len(r) == 0 {
			return nil, fmt.Errorf("%w: region %d is empty", ErrInvalid, i)
		}
	}
	initEnv()
	cs := newCStrings(cfg.Provider, host, port, cfg.Domain)
	defer cs.free()
	h := C.fs_server_new()
	if h == nil {
		return nil, errors.New("fabric: out of memory")
	}
	s := &Server{h: h, pub: C.fs_server_pub(h), stop: make(chan struct{}), done: make(chan struct{})}
	fail := func(rc C.int) (*Server, error) {
		err := shimError(rc, C.GoString(&s.pub.err[0]))
		C.fs_server_close(h)
		return nil, err
	}
	if rc := C.fs_server_open(h, cs.p[0], cs.p[1], cs.p[2], cs.p[3]); rc != C.FS_OK {
		return fail(rc)
	}
	for _, r := range regions {
		var out C.struct_fs_region
		if rc := C.fs_server_reg(h, unsafe.Pointer(unsafe.SliceData(r)), C.uint64_t(len(r)), &out); rc != C.FS_OK {
			return fail(rc)
		}
		s.regions = append(s.regions, Region{Base: uint64(out.base), Key: uint64(out.key), Len: uint64(out.len)})
	}
	if rc := C.fs_server_listen(h); rc != C.FS_OK {
		return fail(rc)
	}
	s.addr = net.JoinHostPort(C.GoString(&s.pub.host[0]), C.GoString(&s.pub.port[0]))
	s.prov = C.GoString(&s.pub.prov[0])
	go s.loop()
	return s, nil
}

// loop handles connection events until Close: connection requests,
// established connections, shutdowns and errors of endpoints.
func (s *Server) loop() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		rc := C.fs_server_poll(s.h, C.int(pollSlice.Milliseconds()))
		s.endpoints.Store(int64(s.pub.endpoints))
		if rc != C.FS_OK {
			time.Sleep(pollSlice / 5) // a failing EQ must not spin
		}
	}
}

// Addr returns the host:port the server is bound to, where clients Dial.
func (s *Server) Addr() string { return s.addr }

// Provider returns the name of the server's provider.
func (s *Server) Provider() string { return s.prov }

// Regions returns the registered regions, in the order given to Listen.
func (s *Server) Regions() []Region { return append([]Region(nil), s.regions...) }

// Endpoints returns how many connections are open: accepted and not yet
// shut down by their peer (as of the event loop's last pass).
func (s *Server) Endpoints() int { return int(s.endpoints.Load()) }

// Close stops accepting, closes every endpoint (their clients get
// ErrUnavailable), deregisters the regions and releases every libfabric
// object; the regions may be unmapped once it returns. Closing a closed
// Server returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		C.fs_server_close(s.h)
		s.h, s.pub = nil, nil
		s.endpoints.Store(0)
	})
	return nil
}
