package remote_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

const (
	advMain = 1 << 20 // main region of the servers these tests start
	advChip = 4096    // on-chip region
)

// TestTCPForgedVerbs sends verbs a well-behaved client would never post:
// outside either region, near 2^47, with lengths that overflow, misaligned
// or mis-sized atomics, unknown kinds, memory-node bits set, the nil
// address, and batches mixing a valid verb with an invalid one. Each must
// get an error reply naming the right sentinel (or, for a READ whose reply
// could not fit in a frame, a closed connection), leave every byte of the
// canaries unchanged (a forged verb aimed so that a server which ignored
// the on-chip bit, the memory-node bits, the length or the alignment would
// hit a canary), and leave the connection usable.
func TestTCPForgedVerbs(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	a := k.off()
	if a < advChip {
		t.Fatalf("canary at offset %#x aliases the on-chip region's valid offsets", a)
	}
	junk := []byte("HOSTILE!HOSTILE!")
	anyNode := []byte{codeBadRequest, codeUnknownNode, codeOutOfBounds}
	cases := []struct {
		name    string
		verbs   []verb
		want    []byte // acceptable status codes
		closeOK bool   // the server may close the connection instead
	}{
		{name: "read at main end", verbs: []verb{rdV(advMain, 8)}, want: []byte{codeOutOfBounds}},
		{name: "read straddling main end", verbs: []verb{rdV(advMain-4, 8)}, want: []byte{codeOutOfBounds}},
		{name: "write straddling main end", verbs: []verb{wrV(advMain-4, junk[:8])}, want: []byte{codeOutOfBounds}},
		{name: "empty write at main end", verbs: []verb{wrV(advMain, nil)}, want: []byte{codeOutOfBounds}},
		{name: "read just below 2^47", verbs: []verb{rdV(onChipBit-8, 8)}, want: []byte{codeOutOfBounds}},
		{name: "write below 2^47 running past it", verbs: []verb{wrV(onChipBit-8, junk)}, want: []byte{codeOutOfBounds}},
		{name: "on-chip alias of the canary", verbs: []verb{wrV(onChipBit|a, junk)}, want: []byte{codeOutOfBounds}},
		{name: "on-chip write straddling its end", verbs: []verb{wrV(onChipBit|(advChip-4), junk[:8])}, want: []byte{codeOutOfBounds}},
		{name: "on-chip read at its end", verbs: []verb{rdV(onChipBit|advChip, 1)}, want: []byte{codeOutOfBounds}},
		{name: "highest 48-bit offset", verbs: []verb{rdV(1<<48-8, 8)}, want: []byte{codeOutOfBounds}},
		{name: "on-chip CAS at the canary's offset", verbs: []verb{casV(onChipBit|a, k.word(0), 1)}, want: []byte{codeOutOfBounds}},
		{name: "memory-node 1 alias of the canary", verbs: []verb{wrV(1<<48|a, junk)}, want: anyNode},
		{name: "memory-node 65535 alias of the canary", verbs: []verb{wrV(0xFFFF<<48|a, junk)}, want: anyNode},
		{name: "memory-node bits on an FAA", verbs: []verb{faaV(7<<48|a, 1)}, want: anyNode},
		{name: "address 2^64-8 of 16 bytes", verbs: []verb{wrV(1<<64-8, junk)}, want: anyNode},
		{name: "nil address", verbs: []verb{wrV(0, junk[:8])}, want: []byte{codeNilAddr}},
		{name: "nil address CAS", verbs: []verb{casV(0, 0, 1)}, want: []byte{codeNilAddr}},
		{name: "read of 2^32-1 bytes", verbs: []verb{rdV(a, 1<<32-1)}, want: []byte{codeOutOfBounds}, closeOK: true},
		{name: "read of 2^31 bytes at offset 8", verbs: []verb{rdV(8, 1<<31)}, want: []byte{codeOutOfBounds}, closeOK: true},
		{name: "misaligned CAS inside the canary", verbs: []verb{casV(a+4, binary.LittleEndian.Uint64(k.mainB[4:]), 1)}, want: []byte{codeMisaligned}},
		{name: "misaligned FAA", verbs: []verb{faaV(a+1, 1)}, want: []byte{codeMisaligned}},
		{name: "misaligned on-chip CAS", verbs: []verb{casV(onChipBit|4, binary.LittleEndian.Uint64(k.chipB[4:]), 1)}, want: []byte{codeMisaligned}},
		{name: "CAS of 16 bytes", verbs: []verb{{kind: kindCAS, addr: a, n: 16, cmp: k.word(0), swp: 1}}, want: []byte{codeBadRequest}},
		{name: "CAS of 4 bytes", verbs: []verb{{kind: kindCAS, addr: a, n: 4, cmp: k.word(0), swp: 1}}, want: []byte{codeBadRequest}},
		{name: "FAA of 0 bytes", verbs: []verb{{kind: kindFAA, addr: a, n: 0, swp: 1}}, want: []byte{codeBadRequest}},
		{name: "CAS at main end", verbs: []verb{casV(advMain, 0, 1)}, want: []byte{codeOutOfBounds}},
		{name: "FAA at on-chip end", verbs: []verb{faaV(onChipBit|advChip, 1)}, want: []byte{codeOutOfBounds}},
		{name: "unknown verb kind 0", verbs: []verb{{kind: 0, addr: a, n: 8}}, want: []byte{codeBadRequest}},
		{name: "unknown verb kind 9", verbs: []verb{{kind: 9, addr: a, n: 8}}, want: []byte{codeBadRequest}},
		{name: "valid write then read past the end", verbs: []verb{wrV(a, junk), rdV(advMain, 8)}, want: []byte{codeOutOfBounds}},
		{name: "valid CAS then nil write", verbs: []verb{casV(a, k.word(0), 1), wrV(0, junk[:8])}, want: []byte{codeNilAddr}},
		{name: "valid FAA then misaligned CAS", verbs: []verb{faaV(a+8, 1), casV(a+12, 0, 1)}, want: []byte{codeMisaligned}},
		{name: "valid writes then memory-node bits", verbs: []verb{wrV(a+16, junk), wrV(onChipBit|8, junk), faaV(1<<48|a, 1)}, want: anyNode},
		{name: "valid write then unknown kind", verbs: []verb{wrV(a, junk), {kind: 200, addr: a, n: 8}}, want: []byte{codeBadRequest}},
	}
	r := authed(t, ts.addr)
	for _, tc := range cases {
		code, msg, _, ok := r.do(tc.verbs...)
		switch {
		case !ok && tc.closeOK:
			r = authed(t, ts.addr)
		case !ok:
			t.Fatalf("%s: the server closed the connection instead of an error reply", tc.name)
		case !slices.Contains(tc.want, code):
			t.Fatalf("%s: status %d %q, want one of %v", tc.name, code, msg, tc.want)
		}
		k.check(t, tc.name)
		// The connection that sent the forged verb still works.
		got := r.mustDo(rdV(a, canaryBytes))
		if i := firstDiff(got, k.mainB); i >= 0 {
			t.Fatalf("%s: raw read of the canary differs at byte %d", tc.name, i)
		}
	}
	if _, err := k.c.FAA(context.Background(), k.main.Add(canaryBytes-8), 0); err != nil {
		t.Fatalf("legitimate client after the forged verbs: %v", err)
	}
}

