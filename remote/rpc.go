package remote

import (
	"fmt"
	"sync/atomic"
)

// rpcKind names one of the two-sided requests a memory node's CPU serves.
// They are a closed set of plain messages, so that they can cross a wire as
// well as run in-process; each transport carries them its own way.
type rpcKind uint8

const (
	// rpcAlloc allocates Size bytes aligned to Align; if that does not fit
	// and OrSize is set, it allocates OrSize bytes aligned to OrAlign
	// instead (a chunk, or else the single object that asked for it).
	rpcAlloc rpcKind = iota + 1
	// rpcNamed returns the region registered under Name, creating Size
	// zeroed bytes for it on first use.
	rpcNamed
	// rpcJoin stamps the node into a pool of Nodes memory nodes as node
	// Index, or checks that it belongs to it there (nodeJoin); with Fix it
	// also records Nodes as the pool's count. It returns the node's
	// descriptor.
	rpcJoin
	// rpcInfo returns the node's descriptor.
	rpcInfo
)

// String returns the request's name.
func (k rpcKind) String() string {
	switch k {
	case rpcAlloc:
		return "alloc"
	case rpcNamed:
		return "named"
	case rpcJoin:
		return "join"
	case rpcInfo:
		return "info"
	}
	return fmt.Sprintf("rpcKind(%d)", uint8(k))
}

// rpcRequest is one two-sided request. Fields a kind does not use are zero.
type rpcRequest struct {
	Kind            rpcKind
	Size, Align     uint64 // alloc, named (Size)
	OrSize, OrAlign uint64 // alloc fallback
	Name            string // named
	Pool            uint64 // join: the proposed or expected pool id
	Index           int    // join: the node's index in the pool
	Nodes           int    // join: the number of memory nodes of the pool
	Adopt, Create   bool   // join
	Fix             bool   // join: record Nodes if the node records no count yet
}

// rpcReply is the answer to an rpcRequest.
type rpcReply struct {
	Off    uint64 // alloc, named: byte offset in the main region
	Fallen bool   // alloc: the OrSize fallback was served
	Pool   uint64 // join, info: the node's pool id (0 if none)
	Geom   nodeGeom
	Used   uint64 // join, info, alloc: bytes handed out, reserved bytes included
}

// MaxNameBytes bounds a named region's name (Client.Named): a longer one
// is refused with ErrBadRequest.
const MaxNameBytes = 1024

// serve executes req on the node's memory. It is the memory node's CPU side
// of every transport: in-process for local, sim and shm, in the memnode
// server for tcp and fabric. It validates req itself, since a remote caller
// may skip its own checks.
func (m *memNode) serve(req *rpcRequest) (rpcReply, error) {
	var r rpcReply
	var err error
	limit := m.geom.main
	switch req.Kind {
	case rpcAlloc:
		if !validAlloc(req.Size, req.Align, limit) || (req.OrSize != 0 && !validAlloc(req.OrSize, req.OrAlign, limit)) {
			return r, fmt.Errorf("%w: alloc of %d bytes aligned to %d", ErrBadRequest, req.Size, req.Align)
		}
		r.Off, err = nodeAlloc(m.main, req.Size, req.Align)
		if err != nil && req.OrSize != 0 {
			r.Fallen = true
			r.Off, err = nodeAlloc(m.main, req.OrSize, req.OrAlign)
		}
		r.Used = nodeUsed(m.main)
	case rpcNamed:
		if req.Size == 0 || req.Size > limit || len(req.Name) > MaxNameBytes {
			return r, fmt.Errorf("%w: named region of %d bytes, name of %d bytes", ErrBadRequest, req.Size, len(req.Name))
		}
		r.Off, err = nodeNamed(m.main, req.Name, req.Size)
	case rpcJoin:
		if req.Index < 0 || req.Index >= req.Nodes || req.Nodes > MaxMemoryNodes || (req.Pool == 0 && !req.Adopt) {
			return r, fmt.Errorf("%w: join as node %d of %d of pool %#x", ErrBadRequest, req.Index, req.Nodes, req.Pool)
		}
		r.Pool, err = nodeJoin(m.main, req.Pool, req.Adopt, req.Index, req.Nodes, req.Create, req.Fix)
		r.Geom, r.Used = m.geom, nodeUsed(m.main)
	case rpcInfo:
		r.Pool, r.Geom, r.Used = atomic.LoadUint64(&m.main[hdrPool]), m.geom, nodeUsed(m.main)
	default:
		return r, fmt.Errorf("%w: request kind %d", ErrBadRequest, req.Kind)
	}
	return r, err
}

// validAlloc reports whether an allocation request is well formed.
func validAlloc(size, align, limit uint64) bool {
	return size > 0 && size <= limit && align >= 8 && align&(align-1) == 0 && align <= limit
}
