package remote

import (
	"math"
	"math/bits"
	"time"
)

// The NIC model. Every time is an int64 count of picoseconds: at 45 Mops a
// verb slot is 22 222 ps, so rounding costs less than 0.01 %.
//
// A verb's path, computed when its batch is posted (evPost) unless noted:
//
//	client CPU    CPUPerVerb per verb of the batch, then the doorbell
//	CN NIC        IOPS slot (FIFO, 1/CNIOPS), request on the CN's tx link
//	wire          (RTT-DMATime)/2
//	MN NIC        request on the MN's rx link, IOPS slot (FIFO, 1/MNIOPS)
//	skew          SimConfig.Skew only: a pseudo-random delay (simskew.go)
//	ordering      start no earlier than the client's previous verb to this
//	              memory node (its start in InOrder, its end in Strict)
//	atomic unit   atomics: a slot of 1/AtomicRate (1/OnChipAtomicRate) on
//	              their address, FIFO per address
//	memory        the window [start, start+DMATime]: the effect lands at its
//	              end (InOrder) or line by line inside it (Strict)
//	response      at the window's end (evDone): MN tx link, wire, CN rx link
//
// Links are FIFO servers of Bandwidth bytes per second. A receiving link
// starts a message no earlier than its first bit arrives, so at low load a
// message costs its serialisation time once, not once per link. Arrivals at
// a memory node are served in posting order, which is arrival order unless a
// compute node's own NIC queues.

// simConst holds the profile converted to picoseconds.
type simConst struct {
	tMN, tCN          int64  // IOPS slots
	tAtomic, tOnChip  int64  // same-address atomic slots
	propOut, propBack int64  // one-way wire time of a verb (RTT-DMATime split)
	dma               int64  // memory access window at the memory node
	rpcOut, rpcBack   int64  // one-way wire time of an RPC (RTT split)
	rpcTime           int64  // memory node CPU per RPC
	cpuVerb           int64  // client CPU per posted verb
	header            int64  // wire bytes per message besides the payload
	bw                uint64 // link rate, bytes per second
	line              uint64 // Strict-mode line size in bytes
}

func newSimConst(p Profile) simConst {
	rate := func(r float64) int64 { return int64(math.Round(1e12 / r)) }
	wire := durPS(p.RTT - p.DMATime)
	rtt := durPS(p.RTT)
	return simConst{
		tMN:      rate(p.MNIOPS),
		tCN:      rate(p.CNIOPS),
		tAtomic:  rate(p.AtomicRate),
		tOnChip:  rate(p.OnChipAtomicRate),
		propOut:  wire / 2,
		propBack: wire - wire/2,
		dma:      durPS(p.DMATime),
		rpcOut:   rtt / 2,
		rpcBack:  rtt - rtt/2,
		rpcTime:  durPS(p.RPCTime),
		cpuVerb:  durPS(p.CPUPerVerb),
		header:   int64(p.HeaderBytes),
		bw:       uint64(math.Round(p.Bandwidth)),
		line:     uint64(p.LineBytes),
	}
}

// ser returns the time to put b bytes on a link, rounded to the nearest
// picosecond. Integer arithmetic keeps it identical on every platform.
func (k *simConst) ser(b int64) int64 {
	if b < 1<<23 { // b*1e12 fits in an int64
		return (b*1e12 + int64(k.bw/2)) / int64(k.bw)
	}
	hi, lo := bits.Mul64(uint64(b), 1e12)
	lo, c := bits.Add64(lo, k.bw/2, 0)
	q, _ := bits.Div64(hi+c, lo, k.bw)
	return int64(q)
}

// durPS converts a duration to picoseconds.
func durPS(d time.Duration) int64 { return int64(d) * 1000 }

// psDur converts picoseconds to a duration, truncating.
func psDur(ps int64) time.Duration { return time.Duration(ps / 1000) }

// nic is the state of one simulated NIC: when each of its servers is free
// next, and what it carried.
type nic struct {
	iopsFree, txFree, rxFree int64
	verbs, txBytes, rxBytes  uint64
}

// mnNIC is a memory node's NIC plus its CPU, which serves RPCs.
type mnNIC struct {
	nic
	cpuFree int64
}

// verbSpan is when a client's latest verb to a memory node starts and ends
// there; the client's next verb to that node is ordered after it.
type verbSpan struct{ start, end int64 }

// verbRec is one verb in flight. Records are recycled through sim.free.
type verbRec struct {
	id       int32    // index in sim.recs
	next     *verbRec // the next verb of the batch (evPost)
	sc       *simClient
	op       *Op    // the caller's Op (signaled) or &own (unsignaled)
	own      Op     // unsignaled: a copy of the verb, results discarded
	data     []byte // unsignaled WRITE: the payload copied at post time
	size     int64  // payload bytes
	respB    int64  // response bytes on the wire
	signaled bool
}

// newVerb returns a record for o. An unsignaled verb is copied (WRITE data
// included) so that the caller may reuse o and its buffer at once.
func (s *sim) newVerb(sc *simClient, o *Op, signaled bool) *verbRec {
	var v *verbRec
	if n := len(s.free); n > 0 {
		v = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		v = &verbRec{id: int32(len(s.recs))}
		s.recs = append(s.recs, v)
	}
	v.sc, v.signaled, v.size = sc, signaled, int64(o.size())
	if signaled {
		v.op = o
		return v
	}
	v.own = *o
	v.own.Buf = nil
	if o.Kind == OpWrite {
		v.data = append(v.data[:0], o.Buf...)
		v.own.Buf = v.data
	}
	v.op = &v.own
	return v
}

