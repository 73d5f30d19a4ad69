package ycsb

import (
	"math"
	"runtime/debug"
)

// memory is what the machine offers a run: total is the physical memory
// (the bound of the memory nodes' declared size), available what a run may
// touch; 0 means unknown. source names where the figures come from.
type memory struct {
	total, available int64
	source           string
}

// systemMemory returns the machine's memory (platformMemory), lowered to
// the Go runtime's soft memory limit (GOMEMLIMIT) if one is set.
func systemMemory() memory {
	m := platformMemory()
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		if m.available == 0 || lim < m.available {
			m.available, m.source = lim, "GOMEMLIMIT"
		}
		if m.total == 0 || lim < m.total {
			m.total = lim
		}
	}
	return m
}
