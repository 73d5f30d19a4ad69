package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire protocol of the tcp transport (and of the fabric transport's
// control connection). Every message is a frame:
//
//	u32 length of the rest of the frame (at most maxFrame)
//	u8  protocol version (wireVersion)
//	u8  frame type
//	u16 flags
//	u64 request id (echoed by the reply)
//	... payload
//
// All integers are little-endian. A connection starts with a hello frame
// carrying the shared secret; the server answers welcome or refused (and
// closes); a welcome's status is followed by u64 the server's clock
// (nanoseconds since it started). Then the client sends batch and rpc
// frames and the server answers each signaled one with a reply frame of
// the same id, in order.
//
// A batch payload is u32 count, then per verb: u8 kind, u64 address (offset
// and on-chip bit; the memory-node bits are zero), u32 length, and WRITE:
// the bytes; CAS: u64 compare, u64 swap; FAA: u64 delta. Its reply is a
// status (below), then per verb: READ: length bytes; CAS, FAA: u64 old
// value. A batch with one invalid verb executes nothing. A batch-by frame
// is u64 a deadline on the server's clock, then a batch payload: a server
// that would execute it later executes nothing and answers ErrLate if it
// is signaled (remote.Client.DoBy), or, if not (remote.Client.PostBy),
// sends a late frame with the frame's id, which names its poster on the
// connection (the client gives its unsignaled frames an id per poster;
// they are never answered otherwise). A clock frame asks for the
// server's clock again, for a client whose handshake was too slow to
// convert deadlines with the welcome's.
//
// An rpc payload is u8 kind, u64 size, u64 align, u64 fallback size, u64
// fallback align, u64 pool id, u32 node index, u32 the pool's number of
// memory nodes (join), u8 flags (1: adopt, 2: create, 4: fix), u16 name length and
// the name. Its reply is a status, then u64 offset, u64 pool id, u64 main
// and u64 on-chip region bytes, u64 bytes used, u8 fallback served.
//
// A status is u8 code (0 = success, else an error code naming a sentinel)
// and, when not 0, u16 length and a message.
const (
	wireVersion   = 4 // 2: join requests carry the pool's node count; 3: the welcome's clock, batch-by and clock frames; 4: unsignaled batch-by and late frames
	maxFrame      = 64 << 20
	maxBatchVerbs = 1 << 16
	maxToken      = 4096

	frameHello   = 1  // client: u16 token length, token
	frameWelcome = 2  // server: u8 status
	frameBatch   = 3  // client: a batch; flagSignaled asks for a reply
	frameBatchOK = 4  // server: the batch's results
	frameRPC     = 5  // client: an rpcRequest
	frameRPCOK   = 6  // server: status, rpcReply
	frameFabric  = 7  // client: ask for the fabric endpoint; server: status, fabricInfo
	frameBatchBy = 8  // client: u64 deadline on the server's clock, then a batch
	frameClock   = 9  // client: nothing, signaled; server: status, u64 the server's clock
	frameLate    = 10 // server: nothing; the unsignaled batch-by frame of this id came late and executed nothing

	flagSignaled = 1
)

// frameHeader is the fixed part of a frame after its length word.
type frameHeader struct {
	typ   uint8
	flags uint16
	id    uint64
}

// headerBytes is the size of the length word and the frame header.
const headerBytes = 4 + 1 + 1 + 2 + 8

// putHeader writes a frame's length word and header into b (headerBytes).
func putHeader(b []byte, payload int, h frameHeader) {
	binary.LittleEndian.PutUint32(b[0:], uint32(headerBytes-4+payload))
	b[4] = wireVersion
	b[5] = h.typ
	binary.LittleEndian.PutUint16(b[6:], h.flags)
	binary.LittleEndian.PutUint64(b[8:], h.id)
}

// errBadFrame is returned for a frame that breaks the protocol; the
// connection that sent it is closed.
var errBadFrame = errors.New("remote: malformed frame")

// readHeader reads a frame's length word and header and returns the payload
// length.
func readHeader(r io.Reader, b []byte) (frameHeader, int, error) {
	if _, err := io.ReadFull(r, b[:headerBytes]); err != nil {
		return frameHeader{}, 0, err
	}
	n := binary.LittleEndian.Uint32(b)
	if n < headerBytes-4 || n > maxFrame {
		return frameHeader{}, 0, fmt.Errorf("%w: length %d", errBadFrame, n)
	}
	if b[4] != wireVersion {
		return frameHeader{}, 0, fmt.Errorf("%w: protocol version %d, want %d", errBadFrame, b[4], wireVersion)
	}
	h := frameHeader{typ: b[5], flags: binary.LittleEndian.Uint16(b[6:]), id: binary.LittleEndian.Uint64(b[8:])}
	return h, int(n) - (headerBytes - 4), nil
}

// wireErrors maps status codes to sentinel errors; index 0 is success.
var wireErrors = []error{nil, ErrOutOfBounds, ErrMisaligned, ErrUnknownNode, ErrNilAddr, ErrOutOfMemory,
	ErrClosed, ErrBadRequest, ErrBadNode, ErrAuth, ErrUnavailable, ErrLate}

// statusCode returns the code of err's sentinel (ErrBadRequest if none).
func statusCode(err error) uint8 {
	for i, e := range wireErrors[1:] {
		if errors.Is(err, e) {
			return uint8(i + 1)
		}
	}
	return 7 // ErrBadRequest
}

// appendStatus appends the status of err.
func appendStatus(b []byte, err error) []byte {
	if err == nil {
		return append(b, 0)
	}
	msg := err.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	b = append(b, statusCode(err))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(msg)))
	return append(b, msg...)
}

