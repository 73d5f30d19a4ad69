// Package rdmadev lists the machine's RDMA devices (HCAs and RoCE NICs),
// their ports, the network interfaces they back with those interfaces' IP
// addresses, and their port counters, so that a memory node can choose the
// device and address to serve on with libfabric's verbs provider and a
// report can show what the NIC did.
//
// It reads sysfs (/sys/class/infiniband) and netlink through
// github.com/Mellanox/rdmamap and needs neither cgo nor libibverbs. On a
// machine without RDMA devices, and on systems other than Linux, Devices
// returns an empty list and no error.
package rdmadev
