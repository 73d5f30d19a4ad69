package remote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// fuzzGeoms are the geometries FuzzFrameDecoder validates batches against:
// a node with both regions and a minimal one without an on-chip region.
var fuzzGeoms = []nodeGeom{{main: 1 << 20, onChip: 4096}, {main: 2 * reservedBytes, onChip: 0}}

// fuzzSeeds returns valid frames of every type, and a few broken ones.
func fuzzSeeds() [][]byte {
	frame := func(typ uint8, flags uint16, payload []byte) []byte {
		b := make([]byte, headerBytes, headerBytes+len(payload))
		putHeader(b, len(payload), frameHeader{typ: typ, flags: flags, id: 42})
		return append(b, payload...)
	}
	batch := func(ops ...Op) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(ops)))
		for i := range ops {
			b = appendVerb(b, &ops[i])
		}
		return b
	}
	a := MakeAddr(0, 8192)
	seeds := [][]byte{
		frame(frameHello, 0, append(binary.LittleEndian.AppendUint16(nil, 5), "token"...)),
		frame(frameWelcome, 0, appendStatus(nil, nil)),
		frame(frameWelcome, 0, appendStatus(nil, ErrAuth)),
		frame(frameBatch, flagSignaled, batch(Read(a, make([]byte, 64)))),
		frame(frameBatch, 0, batch(Write(a, []byte("hello, world")), CAS(a, 1, 2), FAA(OnChip(0, 8), 3))),
		frame(frameBatch, flagSignaled, batch(Write(MakeAddr(0, 1<<20-3), []byte("end")), Read(OnChip(0, 4088), make([]byte, 8)))),
		frame(frameBatch, flagSignaled, batch(CAS(OnChip(0, 4), 0, 1))),
		frame(frameBatch, flagSignaled, batch(Read(MakeAddr(0, 1<<20), make([]byte, 8)))),
		frame(frameBatchOK, 0, binary.LittleEndian.AppendUint64(appendStatus(nil, nil), 7)),
		frame(frameBatchOK, 0, appendStatus(nil, ErrOutOfBounds)),
		frame(frameRPC, flagSignaled, appendRPC(nil, &rpcRequest{Kind: rpcNamed, Size: 64, Name: "smart/tree"})),
		frame(frameRPC, flagSignaled, appendRPC(nil, &rpcRequest{Kind: rpcJoin, Pool: 99, Index: 3, Nodes: 4, Adopt: true, Create: true, Fix: true})),
		frame(frameRPCOK, 0, appendRPCReply(appendStatus(nil, nil), &rpcReply{Off: 4096, Pool: 5, Geom: fuzzGeoms[0], Used: 8192, Fallen: true})),
		{0, 0, 0, 0},
		frame(frameBatch, flagSignaled, binary.LittleEndian.AppendUint32(nil, 0)),
	}
	return seeds
}

// FuzzFrameDecoder feeds arbitrary bytes to every decoder of the wire
// format: none may panic; a batch that decodes holds only valid verbs
// inside the geometry, with READ buffers of the requested sizes that do not
// overlap, and re-encodes to exactly the payload; every other decoded
// message re-encodes to its input (up to bits the format ignores).
func FuzzFrameDecoder(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
		if len(s) > headerBytes {
			f.Add(s[headerBytes:])
		}
	}
	var d batchDecoder // reused across inputs, as a connection reuses it
	f.Fuzz(func(t *testing.T, data []byte) {
		var hdr [headerBytes]byte
		if h, n, err := readHeader(bytes.NewReader(data), hdr[:]); err == nil {
			if n < 0 || n > maxFrame-(headerBytes-4) || n != int(binary.LittleEndian.Uint32(data))-(headerBytes-4) {
				t.Fatalf("readHeader: payload length %d for length word %d", n, binary.LittleEndian.Uint32(data))
			}
			if data[4] != wireVersion || h.typ != data[5] {
				t.Fatalf("readHeader accepted version %d type %d as %+v", data[4], data[5], h)
			}
		}
		payloads := [][]byte{data}
		if len(data) >= headerBytes {
			payloads = append(payloads, data[headerBytes:])
		}
		for _, p := range payloads {
			for _, g := range fuzzGeoms {
				checkBatch(t, &d, p, g)
			}
			checkRPC(t, p)
			checkStatus(t, p)
			checkReplies(t, p)
			if r, err := decodeRPCReply(p); err == nil {
				if got := appendRPCReply(nil, &r); !bytes.Equal(got[:40], p[:40]) || r.Fallen != (p[40] == 1) {
					t.Fatalf("rpc reply %x re-encodes to %x", p, got)
				}
			}
		}
	})
}