// decodeStatus parses a status at the start of p and returns the error it
// carries and the rest of p.
func decodeStatus(p []byte) (error, []byte, error) {
	if len(p) < 1 {
		return nil, nil, fmt.Errorf("%w: missing status", errBadFrame)
	}
	code := p[0]
	if code == 0 {
		return nil, p[1:], nil
	}
	if int(code) >= len(wireErrors) || len(p) < 3 {
		return nil, nil, fmt.Errorf("%w: status code %d", errBadFrame, code)
	}
	n := int(binary.LittleEndian.Uint16(p[1:]))
	if len(p) < 3+n {
		return nil, nil, fmt.Errorf("%w: status message of %d bytes", errBadFrame, n)
	}
	msg := string(p[3 : 3+n])
	return &remoteError{sentinel: wireErrors[code], msg: msg}, p[3+n:], nil
}

// remoteError is an error a memory node reported: its message, wrapping
// the sentinel its code names.
type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return "memory node: " + e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// verbWireBytes returns the bytes verb o takes in a batch frame.
func verbWireBytes(o *Op) int {
	switch o.Kind {
	case OpWrite:
		return 13 + len(o.Buf)
	case OpCAS:
		return 13 + 16
	case OpFAA:
		return 13 + 8
	}
	return 13
}

// replyWireBytes returns the bytes verb o's result takes in a reply.
func replyWireBytes(o *Op) int {
	switch o.Kind {
	case OpRead:
		return len(o.Buf)
	case OpCAS, OpFAA:
		return 8
	}
	return 0
}

// appendVerb appends verb o, addressed by its offset and on-chip bit.
func appendVerb(b []byte, o *Op) []byte {
	b = append(b, byte(o.Kind))
	b = binary.LittleEndian.AppendUint64(b, uint64(o.Addr)&offsetMask)
	b = binary.LittleEndian.AppendUint32(b, uint32(o.size()))
	switch o.Kind {
	case OpWrite:
		b = append(b, o.Buf...)
	case OpCAS:
		b = binary.LittleEndian.AppendUint64(b, o.Compare)
		b = binary.LittleEndian.AppendUint64(b, o.Swap)
	case OpFAA:
		b = binary.LittleEndian.AppendUint64(b, o.Swap)
	}
	return b
}

// batchDecoder parses batch payloads, reusing its buffers from one batch
// to the next.
type batchDecoder struct {
	ops   []Op
	reads []int  // READ lengths, in order
	buf   []byte // READ destinations, in order
}