// TestTCPForgedRPCs sends two-sided requests no client would send. Each
// gets an error reply (or, for one the frame format itself forbids, a
// closed connection); nothing is allocated for a refused request and the
// legitimate pool keeps working.
func TestTCPForgedRPCs(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	used := func() uint64 {
		u, err := p.MemoryUsed()
		if err != nil {
			t.Fatal(err)
		}
		return u[0]
	}
	before := used()
	long := string(make([]byte, 1025))
	cases := []struct {
		name    string
		payload []byte
		want    []byte
		closeOK bool
	}{
		{"unknown kind 0", rpcPayload(0, 64, 8, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"unknown kind 99", rpcPayload(99, 64, 8, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"alloc of 0 bytes", rpcPayload(rpcAlloc, 0, 8, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"alloc of 2^63 bytes", rpcPayload(rpcAlloc, 1<<63, 8, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest, codeOutOfMemory}, false},
		{"alloc of 2^64-8 bytes aligned to 2^63", rpcPayload(rpcAlloc, 1<<64-8, 1<<63, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest, codeOutOfMemory}, false},
		{"alloc aligned to 3", rpcPayload(rpcAlloc, 64, 3, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"alloc aligned to 0", rpcPayload(rpcAlloc, 64, 0, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"alloc of the whole region", rpcPayload(rpcAlloc, advMain, 8, 0, 0, 0, 0, 0, ""), []byte{codeOutOfMemory}, false},
		{"alloc with a bad fallback", rpcPayload(rpcAlloc, 1<<62, 64, 1<<62, 5, 0, 0, 0, ""), []byte{codeBadRequest, codeOutOfMemory}, false},
		{"named of 0 bytes", rpcPayload(rpcNamed, 0, 0, 0, 0, 0, 0, 0, "x"), []byte{codeBadRequest}, false},
		{"named of 2^40 bytes", rpcPayload(rpcNamed, 1<<40, 0, 0, 0, 0, 0, 0, "y"), []byte{codeBadRequest, codeOutOfMemory}, false},
		{"named with a 1025-byte name", rpcPayload(rpcNamed, 64, 0, 0, 0, 0, 0, 0, long), []byte{codeBadRequest}, true},
		{"join of pool 0 without adopt", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, 0, 0, ""), []byte{codeBadRequest}, false},
		{"join of another pool", rpcPayload(rpcJoin, 0, 0, 0, 0, 0xBAD, place(0, 1), 0, ""), []byte{codeBadNode}, false},
		{"join as another index", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(5, 6), 1, ""), []byte{codeBadNode}, false},
		{"join in a pool of another size", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(0, 2), 1, ""), []byte{codeBadNode}, false},
		{"join fixing another size", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(0, 2), 1|4, ""), []byte{codeBadNode}, false},
		{"join in a pool of no nodes", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(0, 0), 1, ""), []byte{codeBadRequest}, false},
		{"join as an index past the pool's size", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(3, 2), 1, ""), []byte{codeBadRequest}, false},
		{"join in a pool of 2^16+1 nodes", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(0, 1<<16+1), 1, ""), []byte{codeBadRequest}, true},
		{"join as index 2^16", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(1<<16, 1<<16), 1, ""), []byte{codeBadRequest}, true},
		{"join as index 2^32-1", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, 1<<64-1, 1, ""), []byte{codeBadRequest}, true},
	}
	r := authed(t, ts.addr)
	for _, tc := range cases {
		f, ok := r.call(rawRPC, tc.payload)
		if !ok {
			if !tc.closeOK {
				t.Fatalf("%s: the server closed the connection instead of an error reply", tc.name)
			}
			r = authed(t, ts.addr)
			continue
		}
		code, msg, _, err := f.status()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Contains(tc.want, code) {
			t.Fatalf("%s: status %d %q, want one of %v", tc.name, code, msg, tc.want)
		}
	}
	if after := used(); after != before {
		t.Errorf("refused requests moved the allocation cursor from %d to %d", before, after)
	}
	k.check(t, "forged requests")
	if _, err := k.c.Alloc(context.Background(), 64); err != nil {
		t.Fatalf("legitimate allocation after forged requests: %v", err)
	}
	if _, err := k.c.Named(context.Background(), "after-forged-rpcs", 64); err != nil {
		t.Fatalf("legitimate named region after forged requests: %v", err)
	}
}

