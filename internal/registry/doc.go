// Package registry gives the clients of every compute node that shares a
// pool an identity, a liveness signal and reclamation epochs, kept in memory
// node 0 and reached with one-sided verbs only. It is the groundwork of
// crash recovery and memory reuse described in docs/recovery.md.
//
// A compute node (one process, or one remote.ComputeNode in a process that
// runs several) joins the registry with Join and claims a block of client
// slots. Each client registers and gets a Member whose Tag names its slot
// and incarnation: a lock word holding the tag lets a waiter judge the
// holder (Node.Dead) from the block's heartbeat, which members advance with
// Touch as they work, and from the client's state word, which Close and a
// new incarnation change at once. No clocks are compared across machines:
// every duration is measured by one client on its own clock (virtual time
// in the simulator).
//
// Epochs: an operation pins the compute node's epoch (Member.Pin) for as
// long as it may hold addresses read from the structure; objects it unlinks
// are retired (Member.Retire) and handed back to the allocator
// (remote.Client.Free) by Node.Reclaim once every live compute node has
// published a later epoch. A compute node whose heartbeat has not moved for
// a lease is left out, so a crashed one cannot stop reclamation.
package registry
