package remote

import "fmt"

// Addr is a global address in the pool: the memory node id in the top 16
// bits and a 48-bit byte offset below. The zero Addr is nil: offset 0 of every
// memory node is reserved and never handed out.
//
// Bit 47 of the offset selects the memory node's on-chip region (see OnChip);
// the main region therefore spans at most 2^47 bytes.
type Addr uint64

const (
	offsetBits = 48
	offsetMask = 1<<offsetBits - 1
	onChipBit  = 1 << 47
	// MaxMemoryNodes is the number of memory nodes an Addr can name.
	MaxMemoryNodes = 1 << 16
)

// MakeAddr returns the address of byte offset off of memory node mn's main
// region. It panics if off does not fit in 47 bits or mn in 16 bits, which is
// a programming error, not user input.
func MakeAddr(mn int, off uint64) Addr {
	if mn < 0 || mn >= MaxMemoryNodes || off >= onChipBit {
		panic(fmt.Sprintf("remote: MakeAddr(%d, %#x) out of range", mn, off))
	}
	return Addr(uint64(mn)<<offsetBits | off)
}

// OnChip returns the address of byte offset off of memory node mn's on-chip
// region (NIC device memory). Atomics there are faster in the simulator.
func OnChip(mn int, off uint64) Addr {
	return MakeAddr(mn, off) | onChipBit
}

// MN returns the memory node id.
func (a Addr) MN() int { return int(a >> offsetBits) }

// Offset returns the byte offset inside the addressed region.
func (a Addr) Offset() uint64 { return uint64(a) & offsetMask &^ onChipBit }

// IsOnChip reports whether a addresses an on-chip region.
func (a Addr) IsOnChip() bool { return uint64(a)&onChipBit != 0 }

// IsNil reports whether a is the nil address.
func (a Addr) IsNil() bool { return a == 0 }

// Add returns a advanced by n bytes in the same region.
func (a Addr) Add(n uint64) Addr { return a + Addr(n) }

// String formats a as "mn:offset" (with a "chip" marker for on-chip memory).
func (a Addr) String() string {
	if a == 0 {
		return "nil"
	}
	if a.IsOnChip() {
		return fmt.Sprintf("%d:chip:%#x", a.MN(), a.Offset())
	}
	return fmt.Sprintf("%d:%#x", a.MN(), a.Offset())
}
