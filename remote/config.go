package remote

import (
	"fmt"
	"time"
)

// Config describes a pool. The zero Config is valid: one memory node of
// DefaultNodeBytes with the local transport. At most one of Sim, Shm, TCP
// and Fabric may be set; none selects the local transport.
type Config struct {
	// MemoryNodes is the number of memory nodes (default 1, at most
	// MaxMemoryNodes). With TCP or Fabric it is the length of their address
	// list (0 means that); with Shm, 0 means the nodes already in the
	// directory, or 1 if there are none. Memory nodes that already exist
	// (Shm, TCP, Fabric) record the number of memory nodes of the pool that
	// first joined them, and NewPool refuses another number with
	// ErrBadNode: a pool that lists only some of them cannot follow the
	// trees' pointers into the others, and one that adds nodes would
	// place data that pools of the original size cannot reach.
	MemoryNodes int
	// NodeBytes is the size of each memory node's main region in bytes
	// (default DefaultNodeBytes; rounded up to 8). Pages are only touched
	// when written, so a large region costs little until used. Memory
	// nodes that already exist (Shm, TCP, Fabric) have their own size: 0
	// accepts it, another value must match it.
	NodeBytes int64
	// OnChipBytes is the size of each memory node's on-chip region (default
	// DefaultOnChipBytes; negative disables it, and Pool.Config reports a
	// disabled region as -1). As NodeBytes for memory nodes that already
	// exist.
	OnChipBytes int
	// ChunkBytes is the unit a client's bump allocator requests from a memory
	// node by RPC (default NodeBytes/1024 clamped to [64 KiB,
	// DefaultChunkBytes], and to a quarter of a small node).
	ChunkBytes int64
	// Sim selects the deterministic simulator.
	Sim *SimConfig
	// Shm selects memory nodes that are files mapped by every process that
	// opens the pool (tmpfs, or a DAX device on a CXL host).
	Shm *ShmConfig
	// TCP selects memory nodes served by memnode processes over TCP.
	TCP *TCPConfig
	// Fabric selects memory nodes served by memnode processes over
	// libfabric (RDMA); it needs a build with the "fabric" tag.
	Fabric *FabricConfig
	// From, if set, starts the pool's memory nodes as copies of a
	// snapshot (Pool.Snapshot) and the simulator's clock at the
	// snapshot's time. It needs the local or the simulated transport.
	// MemoryNodes and OnChipBytes default to the snapshot's and must match
	// it; NodeBytes defaults to the snapshot's and must hold what its
	// nodes use (it may be larger).
	From *Snapshot
}

// transportName returns the name of the transport c selects.
func (c *Config) transportName() string {
	switch {
	case c.Sim != nil:
		return "sim"
	case c.Shm != nil:
		return "shm"
	case c.TCP != nil:
		return "tcp"
	case c.Fabric != nil:
		return "fabric"
	}
	return "local"
}

// Defaults of Config.
const (
	DefaultNodeBytes   = 256 << 20
	DefaultOnChipBytes = 256 << 10
	DefaultChunkBytes  = 4 << 20
	// reservedBytes at the start of every main region are never allocated,
	// so that offset 0 (nil) is never handed out.
	reservedBytes = 4096
)

// Ordering selects how the simulator applies the bytes of one READ or WRITE.
type Ordering uint8

const (
	// InOrder applies each verb's bytes at one instant, in increasing address
	// order: no observer sees a later byte of a WRITE without the earlier ones
	// (the RC in-order assumption of SMART and Sherman).
	InOrder Ordering = iota
	// Strict applies the 64-byte lines of one READ or WRITE at different
	// virtual instants in a seeded random order (Ziegler et al., SIGMOD'23),
	// so protocols are tested against torn and reordered accesses. Verbs of
	// one batch to one memory node still execute one after the other.
	Strict
)

// String returns "inorder" or "strict".
func (o Ordering) String() string {
	switch o {
	case InOrder:
		return "inorder"
	case Strict:
		return "strict"
	}
	return fmt.Sprintf("Ordering(%d)", uint8(o))
}

// ParseOrdering parses "inorder" or "strict".
func ParseOrdering(s string) (Ordering, error) {
	switch s {
	case "inorder", "":
		return InOrder, nil
	case "strict":
		return Strict, nil
	}
	return 0, fmt.Errorf("%w: unknown ordering %q (want inorder or strict)", ErrBadRequest, s)
}