// decode parses a batch payload and validates every verb against g. WRITE
// buffers alias p; READ buffers are carved from d.buf.
func (d *batchDecoder) decode(p []byte, g nodeGeom) error {
	if len(p) < 4 {
		return fmt.Errorf("%w: batch without a count", errBadFrame)
	}
	n := binary.LittleEndian.Uint32(p)
	p = p[4:]
	if n == 0 || n > maxBatchVerbs {
		return fmt.Errorf("%w: batch of %d verbs", errBadFrame, n)
	}
	d.ops, d.reads = d.ops[:0], d.reads[:0]
	reply := 0
	for range n {
		if len(p) < 13 {
			return fmt.Errorf("%w: truncated verb", errBadFrame)
		}
		o := Op{Kind: OpKind(p[0]), Addr: Addr(binary.LittleEndian.Uint64(p[1:]))}
		size := uint64(binary.LittleEndian.Uint32(p[9:]))
		p = p[13:]
		switch o.Kind {
		case OpRead:
			d.reads = append(d.reads, int(size))
			reply += int(size)
		case OpWrite:
			if uint64(len(p)) < size {
				return fmt.Errorf("%w: WRITE of %d bytes carries %d", errBadFrame, size, len(p))
			}
			o.Buf, p = p[:size], p[size:]
		case OpCAS:
			if len(p) < 16 {
				return fmt.Errorf("%w: truncated CAS", errBadFrame)
			}
			o.Compare, o.Swap = binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
			p = p[16:]
			reply += 8
		case OpFAA:
			if len(p) < 8 {
				return fmt.Errorf("%w: truncated FAA", errBadFrame)
			}
			o.Swap = binary.LittleEndian.Uint64(p)
			p = p[8:]
			reply += 8
		}
		if reply > maxFrame {
			return fmt.Errorf("%w: reply of more than %d bytes", errBadFrame, maxFrame)
		}
		if o.Addr.IsNil() {
			return fmt.Errorf("%w: %v", ErrNilAddr, o.Kind)
		}
		if o.Addr.MN() != 0 {
			return fmt.Errorf("%w: %v at %#x names a memory node", ErrBadRequest, o.Kind, uint64(o.Addr))
		}
		if err := checkVerb(g, o.Kind, o.Addr, size); err != nil {
			return err
		}
		d.ops = append(d.ops, o)
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errBadFrame, len(p))
	}
	if cap(d.buf) < reply {
		d.buf = make([]byte, reply)
	}
	off, r := 0, 0
	for i := range d.ops {
		if d.ops[i].Kind == OpRead {
			n := d.reads[r]
			d.ops[i].Buf = d.buf[off : off+n : off+n]
			off, r = off+n, r+1
		}
	}
	return nil
}

// appendReplies appends the results of executed ops: READ bytes already
// sit in the reply buffer in order, so only CAS and FAA values are appended
// between them.
func appendReplies(b []byte, ops []Op) []byte {
	for i := range ops {
		switch o := &ops[i]; o.Kind {
		case OpRead:
			b = append(b, o.Buf...)
		case OpCAS, OpFAA:
			b = binary.LittleEndian.AppendUint64(b, o.Old)
		}
	}
	return b
}

// decodeReplies fills the results of ops (those listed by idx, or all if
// idx is nil) from a batch reply payload after its status.
func decodeReplies(p []byte, ops []Op, idx []int32) error {
	fill := func(o *Op) error {
		switch o.Kind {
		case OpRead:
			if len(p) < len(o.Buf) {
				return fmt.Errorf("%w: short READ reply", errBadFrame)
			}
			copy(o.Buf, p)
			p = p[len(o.Buf):]
		case OpCAS, OpFAA:
			if len(p) < 8 {
				return fmt.Errorf("%w: short atomic reply", errBadFrame)
			}
			o.Old = binary.LittleEndian.Uint64(p)
			p = p[8:]
		}
		return nil
	}
	if idx == nil {
		for i := range ops {
			if err := fill(&ops[i]); err != nil {
				return err
			}
		}
	} else {
		for _, i := range idx {
			if err := fill(&ops[i]); err != nil {
				return err
			}
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing reply bytes", errBadFrame, len(p))
	}
	return nil
}

// appendRPC appends an rpcRequest payload.
func appendRPC(b []byte, r *rpcRequest) []byte {
	b = append(b, byte(r.Kind))
	for _, v := range []uint64{r.Size, r.Align, r.OrSize, r.OrAlign, r.Pool} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Index))
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Nodes))
	var f byte
	if r.Adopt {
		f |= 1
	}
	if r.Create {
		f |= 2
	}
	if r.Fix {
		f |= 4
	}
	b = append(b, f)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Name)))
	return append(b, r.Name...)
}

