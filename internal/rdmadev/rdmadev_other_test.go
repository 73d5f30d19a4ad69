//go:build !linux

package rdmadev

// hasRDMA reports whether RDMA devices can be listed: only on Linux.
func hasRDMA() bool { return false }