// checkBatch decodes p as a batch against g and checks what it accepts.
func checkBatch(t *testing.T, d *batchDecoder, p []byte, g nodeGeom) {
	// Keep a copy: WRITE buffers alias p, and nothing may write into them.
	orig := bytes.Clone(p)
	if err := d.decode(p, g); err != nil {
		if !bytes.Equal(orig, p) {
			t.Fatal("a refused batch modified its payload")
		}
		return
	}
	if len(d.ops) == 0 || len(d.ops) > maxBatchVerbs || len(d.ops) != int(binary.LittleEndian.Uint32(p)) {
		t.Fatalf("decoded %d verbs from a count of %d", len(d.ops), binary.LittleEndian.Uint32(p))
	}
	re := binary.LittleEndian.AppendUint32(nil, uint32(len(d.ops)))
	reads := 0
	for i := range d.ops {
		o := &d.ops[i]
		size := uint64(o.size())
		region := g.main
		if o.Addr.IsOnChip() {
			region = g.onChip
		}
		switch {
		case o.Kind < OpRead || o.Kind > OpFAA:
			t.Fatalf("verb %d: kind %d accepted", i, o.Kind)
		case o.Addr.IsNil() || o.Addr.MN() != 0:
			t.Fatalf("verb %d: address %#x accepted", i, uint64(o.Addr))
		case (o.Kind == OpCAS || o.Kind == OpFAA) && o.Addr%8 != 0:
			t.Fatalf("verb %d: misaligned %v at %v accepted", i, o.Kind, o.Addr)
		case o.Addr.Offset() >= region || size > region-o.Addr.Offset():
			t.Fatalf("verb %d: %v of %d bytes at %v outside a region of %d bytes", i, o.Kind, size, o.Addr, region)
		}
		if o.Kind == OpRead {
			reads += len(o.Buf)
			if cap(o.Buf) != len(o.Buf) {
				t.Fatalf("verb %d: READ buffer of %d bytes has capacity %d", i, len(o.Buf), cap(o.Buf))
			}
			for j := range o.Buf {
				o.Buf[j] = byte(i + 1)
			}
		}
		re = appendVerb(re, o)
	}
	for i := range d.ops {
		if o := &d.ops[i]; o.Kind == OpRead && !bytes.Equal(o.Buf, bytes.Repeat([]byte{byte(i + 1)}, len(o.Buf))) {
			t.Fatalf("verb %d: its READ buffer overlaps another's", i)
		}
	}
	if reads > maxFrame {
		t.Fatalf("READs of %d bytes accepted; a reply holds at most %d", reads, maxFrame)
	}
	if !bytes.Equal(re, p) {
		t.Fatalf("batch re-encodes to %x, decoded from %x", re, p)
	}
}

// checkRPC decodes p as an rpc request and checks it round-trips.
func checkRPC(t *testing.T, p []byte) {
	r, err := decodeRPC(p)
	if err != nil {
		return
	}
	if r.Index < 0 || r.Index >= MaxMemoryNodes || len(r.Name) > MaxNameBytes {
		t.Fatalf("rpc accepted with index %d and a name of %d bytes", r.Index, len(r.Name))
	}
	re := appendRPC(nil, &r)
	want := bytes.Clone(p)
	want[49] &= 7 // flag bits the format does not define
	if !bytes.Equal(re, want) {
		t.Fatalf("rpc %+v re-encodes to %x, decoded from %x", r, re, p)
	}
}

// checkStatus decodes a status at the start of p.
func checkStatus(t *testing.T, p []byte) {
	e, rest, err := decodeStatus(p)
	if err != nil {
		return
	}
	if len(rest) > len(p) || !bytes.Equal(rest, p[len(p)-len(rest):]) {
		t.Fatalf("status of %x leaves %x, not a suffix", p, rest)
	}
	if (e == nil) != (p[0] == 0) {
		t.Fatalf("status code %d decoded as %v", p[0], e)
	}
	if e != nil && !errors.Is(e, wireErrors[p[0]]) {
		t.Fatalf("status code %d decoded as %v, not wrapping %v", p[0], e, wireErrors[p[0]])
	}
}

// checkReplies decodes p as the results of a fixed batch, all of it and a
// signaled subset.
func checkReplies(t *testing.T, p []byte) {
	ops := []Op{Read(1, make([]byte, 8)), CAS(8, 0, 0), Write(16, []byte("x")), Read(24, make([]byte, 3)), FAA(32, 1)}
	for _, idx := range [][]int32{nil, {1, 3}} {
		if err := decodeReplies(p, ops, idx); err != nil {
			continue
		}
		want := 8 + 8 + 3 + 8
		if idx != nil {
			want = 8 + 3
		}
		if len(p) != want {
			t.Fatalf("replies of %d bytes accepted for a batch expecting %d", len(p), want)
		}
	}
}