// TestTCPHostileHeaderWrites has an authenticated client overwrite the
// reserved bytes at the start of the main region (the node's header and
// named-region directory) with garbage and then ask for named regions,
// allocations and the node's descriptor. The server may refuse the writes
// or the requests, but must neither crash nor stop serving: it runs as a
// memnode process so that a crash is seen as the process dying.
func TestTCPHostileHeaderWrites(t *testing.T) {
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: advMain})
	addr := nodes[0].Addr
	tokenConn := func() *rawConn {
		r := dialRaw(t, addr)
		if code, msg := r.hello(memnodetest.Token); code != codeOK {
			t.Fatalf("hello: status %d %q", code, msg)
		}
		return r
	}
	r := tokenConn()
	garbage := make([]byte, 4096-8)
	for i := 0; i+8 <= len(garbage); i += 8 {
		// Every directory entry claimed by a hash no name has, every link
		// and offset pointing far outside the region.
		binary.LittleEndian.PutUint64(garbage[i:], 0xFFFF_FFFF_FFF8-uint64(i))
	}
	writes := []struct {
		name string
		v    verb
	}{
		{"whole reserved block", wrV(8, garbage)},
		{"allocation cursor below the reserved bytes", wrV(32, le64(16))},
		{"directory link past the region", wrV(56, le64(1<<46))},
		{"directory link inside the header", wrV(56, le64(8))},
	}
	requests := []struct {
		name    string
		payload []byte
	}{
		{"named", rpcPayload(rpcNamed, 64, 0, 0, 0, 0, 0, 0, "victim")},
		{"named again", rpcPayload(rpcNamed, 1<<19, 0, 0, 0, 0, 0, 0, "victim")},
		{"alloc", rpcPayload(rpcAlloc, 64, 8, 0, 0, 0, 0, 0, "")},
		{"info", rpcPayload(rpcInfo, 0, 0, 0, 0, 0, 0, 0, "")},
		{"join", rpcPayload(rpcJoin, 0, 0, 0, 0, 0, place(0, 1), 1, "")},
	}
	for _, w := range writes {
		code, msg, _, ok := r.do(w.v)
		if !ok {
			t.Fatalf("write of %s: connection closed (server crashed?)\n%s", w.name, nodes[0].Log())
		}
		t.Logf("write of %s: status %d %q", w.name, code, msg)
		for _, q := range requests {
			f, ok := r.call(rawRPC, q.payload)
			if !ok {
				t.Fatalf("after the write of %s, request %s: connection closed (server crashed?)\n%s", w.name, q.name, nodes[0].Log())
			}
			code, msg, _, _ := f.status()
			t.Logf("  %s: status %d %q", q.name, code, msg)
		}
	}
	// The server is alive and serves a fresh connection.
	r2 := tokenConn()
	r2.mustDo(rdV(advMain-8, 8))
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestTCPMalformedFrames sends frames that break the protocol after a
// successful handshake. Each must close that connection only, within a
// bounded time (also when the frame announces a payload it never sends),
// without executing any verb it carries; a connection opened before and a
// legitimate pool keep working.
func TestTCPMalformedFrames(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	a := k.off()
	bystander := authed(t, ts.addr)
	junk := []byte("HOSTILE!")
	valid := batchPayload(wrV(a, junk))
	lenWord := func(n uint32, rest ...byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, n), rest...)
	}
	hdr := func(typ byte) []byte { return []byte{rawVersion, typ, rawSignaled, 0, 1, 0, 0, 0, 0, 0, 0, 0} }
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"version 0", rawFrame(0, rawBatch, rawSignaled, 1, valid)},
		{"version 1", rawFrame(1, rawBatch, rawSignaled, 1, valid)},
		{"version 2", rawFrame(2, rawBatch, rawSignaled, 1, valid)},
		{"version 3", rawFrame(3, rawBatch, rawSignaled, 1, valid)},
		{"version 5", rawFrame(5, rawBatch, rawSignaled, 1, valid)},
		{"version 255", rawFrame(255, rawBatch, rawSignaled, 1, valid)},
		{"length 0", lenWord(0, hdr(rawBatch)...)},
		{"length 11", lenWord(11, hdr(rawBatch)...)},
		{"length above the maximum, payload never sent", lenWord(rawMaxFrame+1, hdr(rawBatch)...)},
		{"length 2^32-1, payload never sent", lenWord(1<<32-1, hdr(rawBatch)...)},
		{"unknown type 0", rawFrame(rawVersion, 0, rawSignaled, 1, valid)},
		{"unknown type 99", rawFrame(rawVersion, 99, rawSignaled, 1, valid)},
		{"welcome from a client", rawFrame(rawVersion, rawWelcome, rawSignaled, 1, []byte{0})},
		{"batch reply from a client", rawFrame(rawVersion, rawBatchOK, rawSignaled, 1, valid)},
		{"rpc reply from a client", rawFrame(rawVersion, rawRPCOK, rawSignaled, 1, valid)},
		{"zero-verb batch", rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload())},
		{"zero-verb unsignaled batch", rawFrame(rawVersion, rawBatch, 0, 1, batchPayload())},
		{"batch without a count", rawFrame(rawVersion, rawBatch, rawSignaled, 1, []byte{1, 0})},
		{"batch of 2^16+1 verbs", rawFrame(rawVersion, rawBatch, rawSignaled, 1, lenWord(rawMaxBatchVerbs+1))},
		{"batch of 2^32-1 verbs", rawFrame(rawVersion, rawBatch, rawSignaled, 1, lenWord(1<<32-1))},
		{"count 2 with one verb", rawFrame(rawVersion, rawBatch, rawSignaled, 1, append(lenWord(2), valid[4:]...))},
		{"trailing bytes after a valid write", rawFrame(rawVersion, rawBatch, rawSignaled, 1, append(batchPayload(wrV(a, junk)), 1, 2, 3))},
		{"unsignaled with trailing bytes", rawFrame(rawVersion, rawBatch, 0, 1, append(batchPayload(wrV(a, junk)), 1, 2, 3))},
		{"write of 100 bytes carrying 8", rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload(verb{kind: kindWrite, addr: a, n: 100, data: junk}))},
		{"valid write then a write of 2^32-1 bytes carrying 8", rawFrame(rawVersion, rawBatch, rawSignaled, 1,
			batchPayload(wrV(a, junk), verb{kind: kindWrite, addr: a + 8, n: 1<<32 - 1, data: junk}))},
		{"truncated verb", rawFrame(rawVersion, rawBatch, rawSignaled, 1, append(lenWord(1), kindRead, 1, 2))},
		{"truncated CAS", rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload(casV(a, k.word(0), 1))[:4+13+8])},
		{"valid write then a truncated FAA", rawFrame(rawVersion, rawBatch, rawSignaled, 1,
			append(append(lenWord(2), appendRawVerb(nil, wrV(a, junk))...), appendRawVerb(nil, faaV(a, 1))[:17]...))},
		{"short rpc", rawFrame(rawVersion, rawRPC, rawSignaled, 1, make([]byte, 10))},
		{"rpc name longer than its frame", rawFrame(rawVersion, rawRPC, rawSignaled, 1, rpcPayload(rpcNamed, 64, 0, 0, 0, 0, 0, 0, "abc")[:52+1])},
		{"rpc with trailing bytes", rawFrame(rawVersion, rawRPC, rawSignaled, 1, append(rpcPayload(rpcInfo, 0, 0, 0, 0, 0, 0, 0, ""), 9))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := authed(t, ts.addr)
			if err := r.send(tc.bytes); err != nil {
				t.Fatalf("send: %v", err)
			}
			defer func() {
				k.check(t, tc.name)
				if got := bystander.mustDo(rdV(a, 8)); !slices.Equal(got, k.mainB[:8]) {
					t.Fatalf("bystander read %x", got)
				}
			}()
			for _, f := range r.expectClosed(5 * time.Second) {
				code, msg, _, err := f.status()
				if (f.typ == rawBatchOK || f.typ == rawRPCOK) && err == nil && code == codeOK {
					t.Errorf("the server answered with success before closing")
				}
				t.Logf("frame %d of type %d before closing: status %d %q", f.id, f.typ, code, msg)
			}
		})
	}
	if _, err := k.c.FAA(context.Background(), k.main.Add(8), 0); err != nil {
		t.Fatalf("legitimate client after malformed frames: %v", err)
	}
}

// TestTCPTruncatedFrame sends the first complete verb of a two-verb batch
// and half of the second, then closes its sending side: the server must
// not execute the complete verb, and must close the connection.
func TestTCPTruncatedFrame(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	a := k.off()
	for _, signaled := range []uint16{rawSignaled, 0} {
		r := authed(t, ts.addr)
		whole := rawFrame(rawVersion, rawBatch, signaled, 7, batchPayload(wrV(a, []byte("HOSTILE!")), faaV(a+8, 1)))
		r.mustSend(whole[:len(whole)-10])
		// Let the server read the part that arrived before the end of stream.
		time.Sleep(50 * time.Millisecond)
		if err := r.nc.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		for _, f := range r.expectClosed(5 * time.Second) {
			t.Errorf("signaled=%d: the server answered a truncated frame with type %d", signaled, f.typ)
		}
		k.check(t, fmt.Sprintf("truncated frame (signaled=%d)", signaled))
	}
}