func (s *sim) freeVerb(v *verbRec) {
	v.next, v.sc, v.op = nil, nil, nil
	v.own = Op{}
	s.free = append(s.free, v)
}

// post runs when a batch leaves its client (evPost): it computes each verb's
// path through the CN NIC, the wire and the MN NIC up to the memory access,
// and schedules the access.
func (s *sim) post(head *verbRec) {
	k := &s.k
	sc := head.sc
	cn := &s.cns[sc.cn]
	for v := head; v != nil; {
		next := v.next
		v.next = nil
		op := v.op
		mnID := op.Addr.MN()
		mn := &s.mns[mnID]
		reqB, respB := k.header, k.header
		switch op.Kind {
		case OpRead:
			respB += v.size
		case OpWrite:
			reqB += v.size
		case OpCAS:
			reqB += 16 // compare and swap operands
			respB += 8
		case OpFAA:
			reqB += 8
			respB += 8
		}
		v.respB = respB
		d := k.ser(reqB)

		q := max(s.clock, cn.iopsFree)
		cn.iopsFree = q + k.tCN
		tx := max(q+k.tCN, cn.txFree)
		cn.txFree = tx + d
		cn.verbs++
		cn.txBytes += uint64(reqB)

		rx := max(tx+k.propOut, mn.rxFree)
		mn.rxFree = rx + d
		q = max(rx+d, mn.iopsFree)
		mn.iopsFree = q + k.tMN
		mn.verbs++
		mn.rxBytes += uint64(reqB)

		start := q + k.tMN + s.skewDelay()
		last := &sc.last[mnID]
		if s.strict {
			start = max(start, last.end)
		} else {
			start = max(start, last.start)
		}
		if op.Kind == OpCAS || op.Kind == OpFAA {
			slot := k.tAtomic
			if op.Addr.IsOnChip() {
				slot = k.tOnChip
			}
			start = max(start, s.atomicFree[op.Addr])
			s.setAtomicFree(op.Addr, start+slot)
		}
		end := start + k.dma
		*last = verbSpan{start, end}
		s.schedule(v, start, end)
		v = next
	}
}

// setAtomicFree records when the atomic unit is next free for address a. The
// map is swept of entries in the past, which can no longer delay anything
// (every verb starts after the current time), so the sweep's iteration
// order cannot influence the simulation.
func (s *sim) setAtomicFree(a Addr, t int64) {
	s.atomicFree[a] = t
	if len(s.atomicFree) <= s.sweepAt {
		return
	}
	for a, f := range s.atomicFree {
		if f <= s.clock {
			delete(s.atomicFree, a)
		}
	}
	s.sweepAt = 2*len(s.atomicFree) + 1024
}

// schedule pushes the memory events of verb v, whose access window is
// [start, end]. In Strict mode a READ or WRITE spanning several lines lands
// line by line at evenly spaced instants of the window, the lines in a
// seeded random order; otherwise the whole verb lands at end.
func (s *sim) schedule(v *verbRec, start, end int64) {
	op := v.op
	n := 1
	if s.strict && v.size > 0 && (op.Kind == OpWrite || op.Kind == OpRead && v.signaled) {
		off := op.Addr.Offset()
		n = int((off+uint64(v.size)-1)/s.k.line - off/s.k.line + 1)
	}
	if n == 1 {
		s.push(event{at: end, kind: evDone, ref: v.id, line: -1})
		return
	}
	perm := s.perm[:0]
	for i := range n {
		perm = append(perm, int32(i))
	}
	for i := n - 1; i > 0; i-- {
		j := s.rng.IntN(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	s.perm = perm
	w := end - start
	for i := range n - 1 {
		s.push(event{at: start + w*int64(i+1)/int64(n), kind: evLine, ref: v.id, line: perm[i]})
	}
	s.push(event{at: end, kind: evDone, ref: v.id, line: perm[n-1]})
}

// applyLine applies line i of a Strict-mode READ or WRITE: the part of the
// verb inside the i-th LineBytes-aligned line it touches.
func (s *sim) applyLine(v *verbRec, i int32) {
	op := v.op
	off := op.Addr.Offset()
	lo := max((off/s.k.line+uint64(i))*s.k.line, off)
	hi := min((off/s.k.line+uint64(i)+1)*s.k.line, off+uint64(v.size))
	part := Op{Kind: op.Kind, Addr: op.Addr.Add(lo - off), Buf: op.Buf[lo-off : hi-off]}
	s.p.mns[op.Addr.MN()].applyOwned(&part)
}

// done completes verb v at its memory node (evDone): its effect (or last
// line) lands, the response crosses the MN tx link, the wire and the CN rx
// link, and when the last verb of a signaled batch has its response the
// client is woken at that instant.
func (s *sim) done(v *verbRec, line int32) {
	k := &s.k
	switch {
	case line >= 0:
		s.applyLine(v, line)
	case v.op.Kind != OpRead || v.signaled:
		s.p.mns[v.op.Addr.MN()].applyOwned(v.op)
	}
	mn := &s.mns[v.op.Addr.MN()]
	sc := v.sc
	cn := &s.cns[sc.cn]
	d := k.ser(v.respB)
	tx := max(s.clock, mn.txFree)
	mn.txFree = tx + d
	mn.txBytes += uint64(v.respB)
	rx := max(tx+k.propBack, cn.rxFree)
	cn.rxFree = rx + d
	cn.rxBytes += uint64(v.respB)
	if v.signaled {
		sc.arrive = max(sc.arrive, rx+d)
		if sc.pending--; sc.pending == 0 {
			s.push(event{at: sc.arrive, kind: evWake, ref: sc.slot})
		}
	}
	s.freeVerb(v)
}
