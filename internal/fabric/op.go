//go:build fabric

package fabric

import "fmt"

// OpKind is the kind of a one-sided operation.
type OpKind uint8

// The one-sided operations.
const (
	OpRead  OpKind = iota + 1 // fi_read of len(Buf) bytes into Buf
	OpWrite                   // fi_write of Buf
	OpCAS                     // fi_compare_atomic, FI_CSWAP on FI_UINT64: Compare → Swap
	OpFAA                     // fi_fetch_atomic, FI_SUM on FI_UINT64: add Swap
)

// String returns the operation's name.
func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "READ"
	case OpWrite:
		return "WRITE"
	case OpCAS:
		return "CAS"
	case OpFAA:
		return "FAA"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Region is a registered memory region as a client addresses it: the remote
// address of its byte 0 (its virtual address when the provider uses
// FI_MR_VIRT_ADDR, else 0), its key and its length in bytes. A Server
// publishes its Regions; clients receive them over the memory node's own
// control channel.
type Region struct {
	Base uint64
	Key  uint64
	Len  uint64
}

// Op is one operation of a batch, at byte offset Off of Region. After Do
// returns nil, a READ's Buf holds the bytes read and Old holds the previous
// value of a CAS's or FAA's word.
type Op struct {
	Kind    OpKind
	Region  Region
	Off     uint64
	Buf     []byte // READ: destination; WRITE: source; atomics: unused
	Compare uint64 // CAS: expected value
	Swap    uint64 // CAS: new value; FAA: the addend
	Old     uint64 // CAS, FAA: the word's previous value
}

// Succeeded reports whether a completed CAS swapped.
func (o *Op) Succeeded() bool { return o.Kind == OpCAS && o.Old == o.Compare }

// atomicSlot is the staging footprint of an atomic: operand, compare,
// result.
const atomicSlot = 24

// slotSize returns the staging bytes op needs, a multiple of 8 so that every
// slot stays 8-byte aligned.
func (o *Op) slotSize() uint64 {
	if o.Kind == OpCAS || o.Kind == OpFAA {
		return atomicSlot
	}
	return (uint64(len(o.Buf)) + 7) &^ 7
}

// check validates op, the i-th of its batch, against a connection whose
// largest message is maxMsg bytes.
func (o *Op) check(i int, maxMsg uint64) error {
	switch o.Kind {
	case OpRead, OpWrite:
		if len(o.Buf) == 0 {
			return fmt.Errorf("%w: op %d: empty %v", ErrInvalid, i, o.Kind)
		}
		if uint64(len(o.Buf)) > maxMsg {
			return fmt.Errorf("%w: op %d: %v of %d bytes exceeds the provider's %d",
				ErrInvalid, i, o.Kind, len(o.Buf), maxMsg)
		}
	case OpCAS, OpFAA:
		if (o.Region.Base+o.Off)%8 != 0 {
			return fmt.Errorf("%w: op %d: %v at misaligned address %#x",
				ErrInvalid, i, o.Kind, o.Region.Base+o.Off)
		}
	default:
		return fmt.Errorf("%w: op %d: unknown kind %v", ErrInvalid, i, o.Kind)
	}
	return nil
}