// TestTCPHandshake checks authentication: the right token is welcomed, a
// wrong one (empty, a prefix, one byte more, over-long, of another case)
// gets a refusal naming ErrAuth or a closed connection and nothing else,
// and is logged; a frame before the hello is never executed; a pool with
// a wrong token fails with an error wrapping ErrAuth; and good clients are
// served throughout.
func TestTCPHandshake(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	good := authed(t, ts.addr)
	long := string(make([]byte, 5000))
	for _, tok := range []string{"", testToken[:len(testToken)-1], testToken + "x", "ADVERSARIAL-TOKEN", long} {
		r := dialRaw(t, ts.addr)
		r.mustSend(rawFrame(rawVersion, rawHello, 0, 0, helloPayload(tok)))
		// A refusal must not be followed by service.
		r.send(rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload(wrV(k.off(), []byte("HOSTILE!")))))
		frames := r.expectClosed(5 * time.Second)
		for i, f := range frames {
			if i > 0 || f.typ != rawWelcome {
				t.Errorf("token of %d bytes: frame %d of type %d after the hello", len(tok), i, f.typ)
				continue
			}
			if code, msg, _, err := f.status(); err != nil || code != codeAuth {
				t.Errorf("token of %d bytes: welcome status %d %q (%v), want %d (ErrAuth)", len(tok), code, msg, err, codeAuth)
			}
		}
	}
	if !regexp.MustCompile(`(?i)refus|auth|token`).MatchString(ts.log.String()) {
		t.Errorf("the server did not log the refusals:\n%s", ts.log.String())
	}

	t.Run("frame before hello", func(t *testing.T) {
		r := dialRaw(t, ts.addr)
		r.mustSend(rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload(wrV(k.off(), []byte("HOSTILE!")))))
		for _, f := range r.expectClosed(5 * time.Second) {
			if f.typ != rawWelcome {
				t.Errorf("frame of type %d in answer to a batch before the hello", f.typ)
			} else if code, _, _, _ := f.status(); code == codeOK {
				t.Error("a batch before the hello was welcomed")
			}
		}
	})
	t.Run("rpc before hello", func(t *testing.T) {
		r := dialRaw(t, ts.addr)
		r.mustSend(rawFrame(rawVersion, rawRPC, rawSignaled, 1, rpcPayload(rpcInfo, 0, 0, 0, 0, 0, 0, 0, "")))
		for _, f := range r.expectClosed(5 * time.Second) {
			if f.typ == rawRPCOK {
				t.Error("an rpc before the hello was answered")
			}
		}
	})
	t.Run("hello with a token length past its frame", func(t *testing.T) {
		r := dialRaw(t, ts.addr)
		r.mustSend(rawFrame(rawVersion, rawHello, 0, 0, append(binary.LittleEndian.AppendUint16(nil, 200), testToken...)))
		for _, f := range r.expectClosed(5 * time.Second) {
			if code, _, _, _ := f.status(); f.typ != rawWelcome || code == codeOK {
				t.Errorf("frame of type %d, status %d, in answer to a malformed hello", f.typ, code)
			}
		}
	})
	t.Run("pool with a wrong token", func(t *testing.T) {
		_, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{ts.addr}, Token: "wrong", DialTimeout: 3 * time.Second}})
		if !errors.Is(err, remote.ErrAuth) {
			t.Fatalf("NewPool with a wrong token: %v, want ErrAuth", err)
		}
	})
	t.Run("pool token from the environment", func(t *testing.T) {
		t.Setenv("DMINDEX_TOKEN", testToken)
		q, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{ts.addr}, DialTimeout: 3 * time.Second}})
		if err != nil {
			t.Fatalf("NewPool with the token in DMINDEX_TOKEN: %v", err)
		}
		q.Close()
		t.Setenv("DMINDEX_TOKEN", "")
		_, err = remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{ts.addr}, DialTimeout: 3 * time.Second}})
		if !errors.Is(err, remote.ErrAuth) && !errors.Is(err, remote.ErrBadRequest) {
			t.Fatalf("NewPool without any token: %v, want ErrAuth or ErrBadRequest", err)
		}
	})
	k.check(t, "refused connections")
	good.mustDo(faaV(k.off()+8, 0))
}

// TestTCPHandshakeTimeout: a connection that stays silent, or trickles its
// hello a byte at a time, is closed once HandshakeTimeout has passed since
// it connected; an authenticated connection that then idles is not.
func TestTCPHandshakeTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip, HandshakeTimeout: timeout})
	idle := authed(t, ts.addr)

	silent := dialRaw(t, ts.addr)
	start := time.Now()
	silent.expectClosed(timeout + 3*time.Second)
	if d := time.Since(start); d < timeout/2 {
		t.Errorf("silent connection closed after %v, before the %v handshake timeout", d, timeout)
	}

	// 2 bytes every 60 ms: the hello takes about 1 s, far past the timeout,
	// although no single read waits longer than 60 ms.
	slow := dialRaw(t, ts.addr)
	hello := rawFrame(rawVersion, rawHello, 0, 0, helloPayload(testToken))
	start = time.Now()
	for i := 0; i < len(hello); i += 2 {
		if slow.send(hello[i:min(i+2, len(hello))]) != nil {
			break
		}
		time.Sleep(60 * time.Millisecond)
	}
	for _, f := range slow.expectClosed(3 * time.Second) {
		if code, _, _, _ := f.status(); code == codeOK {
			t.Errorf("a hello trickled over %v was welcomed (handshake timeout %v)", time.Since(start), timeout)
		}
	}

	time.Sleep(2 * timeout)
	idle.mustDo(rdV(4096, 8))
}

