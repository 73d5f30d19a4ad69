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
	// missing. Files are created and sized on first use. The first pool
	// that opens the directory fixes its number of memory nodes (recorded
	// in every file's header): a pool asking for another number
	// (Config.MemoryNodes) is refused with ErrBadNode, and no node is
	// added to or removed from the directory afterwards.
	Dir string
}
