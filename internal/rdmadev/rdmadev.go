package rdmadev

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// ErrNoDevice: the named device or port does not exist.
var ErrNoDevice = errors.New("rdmadev: no such RDMA device or port")

// Device is one RDMA device as the kernel lists it.
type Device struct {
	// Name is the kernel's name ("mlx5_0"), which is also the domain name
	// of libfabric's verbs provider.
	Name string
	// CharDevices are its character devices under /dev/infiniband
	// (uverbs, umad, issm, rdma_cm).
	CharDevices []string
	// Ports are its port numbers, ascending from 1.
	Ports []int
	// NetDevs are the network interfaces it backs: the Ethernet interface
	// of a RoCE port, the IPoIB interface of an InfiniBand port.
	NetDevs []NetDev
}

// NetDev is a network interface backed by an RDMA device.
type NetDev struct {
	Name string
	// Addrs are its IP addresses: a memory node serving with verbs
	// listens on one of them.
	Addrs []netip.Addr
}

// Counter is one port counter.
type Counter struct {
	Name  string
	Value uint64
	// HW marks a driver-specific counter (sysfs hw_counters) rather than
	// a standard InfiniBand port counter (sysfs counters).
	HW bool
}

// parsePorts converts the port directory names of device dev to numbers,
// ascending.
func parsePorts(dev string, names []string) ([]int, error) {
	ports := make([]int, 0, len(names))
	for _, s := range names {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 {
			return nil, fmt.Errorf("rdmadev: device %s: port %q is not a port number", dev, s)
		}
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports, nil
}

// sortCounters orders counters standard first, then by name.
func sortCounters(cs []Counter) {
	slices.SortFunc(cs, func(a, b Counter) int {
		if a.HW != b.HW {
			if a.HW {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
}