// TestTCPPostingOrder pipelines, on one connection, an unsignaled WRITE
// and a signaled READ of the same word, many times over, without waiting:
// each READ must see the WRITE posted just before it (posting order), only
// signaled batches are answered, and replies come in order with their ids.
// Within one batch, a READ after a WRITE sees it too.
func TestTCPPostingOrder(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	r := authed(t, ts.addr)
	const w = 8192
	const rounds = 500
	var stream []byte
	for i := range rounds {
		stream = append(stream, rawFrame(rawVersion, rawBatch, 0, uint64(1e6+i), batchPayload(wrV(w, le64(uint64(i)+1))))...)
		stream = append(stream, rawFrame(rawVersion, rawBatch, rawSignaled, uint64(i), batchPayload(rdV(w, 8), faaV(w+8, 1)))...)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.send(stream) }()
	for i := range rounds {
		f, err := r.read(10 * time.Second)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if f.typ != rawBatchOK || f.id != uint64(i) {
			t.Fatalf("reply %d: frame %d of type %d (an unsignaled batch answered, or replies out of order)", i, f.id, f.typ)
		}
		code, msg, res, err := f.status()
		if err != nil || code != codeOK || len(res) != 16 {
			t.Fatalf("reply %d: status %d %q, %d result bytes, %v", i, code, msg, len(res), err)
		}
		if got := binary.LittleEndian.Uint64(res); got != uint64(i)+1 {
			t.Fatalf("READ %d saw %d, want the WRITE posted before it (%d)", i, got, i+1)
		}
		if old := binary.LittleEndian.Uint64(res[8:]); old != uint64(i) {
			t.Fatalf("FAA %d returned %d, want %d", i, old, i)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	res := r.mustDo(wrV(w+16, []byte("in-batch")), rdV(w+16, 8), casV(w+16, binary.LittleEndian.Uint64([]byte("in-batch")), 42), rdV(w+16, 8))
	if string(res[:8]) != "in-batch" || binary.LittleEndian.Uint64(res[16:]) != 42 {
		t.Fatalf("verbs of one batch out of order: %x", res)
	}
}

// TestTCPConcurrentAtomics runs FAA and CAS-increment loops from many
// goroutines of several pools (so several connections each) and from raw
// connections that pipeline their FAAs, on words of both regions: every
// total must be exact and every FAA must return a distinct old value.
func TestTCPConcurrentAtomics(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	const pools, clients, faas, cases = 3, 4, 200, 50
	const raws, rawFAAs = 3, 300
	ps := make([]*remote.Pool, pools)
	for i := range ps {
		ps[i] = tcpPool(t, ts.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := ps[0].NewComputeNode().NewClient().AllocOn(ctx, 0, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	words := []remote.Addr{a, a.Add(8), remote.OnChip(0, 64), remote.OnChip(0, 72)}
	var mu sync.Mutex
	olds := map[uint64]int{}
	var wg sync.WaitGroup
	for _, p := range ps {
		cn := p.NewComputeNode()
		for range clients {
			c := cn.NewClient()
			wg.Go(func() {
				for i := range faas {
					for _, w := range []remote.Addr{words[0], words[2]} {
						old, err := c.FAA(ctx, w, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if w == words[0] {
							mu.Lock()
							olds[old]++
							mu.Unlock()
						}
					}
					if i >= cases {
						continue
					}
					for _, w := range []remote.Addr{words[1], words[3]} {
						var buf [8]byte
						if err := c.Read(ctx, w, buf[:]); err != nil {
							t.Error(err)
							return
						}
						for v := binary.LittleEndian.Uint64(buf[:]); ; {
							old, err := c.CAS(ctx, w, v, v+1)
							if err != nil {
								t.Error(err)
								return
							}
							if old == v {
								break
							}
							v = old
						}
					}
				}
			})
		}
	}
	for range raws {
		r := authed(t, ts.addr)
		wg.Go(func() {
			var stream []byte
			for i := range rawFAAs {
				stream = append(stream, rawFrame(rawVersion, rawBatch, rawSignaled, uint64(i), batchPayload(faaV(a.Offset(), 1)))...)
			}
			errc := make(chan error, 1)
			go func() { errc <- r.send(stream) }()
			for i := range rawFAAs {
				f, err := r.read(30 * time.Second)
				if err != nil {
					t.Errorf("raw FAA reply %d: %v", i, err)
					return
				}
				code, _, res, err := f.status()
				if err != nil || code != codeOK || f.id != uint64(i) || len(res) != 8 {
					t.Errorf("raw FAA reply %d: id %d status %d, %v", i, f.id, code, err)
					return
				}
				mu.Lock()
				olds[binary.LittleEndian.Uint64(res)]++
				mu.Unlock()
			}
			if err := <-errc; err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	c := ps[1].NewComputeNode().NewClient()
	wantFAA := uint64(pools*clients*faas + raws*rawFAAs)
	for i, want := range []uint64{wantFAA, pools * clients * cases, pools * clients * faas, pools * clients * cases} {
		got, err := c.FAA(ctx, words[i], 0)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("word %v: %d, want %d", words[i], got, want)
		}
	}
	if uint64(len(olds)) != wantFAA {
		t.Errorf("%d distinct FAA results for %d FAAs", len(olds), wantFAA)
	}
	for v, n := range olds {
		if n != 1 || v >= wantFAA {
			t.Errorf("FAA old value %d returned %d times", v, n)
		}
	}
}

// TestTCPWordAtomicity: concurrent 64-byte WRITEs from two pools, each
// filling every word with one byte value repeated, never let a concurrent
// READ see a word mixing bytes of two WRITEs.
func TestTCPWordAtomicity(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	seed := testseed.Seed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p1, p2 := tcpPool(t, ts.addr), tcpPool(t, ts.addr)
	a, err := p1.NewComputeNode().NewClient().AllocOn(ctx, 0, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	const iters = 1500
	var wg sync.WaitGroup
	for w, p := range []*remote.Pool{p1, p2} {
		c := p.NewComputeNode().NewClient()
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			buf := make([]byte, 64)
			for range iters {
				x := byte(rng.Uint32())
				for i := range buf {
					buf[i] = x
				}
				if err := c.Write(ctx, a, buf); err != nil {
					t.Error(err)
					return
				}
			}
		})
		r := p.NewComputeNode().NewClient()
		wg.Go(func() {
			buf := make([]byte, 64)
			for range iters {
				if err := r.Read(ctx, a, buf); err != nil {
					t.Error(err)
					return
				}
				for i := 0; i < 64; i += 8 {
					for j := 1; j < 8; j++ {
						if buf[i+j] != buf[i] {
							t.Errorf("torn word at byte %d: %x", i, buf[i:i+8])
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestTCPUnavailable: a memory node that cannot be reached, accepts but
// never answers, closes the connection during the handshake (not a memory
// node, or one shutting down: never ErrAuth, which needs a refusal), or
// closes under an open pool gives errors wrapping ErrUnavailable within the
// configured timeouts.
func TestTCPUnavailable(t *testing.T) {
	const dialTimeout = 500 * time.Millisecond
	const slack = 3 * time.Second
	cfg := func(addr string) remote.Config {
		return remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{addr}, Token: testToken,
			DialTimeout: dialTimeout, Timeout: dialTimeout}}
	}
	t.Run("nobody listening", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		start := time.Now()
		_, err = remote.NewPool(cfg(addr))
		if !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("NewPool on a closed port: %v, want ErrUnavailable", err)
		}
		if d := time.Since(start); d > dialTimeout+slack {
			t.Fatalf("NewPool took %v", d)
		}
	})
	t.Run("silent server", func(t *testing.T) {
		l := serveTest(t, func(c net.Conn) { // read everything, answer nothing
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(dialTimeout + slack))
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		})
		start := time.Now()
		_, err := remote.NewPool(cfg(l.Addr().String()))
		if !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("NewPool on a server that never answers: %v, want ErrUnavailable", err)
		}
		if d := time.Since(start); d > dialTimeout+slack {
			t.Fatalf("NewPool took %v with DialTimeout %v", d, dialTimeout)
		}
	})
	t.Run("peer closes during the handshake", func(t *testing.T) {
		l := serveTest(t, func(c net.Conn) {
			// Read the hello (so that the close is a clean end of stream,
			// not a reset), then close without a refusal.
			r := &rawConn{t: t, nc: c, br: bufio.NewReader(c)}
			r.read(dialTimeout + slack)
			c.Close()
		})
		start := time.Now()
		_, err := remote.NewPool(cfg(l.Addr().String()))
		if !errors.Is(err, remote.ErrUnavailable) || errors.Is(err, remote.ErrAuth) {
			t.Fatalf("NewPool on a peer that closes during the handshake: %v, want ErrUnavailable and not ErrAuth", err)
		}
		if d := time.Since(start); d > dialTimeout+slack {
			t.Fatalf("NewPool took %v", d)
		}
	})
	t.Run("server closed under a pool", func(t *testing.T) {
		ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
		p, err := remote.NewPool(cfg(ts.addr))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		c := p.NewComputeNode().NewClient()
		ctx := context.Background()
		a, err := c.Alloc(ctx, 64)
		if err != nil {
			t.Fatal(err)
		}
		raw := authed(t, ts.addr)
		if err := ts.srv.Close(); err != nil {
			t.Fatalf("Server.Close: %v", err)
		}
		raw.expectClosed(slack)
		for i := range 3 {
			if c.Crashed() {
				// A failed FAA stops its client (Client.Crashed).
				c = c.ComputeNode().NewClient()
			}
			start := time.Now()
			_, err := c.FAA(ctx, a, 1)
			if !errors.Is(err, remote.ErrUnavailable) {
				t.Fatalf("FAA %d after the server closed: %v, want ErrUnavailable", i, err)
			}
			if d := time.Since(start); d > dialTimeout+slack {
				t.Fatalf("FAA %d took %v", i, d)
			}
		}
		if c.Crashed() {
			c = c.ComputeNode().NewClient()
		}
		if _, err := c.Named(ctx, "x", 64); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("Named after the server closed: %v, want ErrUnavailable", err)
		}
		if d, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
			d.Close()
			t.Error("the server still accepts connections after Close")
		}
	})
}

// TestTCPNodePositions: memory nodes record their pool and position; a
// pool listing them in another order, or a region size they do not have,
// is refused with ErrBadNode (or ErrBadRequest for the size) and changes
// nothing, so the first pool and a correct newcomer keep working.
func TestTCPNodePositions(t *testing.T) {
	a := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	b := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	ctx := context.Background()
	p1 := tcpPool(t, a.addr, b.addr)
	c1 := p1.NewComputeNode().NewClient()
	x, err := c1.Named(ctx, "positions", 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Write(ctx, x, []byte("first!!!")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  remote.Config
		want []error
	}{
		{"swapped", remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{b.addr, a.addr}, Token: testToken}}, []error{remote.ErrBadNode}},
		{"second node alone", remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{b.addr}, Token: testToken}}, []error{remote.ErrBadNode}},
		{"twice the first node", remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{a.addr, a.addr}, Token: testToken}}, []error{remote.ErrBadNode}},
		{"another size", remote.Config{NodeBytes: 2 * advMain, TCP: &remote.TCPConfig{MemoryNodes: []string{a.addr, b.addr}, Token: testToken}},
			[]error{remote.ErrBadNode, remote.ErrBadRequest}},
	} {
		expectRefused(t, tc.name, tc.cfg, tc.want)
	}
	p2 := tcpPool(t, a.addr, b.addr)
	c2 := p2.NewComputeNode().NewClient()
	y, err := c2.Named(ctx, "positions", 64)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if err := c2.Read(ctx, y, got); err != nil || y != x || string(got) != "first!!!" {
		t.Fatalf("second pool: %v at %v (first at %v): %q", err, y, x, got)
	}
}

// TestTCPNodeCount: memory nodes record the number of memory nodes of
// their pool. A pool listing only the first of them, or more of them than
// the pool has, is refused by NewPool with ErrBadNode naming both counts
// (rather than accepted to fail every operation on a pointer into a node it
// lacks with ErrUnknownNode); a refused pool stamps no node it lists, so a
// fresh server it named still starts a pool of its own; the first pool and
// a correct newcomer keep working.
func TestTCPNodeCount(t *testing.T) {
	srv := make([]*testServer, 4) // 0 and 1: the pool; 2 and 3: fresh
	for i := range srv {
		srv[i] = startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	}
	addr := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, srv[i].addr)
		}
		return out
	}
	ctx := context.Background()
	p1 := tcpPool(t, addr(0, 1)...)
	c1 := p1.NewComputeNode().NewClient()
	var written []remote.Addr
	for mn := range 2 {
		a, err := c1.AllocOn(ctx, mn, 64, 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := c1.Write(ctx, a, []byte(fmt.Sprintf("node %d!", mn))); err != nil {
			t.Fatal(err)
		}
		written = append(written, a)
	}
	for _, tc := range []struct {
		name  string
		nodes []int
	}{
		{"first node alone", []int{0}},
		{"a fresh node added", []int{0, 1, 2}},
		{"two fresh nodes added", []int{0, 1, 2, 3}},
		{"the first node twice more", []int{0, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := remote.Config{TCP: &remote.TCPConfig{MemoryNodes: addr(tc.nodes...), Token: testToken,
				DialTimeout: 3 * time.Second, Timeout: 5 * time.Second}}
			p, err := remote.NewPool(cfg)
			if err == nil {
				p.Close()
				t.Fatalf("NewPool of %d of a pool's 2 memory nodes succeeded", len(tc.nodes))
			}
			if !errors.Is(err, remote.ErrBadNode) {
				t.Fatalf("NewPool: %v, want ErrBadNode", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "pool has 2 memory node(s)") || !strings.Contains(msg, fmt.Sprintf("lists %d", len(tc.nodes))) {
				t.Errorf("error %q does not name both counts (2 and %d)", msg, len(tc.nodes))
			}
		})
	}
	// The fresh servers were stamped by no refused pool: they start a pool
	// of their own, in either order.
	tcpPool(t, addr(3, 2)...)
	// The first pool, and a newcomer listing the same nodes, read what it
	// wrote.
	p2 := tcpPool(t, addr(0, 1)...)
	c2 := p2.NewComputeNode().NewClient()
	for _, c := range []*remote.Client{c1, c2} {
		for mn, a := range written {
			got := make([]byte, 7)
			if err := c.Read(ctx, a, got); err != nil || string(got) != fmt.Sprintf("node %d!", mn) {
				t.Errorf("node %d holds %q, %v", mn, got, err)
			}
		}
	}
}

// TestServerConfig checks NewServer's contract: Token is required; a File
// is created when missing and keeps its contents across servers, also when
// reopened with sizes 0 (which accept the file's); a file that is not a
// memory node, or has another size than Bytes asks, is refused with
// ErrBadNode and left untouched.
func TestServerConfig(t *testing.T) {
	if s, err := remote.NewServer(remote.ServerConfig{Bytes: advMain}); err == nil {
		s.Close()
		t.Error("NewServer without a token succeeded")
	}
	if s, err := remote.NewServer(remote.ServerConfig{Bytes: -1, Token: testToken}); err == nil {
		s.Close()
		t.Error("NewServer with Bytes -1 succeeded")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "node")
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip, File: file})
	p := tcpPool(t, ts.addr)
	c := p.NewComputeNode().NewClient()
	ctx := context.Background()
	x, err := c.Named(ctx, "kept", 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, x, []byte("kept!!!!")); err != nil {
		t.Fatal(err)
	}
	if s, err := remote.NewServer(remote.ServerConfig{Bytes: 2 * advMain, File: file, Token: testToken}); err == nil {
		s.Close()
		t.Error("a second server with another size on a served file succeeded")
	}
	p.Close()
	ts.srv.Close()
	if m, _ := ts.srv.Bytes(); m != advMain {
		t.Errorf("Bytes() = %d, want %d", m, advMain)
	}

	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := remote.NewServer(remote.ServerConfig{Bytes: 2 * advMain, File: file, Token: testToken}); !errors.Is(err, remote.ErrBadNode) {
		if err == nil {
			s.Close()
		}
		t.Errorf("NewServer with another size than the file's: %v, want ErrBadNode", err)
	}
	if after, _ := os.ReadFile(file); !slices.Equal(before, after) {
		t.Error("a refused server modified the file")
	}

	junk := filepath.Join(dir, "junk")
	content := make([]byte, advMain)
	for i := range content {
		content[i] = byte(i * 7)
	}
	if err := os.WriteFile(junk, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := remote.NewServer(remote.ServerConfig{File: junk, Token: testToken}); !errors.Is(err, remote.ErrBadNode) {
		if err == nil {
			s.Close()
		}
		t.Errorf("NewServer on a file that is not a memory node: %v, want ErrBadNode", err)
	}
	if after, _ := os.ReadFile(junk); !slices.Equal(content, after) {
		t.Error("a refused server modified a file that is not a memory node")
	}
	for _, reopen := range []struct {
		name string
		cfg  remote.ServerConfig
	}{
		{"same sizes", remote.ServerConfig{File: file, Bytes: advMain, OnChipBytes: advChip}},
		{"on-chip size 0", remote.ServerConfig{File: file, Bytes: advMain}},
		{"both sizes 0", remote.ServerConfig{File: file}},
	} {
		t.Run("reopen with "+reopen.name, func(t *testing.T) {
			ts2 := startServer(t, reopen.cfg)
			if m, c := ts2.srv.Bytes(); m != advMain || c != advChip {
				t.Errorf("server on the existing file: regions of %d and %d bytes, want the file's %d and %d", m, c, advMain, advChip)
			}
			p2 := tcpPool(t, ts2.addr)
			c2 := p2.NewComputeNode().NewClient()
			y, err := c2.Named(ctx, "kept", 64)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 8)
			if err := c2.Read(ctx, y, got); err != nil || y != x || string(got) != "kept!!!!" {
				t.Fatalf("after a restart on the file: %v at %v (was %v): %q", err, y, x, got)
			}
		})
	}
}