// SimConfig configures the simulator. The zero SimConfig simulates the CX6
// profile in InOrder mode with seed 0.
type SimConfig struct {
	// Profile is the RNIC model; the zero Profile means CX6().
	Profile Profile
	// Ordering is the byte-ordering mode of READs and WRITEs.
	Ordering Ordering
	// Seed drives every random choice of the simulator.
	Seed uint64
	// Skew, if positive, delays the memory access of one verb in four
	// (drawn from Seed) by a pseudo-random time in [0, Skew], so that verbs
	// of one batch to different memory nodes take effect in either order, as
	// RDMA allows; a client's verbs to one memory node keep their posting
	// order. Zero (the default) leaves every figure of the model unchanged.
	Skew time.Duration
}

// Profile is the RNIC and client-CPU model of the simulator. Rates are per
// second; every NIC (one per memory node, one per compute node) has the
// same profile.
type Profile struct {
	// Name identifies the profile in reports.
	Name string
	// RTT is the base round-trip time of a small verb at low load: wire,
	// switch and NIC pipeline latency, DMATime included. A verb's round trip
	// adds its CPU, IOPS-slot and serialisation terms (docs/simulator.md).
	RTT time.Duration
	// DMATime is the part of RTT a memory node's NIC spends carrying out a
	// verb on its memory (the PCIe DMA): a verb takes effect at the end of
	// this window, and in Strict mode the lines of a READ or WRITE land at
	// distinct instants inside it. At most RTT.
	DMATime time.Duration
	// MNIOPS is the verb rate limit of a memory node's NIC.
	MNIOPS float64
	// CNIOPS is the verb rate limit of a compute node's NIC.
	CNIOPS float64
	// Bandwidth is the link rate of every NIC in bytes per second, per
	// direction (full duplex).
	Bandwidth float64
	// HeaderBytes is the wire overhead of one verb's request and of its
	// response (transport headers), each counted against Bandwidth.
	HeaderBytes int
	// AtomicRate is the rate of serialized atomics on one address in host
	// memory.
	AtomicRate float64
	// OnChipAtomicRate is the rate of serialized atomics on one address in
	// the on-chip region.
	OnChipAtomicRate float64
	// RPCTime is the memory node CPU time of one two-sided RPC (chunk
	// allocation), on top of RTT.
	RPCTime time.Duration
	// CPUPerVerb is the client CPU time to post one verb.
	CPUPerVerb time.Duration
	// CPUPerOp is the client CPU time of one index operation, charged by
	// callers through Client.Compute.
	CPUPerOp time.Duration
	// LineBytes is the granularity of Strict ordering (default 64).
	LineBytes int
}

// CX6 returns the profile of a 100 Gbps Mellanox ConnectX-6 as in the SMART
// paper's testbed. Every number is sourced in docs/simulator.md.
func CX6() Profile {
	return Profile{
		Name:             "cx6",
		RTT:              1900 * time.Nanosecond,
		DMATime:          500 * time.Nanosecond,
		MNIOPS:           45e6,
		CNIOPS:           45e6,
		Bandwidth:        12.5e9,
		HeaderBytes:      62,
		AtomicRate:       3e6,
		OnChipAtomicRate: 9e6,
		RPCTime:          5 * time.Microsecond,
		CPUPerVerb:       50 * time.Nanosecond,
		CPUPerOp:         200 * time.Nanosecond,
		LineBytes:        64,
	}
}

// ProfileByName returns a built-in profile ("cx6").
func ProfileByName(name string) (Profile, error) {
	switch name {
	case "cx6", "":
		return CX6(), nil
	}
	return Profile{}, fmt.Errorf("%w: unknown NIC profile %q (want cx6)", ErrBadRequest, name)
}