// decodeRPC parses an rpcRequest payload.
func decodeRPC(p []byte) (rpcRequest, error) {
	var r rpcRequest
	if len(p) < 1+6*8+1+2 {
		return r, fmt.Errorf("%w: short rpc", errBadFrame)
	}
	r.Kind = rpcKind(p[0])
	v := func(i int) uint64 { return binary.LittleEndian.Uint64(p[1+8*i:]) }
	r.Size, r.Align, r.OrSize, r.OrAlign, r.Pool = v(0), v(1), v(2), v(3), v(4)
	idx, nodes := binary.LittleEndian.Uint32(p[41:]), binary.LittleEndian.Uint32(p[45:])
	if idx >= MaxMemoryNodes || nodes > MaxMemoryNodes {
		return r, fmt.Errorf("%w: node index %d of %d memory nodes", ErrBadRequest, idx, nodes)
	}
	r.Index, r.Nodes = int(idx), int(nodes)
	f := p[49]
	r.Adopt, r.Create, r.Fix = f&1 != 0, f&2 != 0, f&4 != 0
	n := int(binary.LittleEndian.Uint16(p[50:]))
	if len(p) != 52+n || n > MaxNameBytes {
		return r, fmt.Errorf("%w: rpc name of %d bytes in %d", errBadFrame, n, len(p)-52)
	}
	r.Name = string(p[52:])
	return r, nil
}

// appendRPCReply appends an rpcReply payload (after the status).
func appendRPCReply(b []byte, r *rpcReply) []byte {
	for _, v := range []uint64{r.Off, r.Pool, r.Geom.main, r.Geom.onChip, r.Used} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	if r.Fallen {
		return append(b, 1)
	}
	return append(b, 0)
}

// decodeRPCReply parses an rpcReply payload (after the status).
func decodeRPCReply(p []byte) (rpcReply, error) {
	if len(p) != 41 {
		return rpcReply{}, fmt.Errorf("%w: rpc reply of %d bytes", errBadFrame, len(p))
	}
	v := func(i int) uint64 { return binary.LittleEndian.Uint64(p[8*i:]) }
	return rpcReply{Off: v(0), Pool: v(1), Geom: nodeGeom{main: v(2), onChip: v(3)}, Used: v(4), Fallen: p[40] == 1}, nil
}

// fabricEndpoint is what a memory node hands an authenticated client about
// its libfabric endpoint: the provider, the passive endpoint's address,
// and, per region (main, then on-chip), the remote address of its byte 0,
// its key and its length.
type fabricEndpoint struct {
	Provider, Addr string
	Regions        [][3]uint64 // base, key, length
}

// appendFabricEndpoint appends e's encoding.
func appendFabricEndpoint(b []byte, e *fabricEndpoint) []byte {
	for _, s := range []string{e.Provider, e.Addr} {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = append(b, byte(len(e.Regions)))
	for _, r := range e.Regions {
		for _, v := range r {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b
}

// decodeFabricEndpoint parses appendFabricEndpoint's encoding.
func decodeFabricEndpoint(p []byte) (fabricEndpoint, error) {
	var e fabricEndpoint
	var strs [2]string
	for i := range strs {
		if len(p) < 2 || len(p) < 2+int(binary.LittleEndian.Uint16(p)) {
			return e, fmt.Errorf("%w: truncated fabric endpoint", errBadFrame)
		}
		n := int(binary.LittleEndian.Uint16(p))
		strs[i], p = string(p[2:2+n]), p[2+n:]
	}
	e.Provider, e.Addr = strs[0], strs[1]
	if len(p) < 1 || len(p) != 1+24*int(p[0]) || p[0] > 2 {
		return e, fmt.Errorf("%w: fabric endpoint regions", errBadFrame)
	}
	for i := range int(p[0]) {
		q := p[1+24*i:]
		e.Regions = append(e.Regions, [3]uint64{binary.LittleEndian.Uint64(q), binary.LittleEndian.Uint64(q[8:]), binary.LittleEndian.Uint64(q[16:])})
	}
	return e, nil
}
