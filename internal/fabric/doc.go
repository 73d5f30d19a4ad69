// Package fabric is the libfabric (OFI) engine under the fabric transport:
// one-sided READ, WRITE, CAS and FAA over connected FI_EP_MSG endpoints, the
// verbs provider on RDMA NICs (executed by the memory node's NIC, no CPU on
// the data path) and the sockets provider, which emulates the same
// operations over TCP and is how the package is tested where there is no
// RDMA hardware.
//
// The package needs cgo and libfabric >= 1.17 (Debian: libfabric-dev) and is
// compiled only with the build tag fabric; without it the package is empty,
// so the rest of the module stays pure Go. It does not depend on remote/:
// remote/ and cmd/memnode build on it.
//
// # Objects
//
// A memory node calls Listen with its regions (mmap'd or C memory, never the
// Go heap), publishes Server.Regions (base, key and length of each) to its
// clients over its own control channel, and serves until Close. A compute
// node Dials one Conn per queue pair it wants and runs batches of Ops with
// Conn.Do.
//
// A small C shim in this directory (shim.c) owns every libfabric object; Go
// holds opaque handles and reads and writes only C memory: WRITE data is
// copied into a registered C staging buffer, READ data and atomic results
// are copied out of it, so no Go pointer is ever handed to libfabric and
// none outlives a cgo call.
//
// # Batches
//
// Do posts a batch and reaps its completions in one cgo call: every
// operation but the last carries FI_MORE, all are posted before the first
// completion is read, and FI_EAGAIN (which can come below the advertised
// queue size) is answered by reaping and posting again. A batch longer than
// the connection's window (its send-queue size, at most 256) or than its
// staging buffer runs as several such rounds, one after the other. The
// operations of one Conn take effect in posting order: where the provider's
// msg_order (or its max_order_*_size) does not guarantee the order of two
// operations of a round, the later one carries FI_FENCE. sockets orders
// everything; verbs does not order a write after a read, and libfabric
// 1.17's verbs provider honours FI_FENCE (as IBV_SEND_FENCE) although it
// does not advertise the capability, and fences every atomic itself.
//
// Each completion's context is checked against the round's outstanding
// operations; a completion naming anything else breaks the connection.
//
// # Waiting and watchdogs
//
// For sockets, whose operations are progressed by provider threads, the
// caller blocks in fi_cq_sread (busy polling on a small machine starves
// those threads), and FI_SOCKETS_PE_WAITTIME is set to 0 unless the
// environment sets it (with the default, the provider thread sleeps between
// polls and a round trip takes milliseconds). For verbs, completions are
// busy-polled. FI_EINTR, which Go's preemption signals cause, is retried.
// Every round has a watchdog (DialConfig.BatchTimeout) and, while it waits,
// looks at the connection's event queue every 20 ms for FI_SHUTDOWN: a peer
// that dies or hangs gives ErrUnavailable in bounded time, and the Conn is
// broken from then on (its staging buffer may still be written by the
// provider until Close). DoBy adds the caller's deadline: the round gives
// up at whichever comes first, with ErrDeadline for the caller's, which
// breaks the Conn the same way if operations were outstanding. DoContext
// takes the deadline from a context and also gives up, within 20 ms, when
// the context is cancelled (ErrCanceled). A batch given up before any of it
// was posted also wraps ErrNotPosted and leaves the Conn intact.
//
// # Errors
//
// A remote access error (an address outside every registered region, a bad
// key) gives ErrAccess. With sockets the connection stays usable; with verbs
// the queue pair enters the error state, so the Conn is broken and later
// batches return ErrUnavailable. The engine does not check offsets against
// Region.Len: the memory node's provider does, and callers that must not
// lose a verbs connection check bounds first.
//
// # Memory registration
//
// Both sides request mr_mode FI_MR_LOCAL|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|
// FI_MR_PROV_KEY; verbs answers all four, sockets none. A region's Base is
// its virtual address under FI_MR_VIRT_ADDR and 0 otherwise (the remote
// address of an operation is Base+Off), its Key is fi_mr_key (the provider's
// key, or the region's index as the requested key without FI_MR_PROV_KEY),
// and local buffers are always registered FI_READ|FI_WRITE with their
// descriptor passed for data, compare and result buffers.
//
// # The verbs atomics bug of libfabric < 2.2
//
// In libfabric 1.17 up to 2.1, the verbs provider's fi_compare_atomic and
// fi_fetch_atomic on MSG endpoints put the address of the compare and
// operand buffers into the work request instead of their values (and, in
// the *msg variants used here, take the operand from the fi_addr_t field
// msg->addr); fixed by libfabric commit 2fc74da2e, released in 2.2.0. On
// such a library, CAS and FAA over verbs return ErrUnsupported unless
// DialConfig.VerbsAtomicsWorkaround is set, which passes the values where
// the buggy code reads them (compare value as the compare ioc's pointer,
// operand as msg->addr). The workaround follows the 1.17 source exactly but
// has not been run on RDMA hardware.
package fabric
