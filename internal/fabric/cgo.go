//go:build fabric

package fabric

// #cgo pkg-config: libfabric
// #include <stdlib.h>
// #include <rdma/fabric.h>
// #include <rdma/fi_errno.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"
	"unsafe"
)

// envOnce sets the environment libfabric reads at its initialisation.
var envOnce sync.Once

// initEnv sets FI_SOCKETS_PE_WAITTIME=0 unless the environment sets it,
// before the first libfabric call initialises the providers: with the
// default the sockets provider's progress thread sleeps between polls and
// every round trip costs milliseconds.
func initEnv() {
	envOnce.Do(func() {
		if _, ok := os.LookupEnv("FI_SOCKETS_PE_WAITTIME"); !ok {
			_ = os.Setenv("FI_SOCKETS_PE_WAITTIME", "0")
		}
	})
}

// Version returns the major and minor version of the libfabric library in
// use (fi_version at run time).
func Version() (major, minor int) {
	v := uint32(C.fs_version())
	return int(v >> 16), int(v & 0xffff)
}

// millis converts d to whole milliseconds for the shim, rounding up and
// saturating at the largest C int.
func millis(d time.Duration) C.int {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return C.int(min(ms, math.MaxInt32))
}

// fiError returns libfabric's text for the positive error number e.
func fiError(e int) string {
	return C.GoString(C.fi_strerror(C.int(e)))
}

// shimError turns a shim result class and message into an error wrapping
// the matching sentinel.
func shimError(rc C.int, msg string) error {
	var s error
	switch rc {
	case C.FS_ENOPROV:
		s = ErrUnsupported
	case C.FS_EINVAL:
		s = ErrInvalid
	case C.FS_EUNAVAIL, C.FS_ETIMEOUT, C.FS_ESHUTDOWN, C.FS_EBADCTX:
		s = ErrUnavailable
	default:
		return errors.New("fabric: " + msg)
	}
	return fmt.Errorf("%w: %s", s, msg)
}

// ProviderInfo names one libfabric provider and domain that offer FI_EP_MSG
// endpoints with FI_RMA and FI_ATOMIC.
type ProviderInfo struct {
	Provider string // "verbs", "sockets"
	Fabric   string // verbs: "IB-0x..."; sockets: a subnet such as "127.0.0.1/32"
	Domain   string // verbs: the device ("mlx5_0"); sockets: the interface ("lo")
}

// Providers lists the providers and domains usable by Listen and Dial on
// this machine, in libfabric's order of preference (verbs first when an
// RDMA device is present). An empty list is not an error.
func Providers() ([]ProviderInfo, error) {
	initEnv()
	const n = 1 << 16
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	var msg [C.FS_ERRLEN]C.char
	if rc := C.fs_list(buf, n, &msg[0]); rc != C.FS_OK {
		return nil, shimError(rc, C.GoString(&msg[0]))
	}
	return parseProviders(C.GoString(buf)), nil
}