// fakeServer is a memory node that speaks the handshake and answers every
// two-sided request plausibly, but answers batches with misbehave.
func fakeServer(t *testing.T, misbehave func(c net.Conn, id uint64, payload []byte)) string {
	t.Helper()
	l := serveTest(t, func(nc net.Conn) {
		defer nc.Close()
		r := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
		if _, err := r.read(time.Minute); err != nil {
			return
		}
		r.send(rawFrame(rawVersion, rawWelcome, 0, 0, []byte{codeOK, 0, 0, 0, 0, 0, 0, 0, 0})) // status, the clock
		for {
			f, err := r.read(time.Minute)
			if err != nil {
				return
			}
			switch f.typ {
			case rawRPC:
				pool := uint64(1)
				if len(f.payload) >= 49 {
					if p := binary.LittleEndian.Uint64(f.payload[1+8*4:]); p != 0 {
						pool = p
					}
				}
				reply := []byte{codeOK}
				for _, v := range []uint64{8192, pool, advMain, advChip, 16384} {
					reply = binary.LittleEndian.AppendUint64(reply, v)
				}
				r.send(rawFrame(rawVersion, rawRPCOK, 0, f.id, append(reply, 0)))
			case rawBatch:
				if f.flags&rawSignaled != 0 {
					misbehave(nc, f.id, f.payload)
				}
			}
		}
	})
	return l.Addr().String()
}

