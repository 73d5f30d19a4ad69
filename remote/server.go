package remote

import (
	"bufio"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultServerBytes is the main region of a new memory-node server.
const DefaultServerBytes = 1 << 30

// ServerConfig configures a memory-node server (see cmd/memnode). The zero
// value is not enough: Token must be set.
type ServerConfig struct {
	// Bytes is the size of the main region (default DefaultServerBytes).
	// With File, 0
	// accepts an existing file's size, another value must match it.
	Bytes int64
	// OnChipBytes is the size of the on-chip region (default
	// DefaultOnChipBytes; negative: none).
	OnChipBytes int
	// File, if set, is the memory: a memory-node file (the format of the shm
	// transport's files), created if missing, whose contents survive
	// restarts of the server. Otherwise the memory is anonymous and lost
	// when the server exits.
	File string
	// Token is the shared secret every connection must present before it
	// is served. It must not be empty.
	Token string
	// Logger receives connections, refusals and errors (default
	// slog.Default()).
	Logger *slog.Logger
	// HandshakeTimeout bounds the time a new connection has to
	// authenticate (default 5 s).
	HandshakeTimeout time.Duration
	// Fabric, if set, also serves the regions over libfabric (one-sided
	// RDMA with the verbs provider): they are registered, and their
	// address and key are handed to authenticated clients over the TCP
	// connection. It needs a build with the "fabric" tag.
	Fabric *FabricServerConfig
}

// FabricServerConfig configures a memory node's libfabric endpoint.
type FabricServerConfig struct {
	// Provider is "verbs" or "sockets" ("": verbs if an RDMA device offers
	// it, else sockets).
	Provider string
	// Addr is the host:port of the passive endpoint (port 0: any free
	// port). With verbs the host must be an address of the RDMA device's
	// network interface.
	Addr string
	// Domain optionally names the device ("mlx5_0") or, for sockets, the
	// interface.
	Domain string
}

// Server serves one memory node's memory to compute nodes: verbs and
// two-sided requests arrive as frames on TCP connections (docs/deploy.md,
// remote/wire.go). The server checks every verb against its regions, so a
// hostile client can neither crash it nor reach memory outside them; the
// verbs of one connection execute in the order they were sent, with the
// 8-byte atomicity of the local transport. Safe for concurrent use.
type Server struct {
	cfg   ServerConfig
	node  *memNode
	log   *slog.Logger
	unmap func()

	fabricInfo  []byte // the payload of frameFabric replies; nil: no fabric endpoint
	fabricDesc  string
	closeFabric func()

	start time.Time // the server's clock is the time since (clock)

	mu     sync.Mutex
	lis    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer maps the memory of cfg. Close releases it.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Token == "" {
		return nil, fmt.Errorf("%w: the server needs a token", ErrBadRequest)
	}
	if len(cfg.Token) > maxToken {
		return nil, fmt.Errorf("%w: token of %d bytes (at most %d)", ErrBadRequest, len(cfg.Token), maxToken)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	// Validated like a pool of memory nodes that may exist already: sizes
	// left 0 accept an existing file's, and get defaults only where memory
	// is created.
	pc, err := Config{NodeBytes: cfg.Bytes, OnChipBytes: cfg.OnChipBytes, Shm: &ShmConfig{}}.normalized()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.File); pc.NodeBytes == 0 && (cfg.File == "" || errors.Is(err, os.ErrNotExist)) {
		pc.NodeBytes = DefaultServerBytes
	}
	if cfg.File == "" {
		pc.defaultGeometry()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, lis: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
		unmap: func() {}, closeFabric: func() {}, start: time.Now()}
	if cfg.File != "" {
		m, unmap, err := openNodeFile(cfg.File, pc)
		if err != nil {
			return nil, fmt.Errorf("memory node file %s: %w", cfg.File, err)
		}
		s.node, s.unmap = m, unmap
	} else if s.node, err = newMemNode(nodeGeom{main: uint64(pc.NodeBytes), onChip: pc.onChipRegion()}); err != nil {
		return nil, err
	}
	if cfg.Fabric != nil {
		if err := s.listenFabric(*cfg.Fabric); err != nil {
			s.unmap()
			return nil, err
		}
	}
	return s, nil
}

// Fabric describes the server's libfabric endpoint ("" if it serves none).
func (s *Server) Fabric() string { return s.fabricDesc }

// Bytes returns the sizes of the main and on-chip regions.
func (s *Server) Bytes() (main, onChip int64) {
	return int64(s.node.geom.main), int64(s.node.geom.onChip)
}

// Serve accepts connections on l and serves each until Close. It returns
// nil after Close, or the listener's error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.lis[l] = struct{}{}
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.lis, l)
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(nc)
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// Close stops every listener, closes every connection, waits for their
// handlers and releases the memory (a file keeps its contents).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for l := range s.lis {
		l.Close()
	}
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.closeFabric()
	s.unmap()
	return nil
}

