package remote

import (
	"context"
	"time"
)

// transport executes verbs, RPCs and CN-local waits. It is the seam behind
// which every transport lives: local, sim, shm (in-process memory or shared
// files), tcp and fabric (memory in memnode servers). Clients validate every
// request before handing it over, so a transport never sees an
// out-of-bounds or misaligned verb; a server still checks everything it is
// sent, since its peer may be hostile.
type transport interface {
	// exec runs a batch for c. Verbs to one memory node execute in posting
	// order; verbs to different nodes may proceed in parallel. If signaled,
	// exec returns once every verb completed, with READ buffers filled and
	// Old set; otherwise it returns once the batch is posted and results are
	// discarded (WRITE sources may be reused at once).
	exec(ctx context.Context, c *Client, ops []Op, signaled bool) error
	// rpc has memory node mn's CPU serve req on behalf of c (two-sided).
	// Errors wrap the remote package's sentinels.
	rpc(ctx context.Context, c *Client, mn int, req *rpcRequest) (rpcReply, error)
	// wait parks c until another client signals it, consuming one permit.
	wait(ctx context.Context, c *Client) error
	// signal gives c one permit (at most one is kept) and wakes it if parked.
	signal(c *Client)
	// compute charges d of client CPU time to c.
	compute(c *Client, d time.Duration)
	// backoff waits before retry number attempt (from 0) of an action that
	// waits for another client.
	backoff(c *Client, attempt int)
	// now returns the transport's clock as seen by c (nil: the pool's).
	now(c *Client) time.Duration
	// spawn starts fn as a client goroutine.
	spawn(fn func())
	// waitAll waits until every spawned goroutine returned.
	waitAll() error
	// newClient initialises transport state of a new client.
	newClient(c *Client)
	// used returns the bytes handed out by memory node mn's allocator,
	// without charging any client (an observation, not an operation).
	used(ctx context.Context, mn int) (uint64, error)
	// report returns the transport's measurements.
	report() Report
	// close wakes every parked client with ErrClosed.
	close()
}

// Report is what a transport measured. The local transport reports elapsed
// wall time only; the simulator reports virtual time, NIC utilisation and
// per-client latencies.
type Report struct {
	// Transport is "local", "sim", "shm", "tcp" or "fabric".
	Transport string
	// Profile names the simulator's NIC profile ("" for local).
	Profile string
	// Elapsed is the time since the pool was created (virtual in sim).
	Elapsed time.Duration
	// MemoryNodes and ComputeNodes hold one entry per NIC (sim only).
	MemoryNodes, ComputeNodes []NICReport
	// Clients holds one entry per client that issued a signaled batch (sim
	// only).
	Clients []ClientReport
}

// NICReport is one simulated NIC's load over the pool's lifetime.
type NICReport struct {
	Verbs    uint64  // verbs served
	TxBytes  uint64  // bytes sent, headers included
	RxBytes  uint64  // bytes received, headers included
	IOPSUtil float64 // share of the IOPS limit used
	TxUtil   float64 // share of the send bandwidth used
	RxUtil   float64 // share of the receive bandwidth used
}

// ClientReport is one client's round-trip latencies (sim only).
type ClientReport struct {
	ComputeNode, Client int
	Batches             uint64        // signaled batches completed
	Mean, Max           time.Duration // latency of a signaled batch
}
