//go:build fabric

package main

import (
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/dmindex/dmindex/internal/rdmadev"
	"github.com/dmindex/dmindex/remote"
)

// addFabricFlags registers --provider, --fabric-listen, --device and
// --list-devices, and returns the function that applies them: it fills in
// cfg.Fabric, or lists the RDMA devices and reports that memnode is done.
func addFabricFlags(fs *flag.FlagSet) func(*remote.ServerConfig, io.Writer) (bool, error) {
	provider := fs.String("provider", "", "libfabric provider of the one-sided endpoint: verbs or sockets "+
		"(default: verbs when an RDMA device is found, else TCP only); none: serve TCP only")
	listen := fs.String("fabric-listen", "", "`host:port` of the fabric endpoint (default: the --listen host, any port; "+
		"with verbs, the address of the device's network interface)")
	device := fs.String("device", "", "RDMA device (e.g. mlx5_0) or, for sockets, interface to serve on")
	list := fs.Bool("list-devices", false, "list the RDMA devices, their ports, interfaces and port counters, and exit")
	return func(cfg *remote.ServerConfig, stdout io.Writer) (bool, error) {
		devs, err := rdmadev.Devices()
		if err != nil {
			return false, fmt.Errorf("listing RDMA devices: %w", err)
		}
		if *list {
			return true, listDevices(stdout, devs)
		}
		prov := *provider
		if prov == "" && len(devs) > 0 {
			prov = "verbs"
		}
		switch prov {
		case "", "none":
			return false, nil
		case "verbs", "sockets":
		default:
			return false, fmt.Errorf("--provider %q: want verbs, sockets or none", prov)
		}
		addr := *listen
		if addr == "" {
			addr = net.JoinHostPort(hostOf(fs.Lookup("listen").Value.String()), "0")
			if prov == "verbs" {
				if a, ok := deviceAddr(devs, *device); ok {
					addr = net.JoinHostPort(a, "0")
				}
			}
		}
		cfg.Fabric = &remote.FabricServerConfig{Provider: prov, Addr: addr, Domain: *device}
		return false, nil
	}
}

// hostOf returns the host part of a host:port.
func hostOf(hp string) string {
	h, _, err := net.SplitHostPort(hp)
	if err != nil || h == "" {
		return "0.0.0.0"
	}
	return h
}

// deviceAddr returns the first IP address of the named device's network
// interfaces (of the first device if name is empty).
func deviceAddr(devs []rdmadev.Device, name string) (string, bool) {
	for _, d := range devs {
		if name != "" && d.Name != name {
			continue
		}
		for _, nd := range d.NetDevs {
			for _, a := range nd.Addrs {
				return a.String(), true
			}
		}
	}
	return "", false
}

// listDevices prints every RDMA device with its ports, interfaces and port
// counters.
func listDevices(w io.Writer, devs []rdmadev.Device) error {
	if len(devs) == 0 {
		fmt.Fprintln(w, "no RDMA devices (the sockets provider still serves the fabric transport over TCP)")
		return nil
	}
	for _, d := range devs {
		fmt.Fprintf(w, "%s ports %v\n", d.Name, d.Ports)
		for _, nd := range d.NetDevs {
			fmt.Fprintf(w, "  interface %s %v\n", nd.Name, nd.Addrs)
		}
		for _, port := range d.Ports {
			cs, err := rdmadev.PortCounters(d.Name, port)
			if err != nil {
				return err
			}
			for _, c := range cs {
				fmt.Fprintf(w, "  port %d %s %d\n", port, c.Name, c.Value)
			}
		}
	}
	return nil
}
