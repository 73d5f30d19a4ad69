//go:build !linux

package rdmadev

import "fmt"

// Devices returns an empty list: RDMA devices are found only on Linux.
func Devices() ([]Device, error) { return nil, nil }

// PortCounters fails with ErrNoDevice: RDMA devices are found only on
// Linux.
func PortCounters(device string, port int) ([]Counter, error) {
	return nil, fmt.Errorf("%w: %s port %d (RDMA devices are listed only on Linux)", ErrNoDevice, device, port)
}
