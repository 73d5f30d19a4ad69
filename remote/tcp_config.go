package remote

import "time"

// TCPConfig reaches memory nodes served by memnode processes (cmd/memnode)
// over TCP. The memory node's CPU carries out each verb, emulating the
// one-sided verbs of RDMA: for development, tests and ordinary networks.
type TCPConfig struct {
	// MemoryNodes lists the memnode servers as host:port; the i-th is
	// memory node i. Every compute node of the pool, in every process, must
	// list them all in the same order: a node records its position and the
	// number of memory nodes of its pool when a pool first joins it, and
	// NewPool refuses a list that places it elsewhere or is shorter or
	// longer (ErrBadNode).
	MemoryNodes []string
	// Token is the shared secret the servers were started with. Empty
	// means the environment variable DMINDEX_TOKEN.
	Token string
	// Conns is the number of connections to each memory node that a compute
	// node's clients share (default 2). A client always uses the same one,
	// so its verbs execute in posting order.
	Conns int
	// DialTimeout bounds connecting and authenticating (default 5 s); a
	// dial made for a call is given at most half of Timeout, so that the
	// call has the other half for its reply.
	DialTimeout time.Duration
	// Timeout bounds every call (default 10 s), a dial it waits for
	// included: a memory node that does not answer in time fails the call
	// with ErrUnavailable. A connection that fails (refused, reset, a
	// handshake or a reply past its timeout) marks its memory node down:
	// the calls to it then fail at once with ErrUnavailable, and one dial
	// at a time tries it again after a back-off that doubles from 100 ms
	// to 5 s while it stays down (docs/deploy.md, "Faults").
	Timeout time.Duration
}

// FabricConfig reaches memory nodes served by memnode processes over
// libfabric: one-sided RDMA verbs executed by the memory node's NIC (the
// verbs provider), or their emulation over TCP (the sockets provider, for
// tests). The memnode's TCP control connection authenticates the client
// and hands out the registered region's address and key. It needs a build
// with the "fabric" tag (cgo and libfabric >= 1.17).
type FabricConfig struct {
	// MemoryNodes lists the memnode servers' control addresses as
	// host:port, as in TCPConfig.
	MemoryNodes []string
	// Token is the shared secret (empty: DMINDEX_TOKEN).
	Token string
	// Provider is the libfabric provider: "verbs" or "sockets" (default:
	// the one the memory node serves).
	Provider string
	// Conns is the number of fabric endpoints to each memory node that a
	// compute node's clients share (default 2).
	Conns int
	// DialTimeout and Timeout as in TCPConfig.
	DialTimeout, Timeout time.Duration
}
