// Package remote models disaggregated memory: passive memory nodes reached
// only through one-sided verbs (READ, WRITE, CAS, FAA), as over RDMA.
//
// A Pool is a set of memory nodes. Compute nodes (ComputeNode) group the
// clients that share CN-local state; a Client is one queue pair's worth of
// state (statistics, bump allocator, a wait/signal permit) and is used by one
// goroutine at a time. Every index in this module is written against this
// package only.
//
// Five transports run the same memory; at most one of Config.Sim, Shm, TCP
// and Fabric is set (docs/deploy.md):
//
//   - local: verbs execute immediately on in-process memory with real
//     goroutines and wall-clock time. It is the default of NewPool.
//   - sim: a deterministic virtual-time simulator of an RDMA fabric (an RNIC
//     model per memory node and per compute node). Select it with
//     Config.Sim. Exactly one simulated client runs at a time; the same seed
//     and configuration give bit-identical memory, statistics and virtual
//     end time. docs/simulator.md describes the model and its sources.
//   - shm: memory nodes are files that every process opening the pool maps
//     shared (tmpfs, or a DAX device on a CXL host); verbs are CPU atomics
//     on the mapping, in wall-clock time. Config.Shm; unix only.
//   - tcp: memory nodes are memnode processes (cmd/memnode) anywhere on the
//     network, whose CPUs execute the verbs. Config.TCP.
//   - fabric: the same memnode servers, reached by one-sided RDMA through
//     libfabric. Config.Fabric; it needs a build with the "fabric" tag.
//
// Memory is a region of 8-byte words, each accessed atomically, so concurrent
// readers may observe torn data at 8-byte granularity exactly as over RDMA,
// and the race detector stays quiet. An address (Addr) is a 16-bit memory
// node id and a 48-bit byte offset; 0 is nil. Each memory node may also have
// a small on-chip region (NIC device memory) for lock words, addressed with
// OnChip.
//
// Index code must never hold a Go mutex across a verb or a Wait: in the
// simulator a parked client holding one would block the next client inside
// the Go runtime, where the scheduler cannot see it.
package remote
