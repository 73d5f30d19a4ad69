package remote

import "errors"

// Sentinel errors. Verbs wrap them with details; test with errors.Is.
var (
	// ErrOutOfBounds: an access falls outside its memory node's region.
	ErrOutOfBounds = errors.New("remote: address out of bounds")
	// ErrMisaligned: an atomic verb's address is not 8-byte aligned.
	ErrMisaligned = errors.New("remote: misaligned atomic address")
	// ErrUnknownNode: an address names a memory node that is not in the pool.
	ErrUnknownNode = errors.New("remote: unknown memory node")
	// ErrNilAddr: a verb was given the nil address.
	ErrNilAddr = errors.New("remote: nil address")
	// ErrOutOfMemory: every memory node asked is exhausted. Memory is never
	// silently reused.
	ErrOutOfMemory = errors.New("remote: out of memory")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("remote: pool closed")
	// ErrBadRequest: a malformed verb or allocation request (unknown verb
	// kind, negative size, bad alignment).
	ErrBadRequest = errors.New("remote: bad request")
	// ErrUnavailable: a memory node cannot be reached: its connection
	// failed, it did not answer within the transport's timeout, or it went
	// away. The verb may or may not have taken effect, and may still take
	// effect later (a memory node that was stopped executes what it had
	// received when it continues). A client whose batch of a WRITE, CAS or
	// FAA fails with it is therefore stopped for good, as if it had crashed
	// (Client.Crashed), and must be replaced.
	ErrUnavailable = errors.New("remote: memory node unavailable")
	// ErrBadNode: a memory node's memory is not one this pool can use: a
	// file or region of another format, version or size, or a node that
	// belongs to another pool or another position in it. Nothing of it was
	// modified.
	ErrBadNode = errors.New("remote: bad memory node")
	// ErrAuth: a memory node refused the connection's credentials.
	ErrAuth = errors.New("remote: authentication refused")
	// ErrDeadlock: in the simulator, every live client is parked in Wait and
	// no event is pending, so nothing can ever wake them. A Wait from a
	// goroutine not started by Pool.Go fails with it only after a second of
	// wall time in which no goroutine used the pool.
	ErrDeadlock = errors.New("remote: simulation deadlock")
	// ErrBusy: Pool.Snapshot was called while goroutines started by
	// Pool.Go were still running.
	ErrBusy = errors.New("remote: pool is busy")
	// ErrLate: a batch given to DoBy would have left after its deadline.
	// Nothing of it was executed.
	ErrLate = errors.New("remote: batch past its deadline")
)