// serveConn authenticates one connection and serves its frames in order.
func (s *Server) serveConn(nc net.Conn) {
	defer nc.Close()
	peer := nc.RemoteAddr().String()
	br := bufio.NewReaderSize(nc, 64<<10)
	bw := bufio.NewWriterSize(nc, 64<<10)
	var hdr [headerBytes]byte
	nc.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	h, n, err := readHeader(br, hdr[:])
	if err == nil && (h.typ != frameHello || n < 2 || n > 2+maxToken) {
		err = fmt.Errorf("%w: first frame of type %d and %d bytes is not a hello", errBadFrame, h.typ, n)
	}
	var payload []byte
	if err == nil {
		payload = make([]byte, n)
		_, err = io.ReadFull(br, payload)
	}
	if err == nil {
		tok := payload[2:]
		if int(binary.LittleEndian.Uint16(payload)) != len(tok) || subtle.ConstantTimeCompare(tok, []byte(s.cfg.Token)) != 1 {
			err = fmt.Errorf("%w: wrong token", ErrAuth)
		}
	}
	if err != nil {
		s.log.Warn("memnode: refused connection", "peer", peer, "err", err)
		s.reply(bw, frameHeader{typ: frameWelcome, id: h.id}, appendStatus(nil, fmt.Errorf("%w: connection refused", ErrAuth)))
		bw.Flush()
		return
	}
	nc.SetReadDeadline(time.Time{})
	s.log.Info("memnode: connection", "peer", peer)
	s.reply(bw, frameHeader{typ: frameWelcome, id: h.id}, binary.LittleEndian.AppendUint64(appendStatus(nil, nil), s.clock()))
	if err := bw.Flush(); err != nil {
		return
	}
	err = s.serveFrames(br, bw)
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		s.log.Info("memnode: connection closed", "peer", peer)
	default:
		s.log.Warn("memnode: connection dropped", "peer", peer, "err", err)
	}
}

// serveFrames executes the frames of an authenticated connection until it
// ends or breaks the protocol. Replies are flushed whenever no further
// request is already buffered, so pipelined requests share writes.
func (s *Server) serveFrames(br *bufio.Reader, bw *bufio.Writer) error {
	var hdr [headerBytes]byte
	var payload, out []byte
	var dec batchDecoder
	for {
		h, n, err := readHeader(br, hdr[:])
		if err != nil {
			return err
		}
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(br, payload); err != nil {
			return err
		}
		out = out[:0]
		switch h.typ {
		case frameBatch, frameBatchBy:
			var by uint64
			batch := payload
			if h.typ == frameBatchBy {
				if len(payload) < 8 {
					return fmt.Errorf("%w: batch-by frame of %d bytes", errBadFrame, len(payload))
				}
				by, batch = binary.LittleEndian.Uint64(payload), payload[8:]
			}
			err := dec.decode(batch, s.node.geom)
			if errors.Is(err, errBadFrame) {
				return err
			}
			if h.typ == frameBatchBy && err == nil {
				if now := s.clock(); now > by {
					err = fmt.Errorf("%w: the batch reached the memory node %v after its deadline", ErrLate, time.Duration(now-by))
				}
			}
			if err == nil {
				for i := range dec.ops {
					s.node.apply(&dec.ops[i])
				}
			}
			if h.flags&flagSignaled == 0 {
				if err != nil {
					s.log.Warn("memnode: unsignaled batch refused", "err", err)
				}
				if errors.Is(err, ErrLate) {
					// Its poster must learn that what it posted did not
					// land (a lock it released is still held).
					s.reply(bw, frameHeader{typ: frameLate, id: h.id}, nil)
				}
				break
			}
			out = appendStatus(out, err)
			if err == nil {
				out = appendReplies(out, dec.ops)
			}
			s.reply(bw, frameHeader{typ: frameBatchOK, id: h.id}, out)
		case frameRPC:
			req, err := decodeRPC(payload)
			if errors.Is(err, errBadFrame) {
				return err
			}
			var r rpcReply
			if err == nil {
				r, err = s.node.serve(&req)
			}
			out = appendStatus(out, err)
			if err == nil {
				out = appendRPCReply(out, &r)
			}
			s.reply(bw, frameHeader{typ: frameRPCOK, id: h.id}, out)
		case frameClock:
			s.reply(bw, frameHeader{typ: frameClock, id: h.id}, binary.LittleEndian.AppendUint64(appendStatus(out, nil), s.clock()))
		case frameFabric:
			if s.fabricInfo == nil {
				out = appendStatus(out, fmt.Errorf("%w: this memory node serves no fabric endpoint", ErrBadRequest))
			} else {
				out = append(appendStatus(out, nil), s.fabricInfo...)
			}
			s.reply(bw, frameHeader{typ: frameFabric, id: h.id}, out)
		default:
			return fmt.Errorf("%w: frame type %d", errBadFrame, h.typ)
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// clock is the server's clock: nanoseconds since it started, which the
// welcome tells each client, so that a batch-by frame can carry its
// deadline in it.
func (s *Server) clock() uint64 { return uint64(time.Since(s.start)) }

// reply writes one frame into bw.
func (s *Server) reply(bw *bufio.Writer, h frameHeader, payload []byte) {
	var hdr [headerBytes]byte
	putHeader(hdr[:], len(payload), h)
	bw.Write(hdr[:])
	bw.Write(payload)
}