// serveTest listens on 127.0.0.1 and runs handle on each connection, in a
// goroutine of its own, until the test ends; then it closes the listener
// and the connections still open and waits for the handlers to return.
func serveTest(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	conns.Go(func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			conns.Go(func() { handle(nc) })
		}
	})
	return l
}

// TestTCPHostileServer: a memory node that answers a batch wrongly (another
// id, a truncated or oversized result, a bad version or length, an unknown
// status code, the wrong frame type, or nothing at all) makes the client's
// verb fail within the transport's timeout, never panic, hang or return
// success with bytes the server did not send in a well-formed reply. A
// correct answer (the control case) succeeds.
func TestTCPHostileServer(t *testing.T) {
	const timeout = 500 * time.Millisecond
	reply := func(c net.Conn, b []byte) { c.Write(b) }
	okRead := func(id uint64, n int) []byte {
		return rawFrame(rawVersion, rawBatchOK, 0, id, append([]byte{codeOK}, make([]byte, n)...))
	}
	cases := []struct {
		name      string
		misbehave func(c net.Conn, id uint64, payload []byte)
		wantOK    bool
	}{
		{"control: a correct reply", func(c net.Conn, id uint64, _ []byte) { reply(c, okRead(id, 8)) }, true},
		{"no reply", func(net.Conn, uint64, []byte) {}, false},
		{"reply to another id", func(c net.Conn, id uint64, _ []byte) { reply(c, okRead(id+1000, 8)) }, false},
		{"truncated READ result", func(c net.Conn, id uint64, _ []byte) { reply(c, okRead(id, 4)) }, false},
		{"READ result too long", func(c net.Conn, id uint64, _ []byte) { reply(c, okRead(id, 4096)) }, false},
		{"bad version", func(c net.Conn, id uint64, _ []byte) {
			b := okRead(id, 8)
			b[4] = 9
			reply(c, b)
		}, false},
		{"length below the header", func(c net.Conn, id uint64, _ []byte) { reply(c, []byte{3, 0, 0, 0, 1, 4}) }, false},
		{"length above the maximum", func(c net.Conn, id uint64, _ []byte) {
			b := okRead(id, 8)
			binary.LittleEndian.PutUint32(b, rawMaxFrame+1)
			reply(c, b)
		}, false},
		{"unknown status code", func(c net.Conn, id uint64, _ []byte) {
			reply(c, rawFrame(rawVersion, rawBatchOK, 0, id, []byte{200, 2, 0, 'h', 'i'}))
		}, false},
		{"status message past the frame", func(c net.Conn, id uint64, _ []byte) {
			reply(c, rawFrame(rawVersion, rawBatchOK, 0, id, []byte{codeOutOfBounds, 0xFF, 0xFF, 'h'}))
		}, false},
		{"rpc reply to a batch", func(c net.Conn, id uint64, _ []byte) {
			reply(c, rawFrame(rawVersion, rawRPCOK, 0, id, append([]byte{codeOK}, make([]byte, 41)...)))
		}, false},
		{"empty payload", func(c net.Conn, id uint64, _ []byte) { reply(c, rawFrame(rawVersion, rawBatchOK, 0, id, nil)) }, false},
		{"half a frame, then silence", func(c net.Conn, id uint64, _ []byte) { reply(c, okRead(id, 8)[:10]) }, false},
		{"close", func(c net.Conn, _ uint64, _ []byte) { c.Close() }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeServer(t, tc.misbehave)
			p, err := remote.NewPool(remote.Config{TCP: &remote.TCPConfig{MemoryNodes: []string{addr}, Token: testToken,
				DialTimeout: timeout, Timeout: timeout}})
			if err != nil {
				t.Fatalf("NewPool on the fake server: %v", err)
			}
			defer p.Close()
			c := p.NewComputeNode().NewClient()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := range 2 {
				buf := make([]byte, 8)
				for j := range buf {
					buf[j] = 0xEE
				}
				start := time.Now()
				err := c.Read(ctx, remote.MakeAddr(0, 8192), buf)
				if d := time.Since(start); d > timeout+3*time.Second {
					t.Fatalf("READ %d took %v (Timeout %v)", i, d, timeout)
				}
				switch {
				case tc.wantOK && err != nil:
					t.Fatalf("READ %d: %v", i, err)
				case tc.wantOK && !slices.Equal(buf, make([]byte, 8)):
					t.Fatalf("READ %d: %x, want the zeros sent", i, buf)
				case !tc.wantOK && err == nil:
					t.Fatalf("READ %d succeeded with %x on a broken reply", i, buf)
				case !tc.wantOK && !errors.Is(err, remote.ErrUnavailable):
					t.Errorf("READ %d: %v, want ErrUnavailable", i, err)
				}
			}
		})
	}
}

