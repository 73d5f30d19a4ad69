package remote

import (
	"fmt"
	"slices"
)

// OpKind is the kind of a one-sided verb.
type OpKind uint8

// The one-sided verbs.
const (
	OpRead  OpKind = iota + 1 // READ len(Buf) bytes into Buf
	OpWrite                   // WRITE Buf
	OpCAS                     // 8-byte compare-and-swap: Compare → Swap
	OpFAA                     // 8-byte fetch-and-add of Swap
)

// String returns the verb's name.
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

// Op is one verb of a batch. Build it with Read, Write, CAS or FAA. After a
// signaled batch completes, Old holds the previous value of an atomic's word
// and a READ's Buf holds the bytes read.
type Op struct {
	Kind    OpKind
	Addr    Addr
	Buf     []byte // READ: destination; WRITE: source
	Compare uint64 // CAS: expected value
	Swap    uint64 // CAS: new value; FAA: the addend
	Old     uint64 // result of CAS and FAA
}

// Read returns a READ of len(buf) bytes at a into buf.
func Read(a Addr, buf []byte) Op { return Op{Kind: OpRead, Addr: a, Buf: buf} }

// Write returns a WRITE of data at a. Bytes may be at any alignment; whole
// 8-byte words are written atomically.
func Write(a Addr, data []byte) Op { return Op{Kind: OpWrite, Addr: a, Buf: data} }

// CAS returns an 8-byte compare-and-swap at the 8-byte aligned address a.
func CAS(a Addr, compare, swap uint64) Op {
	return Op{Kind: OpCAS, Addr: a, Compare: compare, Swap: swap}
}

// FAA returns an 8-byte fetch-and-add of delta at the 8-byte aligned address
// a.
func FAA(a Addr, delta uint64) Op { return Op{Kind: OpFAA, Addr: a, Swap: delta} }

// Succeeded reports whether a completed CAS swapped.
func (o *Op) Succeeded() bool { return o.Kind == OpCAS && o.Old == o.Compare }

// size returns the payload bytes the verb moves.
func (o *Op) size() int {
	if o.Kind == OpRead || o.Kind == OpWrite {
		return len(o.Buf)
	}
	return 8
}

// changes reports whether the verbs idx of ops (all of them if idx is
// nil) change memory: a WRITE, CAS or FAA.
func changes(ops []Op, idx []int32) bool {
	if idx == nil {
		return slices.ContainsFunc(ops, func(o Op) bool { return o.Kind != OpRead })
	}
	return slices.ContainsFunc(idx, func(i int32) bool { return ops[i].Kind != OpRead })
}
