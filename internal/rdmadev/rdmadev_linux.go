package rdmadev

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/Mellanox/rdmamap"
)

// Devices returns the RDMA devices, sorted by name, with their ports and
// network interfaces. Without RDMA devices it returns an empty list and no
// error.
func Devices() ([]Device, error) {
	names := rdmamap.GetRdmaDeviceList()
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	netdevs, err := netDevsByDevice()
	if err != nil {
		return nil, err
	}
	devs := make([]Device, 0, len(names))
	for _, name := range names {
		ports, err := parsePorts(name, rdmamap.GetPorts(name))
		if err != nil {
			return nil, err
		}
		chars := rdmamap.GetRdmaCharDevices(name)
		slices.Sort(chars)
		devs = append(devs, Device{Name: name, CharDevices: chars, Ports: ports, NetDevs: netdevs[name]})
	}
	return devs, nil
}

// netDevsByDevice maps RDMA device names to the network interfaces they
// back.
func netDevsByDevice() (map[string][]NetDev, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("rdmadev: listing network interfaces: %w", err)
	}
	m := make(map[string][]NetDev)
	for _, ifc := range ifaces {
		dev, err := rdmamap.GetRdmaDeviceForNetdevice(ifc.Name)
		if err != nil || dev == "" {
			continue // not backed by an RDMA device (loopback, veth, ...)
		}
		nd := NetDev{Name: ifc.Name}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("rdmadev: addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				nd.Addrs = append(nd.Addrs, p.Addr())
			}
		}
		m[dev] = append(m[dev], nd)
	}
	return m, nil
}

// PortCounters returns the counters of port (from 1) of device, standard
// ones first, each group sorted by name. A device without driver-specific
// counters has only standard ones. Errors wrap ErrNoDevice when the device
// or port does not exist.
func PortCounters(device string, port int) ([]Counter, error) {
	if !slices.Contains(rdmamap.GetPorts(device), strconv.Itoa(port)) {
		return nil, fmt.Errorf("%w: %s port %d", ErrNoDevice, device, port)
	}
	std, err := rdmamap.GetRdmaSysfsStats(device, port)
	if err != nil {
		return nil, fmt.Errorf("rdmadev: counters of %s port %d: %w", device, port, err)
	}
	hw, err := rdmamap.GetRdmaSysfsHwStats(device, port)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rdmadev: hw_counters of %s port %d: %w", device, port, err)
	}
	return counters(std, hw), nil
}

// counters merges standard and driver-specific entries, sorted.
func counters(std, hw []rdmamap.RdmaStatEntry) []Counter {
	out := make([]Counter, 0, len(std)+len(hw))
	for _, e := range std {
		out = append(out, Counter{Name: e.Name, Value: e.Value})
	}
	for _, e := range hw {
		out = append(out, Counter{Name: e.Name, Value: e.Value, HW: true})
	}
	sortCounters(out)
	return out
}