// TestTCPStuckReader: a client that pipelines large READs and never reads
// the replies stalls only its own connection: another connection and a
// pool keep being served, and Server.Close still returns promptly.
func TestTCPStuckReader(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	bystander := authed(t, ts.addr)
	stuck := authed(t, ts.addr)
	frame := rawFrame(rawVersion, rawBatch, rawSignaled, 1, batchPayload(rdV(k.off(), 1<<16)))
	flood := make(chan struct{})
	go func() {
		defer close(flood)
		for range 4000 { // 256 MiB of replies nobody reads
			if stuck.send(frame) != nil {
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	for range 20 {
		bystander.mustDo(faaV(k.off()+8, 0))
		k.check(t, "a stuck reader")
	}
	closed := make(chan error, 1)
	go func() { closed <- ts.srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Server.Close blocked for 10 s by a client that does not read")
	}
	stuck.nc.Close()
	<-flood
}

// TestTCPClientPostOrder: through the public API, a client's unsignaled
// WRITE is seen by its next signaled READ on the same memory node, while
// other clients of the same compute node share its connections.
func TestTCPClientPostOrder(t *testing.T) {
	a := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	b := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, a.addr, b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cn := p.NewComputeNode()
	var wg sync.WaitGroup
	for w := range 8 {
		c := cn.NewClient()
		wg.Go(func() {
			x, err := c.AllocOn(ctx, w%2, 64, 8)
			if err != nil {
				t.Error(err)
				return
			}
			buf := make([]byte, 8)
			for i := range uint64(300) {
				if err := c.Post(ctx, []remote.Op{remote.Write(x, le64(i+1)), remote.FAA(x.Add(8), 1)}); err != nil {
					t.Error(err)
					return
				}
				ops := []remote.Op{remote.Read(x, buf), remote.FAA(x.Add(8), 0)}
				if err := c.Do(ctx, ops); err != nil {
					t.Error(err)
					return
				}
				if got := binary.LittleEndian.Uint64(buf); got != i+1 || ops[1].Old != i+1 {
					t.Errorf("client %d round %d: READ after its posted WRITE saw %d, FAA count %d, want %d", w, i, got, ops[1].Old, i+1)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestTCPConfigErrors: TCP configurations that cannot work are refused by
// NewPool with an error (ErrBadRequest for a malformed one, ErrUnavailable
// for an address that cannot be reached), quickly and without a pool.
func TestTCPConfigErrors(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	tcp := func(mod func(*remote.TCPConfig)) *remote.TCPConfig {
		c := &remote.TCPConfig{MemoryNodes: []string{ts.addr}, Token: testToken, DialTimeout: time.Second, Timeout: time.Second}
		mod(c)
		return c
	}
	bad := []error{remote.ErrBadRequest}
	cases := []struct {
		name string
		cfg  remote.Config
		want []error
	}{
		{"no memory nodes", remote.Config{TCP: tcp(func(c *remote.TCPConfig) { c.MemoryNodes = nil })}, bad},
		{"MemoryNodes disagreeing with the list", remote.Config{MemoryNodes: 3, TCP: tcp(func(*remote.TCPConfig) {})}, bad},
		{"token above 4096 bytes", remote.Config{TCP: tcp(func(c *remote.TCPConfig) { c.Token = string(make([]byte, 4097)) })}, []error{remote.ErrBadRequest, remote.ErrAuth}},
		{"TCP and Sim", remote.Config{Sim: &remote.SimConfig{}, TCP: tcp(func(*remote.TCPConfig) {})}, bad},
		{"negative Conns", remote.Config{TCP: tcp(func(c *remote.TCPConfig) { c.Conns = -1 })}, bad},
		{"not an address", remote.Config{TCP: tcp(func(c *remote.TCPConfig) { c.MemoryNodes = []string{"no port"} })}, []error{remote.ErrBadRequest, remote.ErrUnavailable}},
		{"one good, one unreachable", remote.Config{TCP: tcp(func(c *remote.TCPConfig) { c.MemoryNodes = append(c.MemoryNodes, "127.0.0.1:1") })}, []error{remote.ErrUnavailable}},
	}
	for _, tc := range cases {
		start := time.Now()
		expectRefused(t, tc.name, tc.cfg, tc.want)
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("%s: NewPool took %v", tc.name, d)
		}
	}
	// The server is unharmed by the attempts.
	if _, err := tcpPool(t, ts.addr).NewComputeNode().NewClient().Alloc(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
}

// TestTCPForgedUnsignaled posts invalid batches unsignaled (no reply
// asked): none of their verbs may execute, the valid ones before the
// invalid one included, and the connection either goes on answering the
// next signaled batch or is closed; it never answers that batch with
// another id or with success for the unsignaled one.
func TestTCPForgedUnsignaled(t *testing.T) {
	ts := startServer(t, remote.ServerConfig{Bytes: advMain, OnChipBytes: advChip})
	p := tcpPool(t, ts.addr)
	k := newCanary(t, p)
	a := k.off()
	junk := []byte("HOSTILE!")
	for _, tc := range []struct {
		name  string
		verbs []verb
	}{
		{"write then out of bounds", []verb{wrV(a, junk), rdV(advMain, 8)}},
		{"CAS then misaligned FAA", []verb{casV(a, k.word(0), 1), faaV(a+3, 1)}},
		{"FAA then memory-node bits", []verb{faaV(a+8, 1), wrV(1<<48|a, junk)}},
		{"write then nil", []verb{wrV(a+16, junk), wrV(0, junk)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := authed(t, ts.addr)
			r.mustSend(rawFrame(rawVersion, rawBatch, 0, 1000, batchPayload(tc.verbs...)))
			r.mustSend(rawFrame(rawVersion, rawBatch, rawSignaled, 1001, batchPayload(rdV(a, 8))))
			for {
				f, err := r.read(5 * time.Second)
				if err != nil {
					if isTimeout(err) {
						t.Fatal("no answer to the signaled batch after an invalid unsignaled one, and the connection stays open")
					}
					t.Logf("the server closed the connection: %v", err)
					break
				}
				code, msg, res, err := f.status()
				if err != nil {
					t.Fatal(err)
				}
				if f.id == 1000 {
					if code == codeOK {
						t.Fatal("the invalid unsignaled batch was answered with success")
					}
					t.Logf("the unsignaled batch was answered: status %d %q", code, msg)
					continue
				}
				if f.id != 1001 || code != codeOK || !slices.Equal(res, k.mainB[:8]) {
					t.Fatalf("answer %d, status %d %q, read %x", f.id, code, msg, res)
				}
				break
			}
			k.check(t, tc.name)
		})
	}
}

// expectRefused checks that NewPool(cfg) fails with one of want.
func expectRefused(t *testing.T, name string, cfg remote.Config, want []error) {
	t.Helper()
	p, err := remote.NewPool(cfg)
	if err == nil {
		p.Close()
		t.Errorf("%s: NewPool succeeded", name)
		return
	}
	if !slices.ContainsFunc(want, func(e error) bool { return errors.Is(err, e) }) {
		t.Errorf("%s: %v, want one of %v", name, err, want)
	}
}
