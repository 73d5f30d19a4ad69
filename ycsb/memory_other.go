//go:build !linux && !darwin

package ycsb

// platformMemory knows nothing on this platform: only GOMEMLIMIT and
// Config.MemoryLimit bound a run.
func platformMemory() memory { return memory{} }
