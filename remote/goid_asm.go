//go:build amd64 || arm64

package remote

// curG identifies the calling goroutine: the address of its runtime
// descriptor, which stays the same while the goroutine lives (and may be
// reused once it has ended). The simulator uses it to tell the goroutine
// holding its token from any other (sim.enter).
func curG() uintptr
