package remote

// ShmConfig places memory nodes in files that every process opening the
// pool maps MAP_SHARED: memory node i is the file Dir/mn-<i>, holding the
// main region followed by the on-chip region. CPU loads, stores and atomics
// on the mapping play the part of the one-sided verbs, with the same 8-byte
// atomicity as the local transport; allocation and named regions live in
// the files (no server), so processes share trees and a tree outlives the
// processes that built it. Point Dir at tmpfs (e.g. /dev/shm/NAME) on one
// host, or at a DAX file system on CXL memory.
type ShmConfig struct {
	// Dir is the directory of the memory-node files. It is created if
	// missing. Files are created and sized on first use.
	Dir string
}