// normalized validates c and fills in the defaults that do not depend on
// memory nodes that already exist.
func (c Config) normalized() (Config, error) {
	n := 0
	for _, set := range []bool{c.Sim != nil, c.Shm != nil, c.TCP != nil, c.Fabric != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return c, fmt.Errorf("%w: more than one of Sim, Shm, TCP and Fabric is set", ErrBadRequest)
	}
	if c.MemoryNodes < 0 || c.MemoryNodes > MaxMemoryNodes {
		return c, fmt.Errorf("%w: MemoryNodes %d not in 1..%d", ErrBadRequest, c.MemoryNodes, MaxMemoryNodes)
	}
	if c.NodeBytes < 0 || c.NodeBytes >= onChipBit || (c.NodeBytes > 0 && c.NodeBytes < 2*reservedBytes) {
		return c, fmt.Errorf("%w: NodeBytes %d not in %d..2^47", ErrBadRequest, c.NodeBytes, 2*reservedBytes)
	}
	c.NodeBytes = (c.NodeBytes + 7) &^ 7
	if c.OnChipBytes < 0 {
		c.OnChipBytes = -1 // disabled, as Pool.Config reports it
	}
	if c.OnChipBytes > 1<<30 {
		return c, fmt.Errorf("%w: OnChipBytes %d above 1 GiB", ErrBadRequest, c.OnChipBytes)
	}
	if c.ChunkBytes < 0 {
		return c, fmt.Errorf("%w: ChunkBytes %d is negative", ErrBadRequest, c.ChunkBytes)
	}
	if c.From != nil {
		if err := c.fromSnapshot(); err != nil {
			return c, err
		}
	}
	if c.TCP != nil || c.Fabric != nil || c.Shm != nil {
		return c, nil // the rest is settled when the memory nodes are known
	}
	if c.MemoryNodes == 0 {
		c.MemoryNodes = 1
	}
	c.defaultGeometry()
	if err := c.checkChunk(); err != nil {
		return c, err
	}
	if c.Sim != nil {
		s := *c.Sim
		if s.Profile == (Profile{}) {
			s.Profile = CX6()
		}
		if s.Profile.LineBytes == 0 {
			s.Profile.LineBytes = 64
		}
		p := s.Profile
		if p.RTT < 0 || p.DMATime < 0 || p.DMATime > p.RTT || p.MNIOPS <= 0 || p.CNIOPS <= 0 || p.Bandwidth <= 0 || p.AtomicRate <= 0 ||
			p.OnChipAtomicRate <= 0 || p.LineBytes%8 != 0 || p.LineBytes < 8 || p.HeaderBytes < 0 ||
			p.RPCTime < 0 || p.CPUPerVerb < 0 || p.CPUPerOp < 0 || p.Bandwidth < 1 {
			return c, fmt.Errorf("%w: invalid profile %+v", ErrBadRequest, p)
		}
		if s.Ordering > Strict {
			return c, fmt.Errorf("%w: invalid ordering %v", ErrBadRequest, s.Ordering)
		}
		if s.Skew < 0 {
			return c, fmt.Errorf("%w: negative Skew %v", ErrBadRequest, s.Skew)
		}
		c.Sim = &s
	}
	return c, nil
}

// defaultGeometry fills in NodeBytes and OnChipBytes of new memory nodes.
func (c *Config) defaultGeometry() {
	if c.NodeBytes == 0 {
		c.NodeBytes = DefaultNodeBytes
	}
	switch {
	case c.OnChipBytes == 0:
		c.OnChipBytes = DefaultOnChipBytes
	case c.OnChipBytes < 0:
		c.OnChipBytes = -1 // disabled: not 0, which would mean the default
		return
	}
	c.OnChipBytes = (c.OnChipBytes + 7) &^ 7
}

// onChipRegion returns the size of the on-chip region c gives a new memory
// node: 0 if c disables it.
func (c *Config) onChipRegion() uint64 { return uint64(max(c.OnChipBytes, 0)) }

// checkChunk fills in and validates ChunkBytes once NodeBytes is known.
func (c *Config) checkChunk() error {
	if c.ChunkBytes == 0 {
		c.ChunkBytes = min(max(64<<10, min(DefaultChunkBytes, c.NodeBytes/1024)), (c.NodeBytes-reservedBytes)/4&^63)
	}
	c.ChunkBytes = (c.ChunkBytes + 63) &^ 63
	if c.ChunkBytes <= 0 || c.ChunkBytes > c.NodeBytes-reservedBytes {
		return fmt.Errorf("%w: ChunkBytes %d not in 1..NodeBytes-%d", ErrBadRequest, c.ChunkBytes, reservedBytes)
	}
	return nil
}
