//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time (user and system, all threads) the process
// has used, or 0 where it cannot be measured.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
