package remote

import (
	"fmt"
	"time"
)

// Config describes a pool. The zero Config is valid: one memory node of
// DefaultNodeBytes with the local transport.
type Config struct {
	// MemoryNodes is the number of memory nodes (default 1, at most
	// MaxMemoryNodes).
	MemoryNodes int
	// NodeBytes is the size of each memory node's main region in bytes
	// (default DefaultNodeBytes; rounded up to 8). Pages are only touched
	// when written, so a large region costs little until used.
	NodeBytes int64
	// OnChipBytes is the size of each memory node's on-chip region (default
	// DefaultOnChipBytes; negative disables it).
	OnChipBytes int
	// ChunkBytes is the unit a client's bump allocator requests from a memory
	// node by RPC (default NodeBytes/1024 clamped to [64 KiB,
	// DefaultChunkBytes], and to a quarter of a small node).
	ChunkBytes int64
	// Sim selects the deterministic simulator; nil selects the local
	// transport.
	Sim *SimConfig
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

func (c Config) normalized() (Config, error) {
	if c.MemoryNodes == 0 {
		c.MemoryNodes = 1
	}
	if c.MemoryNodes < 0 || c.MemoryNodes > MaxMemoryNodes {
		return c, fmt.Errorf("%w: MemoryNodes %d not in 1..%d", ErrBadRequest, c.MemoryNodes, MaxMemoryNodes)
	}
	if c.NodeBytes == 0 {
		c.NodeBytes = DefaultNodeBytes
	}
	c.NodeBytes = (c.NodeBytes + 7) &^ 7
	if c.NodeBytes < 2*reservedBytes || c.NodeBytes >= onChipBit {
		return c, fmt.Errorf("%w: NodeBytes %d not in %d..2^47", ErrBadRequest, c.NodeBytes, 2*reservedBytes)
	}
	if c.OnChipBytes == 0 {
		c.OnChipBytes = DefaultOnChipBytes
	}
	if c.OnChipBytes < 0 {
		c.OnChipBytes = 0
	}
	c.OnChipBytes = (c.OnChipBytes + 7) &^ 7
	if c.ChunkBytes == 0 {
		c.ChunkBytes = min(max(64<<10, min(DefaultChunkBytes, c.NodeBytes/1024)), (c.NodeBytes-reservedBytes)/4&^63)
	}
	c.ChunkBytes = (c.ChunkBytes + 63) &^ 63
	if c.ChunkBytes <= 0 || c.ChunkBytes > c.NodeBytes-reservedBytes {
		return c, fmt.Errorf("%w: ChunkBytes %d not in 1..NodeBytes", ErrBadRequest, c.ChunkBytes)
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
