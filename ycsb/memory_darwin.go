package ycsb

import "golang.org/x/sys/unix"

// platformMemory reads the physical memory (sysctl hw.memsize); macOS has
// no cheap figure of available memory, so the total stands for both.
func platformMemory() memory {
	b, err := unix.SysctlUint64("hw.memsize")
	if err != nil || b == 0 {
		return memory{}
	}
	return memory{total: int64(b), available: int64(b), source: "hw.memsize"}
}
