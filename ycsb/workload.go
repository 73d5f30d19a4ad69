package ycsb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// OpKind is a YCSB operation.
type OpKind uint8

// The operations, in YCSB's order.
const (
	OpRead            OpKind = iota // READ <key>: Index.Get
	OpUpdate                        // UPDATE <key>: Index.Put of an existing key
	OpInsert                        // INSERT <key>: Index.Put of a new key
	OpScan                          // SCAN <key> <len>: Index.Scan from key, len pairs
	OpReadModifyWrite               // READ-MODIFY-WRITE <key>: Get then Put
	numOpKinds
)

// String returns YCSB's name of the operation ("READ", "UPDATE", "INSERT",
// "SCAN", "READ-MODIFY-WRITE").
func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "READ"
	case OpUpdate:
		return "UPDATE"
	case OpInsert:
		return "INSERT"
	case OpScan:
		return "SCAN"
	case OpReadModifyWrite:
		return "READ-MODIFY-WRITE"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation of a workload or a trace.
type Op struct {
	Kind OpKind
	// Key is the operation's key (the first key of a scan). A Stream reuses
	// its buffer: the slice is valid until the Stream's next call.
	Key []byte
	// ScanLength is the number of pairs a SCAN asks for: at least 1 (Run
	// refuses a trace SCAN of less).
	ScanLength int
	// seq is 1 + the key number of an insert made by a Generator, so that
	// Generator.Ack can acknowledge it; 0 otherwise.
	seq uint64
}

// Distribution is a request distribution: how a workload picks the key of a
// read, update, scan or read-modify-write.
type Distribution uint8

// The request distributions of YCSB's CoreWorkload.
const (
	// DistZipfian is YCSB's "zipfian": a scrambled Zipfian over the key
	// space, sized for the records plus twice the expected inserts.
	DistZipfian Distribution = iota
	// DistUniform picks any loaded record with equal probability.
	DistUniform
	// DistLatest is YCSB's "latest": a Zipfian over the insert order, most
	// recent first.
	DistLatest
	// DistHotspot is YCSB's "hotspot": HotOpnFraction of the requests go to
	// the first HotsetFraction of the loaded records.
	DistHotspot
)

// String returns YCSB's name of the distribution.
func (d Distribution) String() string {
	switch d {
	case DistZipfian:
		return "zipfian"
	case DistUniform:
		return "uniform"
	case DistLatest:
		return "latest"
	case DistHotspot:
		return "hotspot"
	}
	return fmt.Sprintf("Distribution(%d)", uint8(d))
}

// Workload is a CoreWorkload specification: the operation mix and how keys
// are chosen. Proportions need not sum to one (they are weights, as in
// YCSB's DiscreteGenerator). The zero values of the tuning fields select
// YCSB's defaults.
type Workload struct {
	// Name identifies the workload in reports ("a", "la", "50-", …).
	Name string
	// Operation weights, YCSB's readproportion … readmodifywriteproportion.
	Read, Update, Insert, Scan, ReadModifyWrite float64
	// Distribution is YCSB's requestdistribution.
	Distribution Distribution
	// ZipfTheta is the Zipfian constant (default DefaultZipfTheta). It
	// applies to DistZipfian and DistLatest.
	ZipfTheta float64
	// MinScanLength and MaxScanLength bound the uniformly drawn scan length
	// (defaults 1 and 100, the paper's YCSB E).
	MinScanLength, MaxScanLength int
	// HotsetFraction and HotOpnFraction tune DistHotspot (defaults 0.2 and
	// 0.8).
	HotsetFraction, HotOpnFraction float64
	// LoadOnly marks YCSB's load phase as the workload: nothing is loaded
	// first and the measured operations are the inserts of all records.
	LoadOnly bool
}

// Preset returns a named workload:
//
//	load  the load phase itself: insert every record (hashed order)
//	a     50% read, 50% update, zipfian
//	b     95% read, 5% update, zipfian
//	c     100% read, zipfian
//	d     95% read, 5% insert, latest
//	e     95% scan (length uniform in 1..100), 5% insert, zipfian
//	f     50% read, 50% read-modify-write, zipfian
//	la    SMART's "load all": 100% insert after the load phase
//	N-    SMART's mixes: N% insert (0 ≤ N ≤ 100), the rest reads, latest
//
// Names are case-insensitive.
func Preset(name string) (Workload, error) {
	n := strings.ToLower(name)
	w := Workload{Name: n, Distribution: DistZipfian}
	switch n {
	case "load":
		w.Insert, w.LoadOnly = 1, true
	case "a":
		w.Read, w.Update = 0.5, 0.5
	case "b":
		w.Read, w.Update = 0.95, 0.05
	case "c":
		w.Read = 1
	case "d":
		w.Read, w.Insert, w.Distribution = 0.95, 0.05, DistLatest
	case "e":
		w.Scan, w.Insert = 0.95, 0.05
	case "f":
		w.Read, w.ReadModifyWrite = 0.5, 0.5
	case "la":
		w.Insert = 1
	default:
		pct, ok := strings.CutSuffix(n, "-")
		p, err := strconv.Atoi(pct)
		if !ok || err != nil || p < 0 || p > 100 {
			return Workload{}, fmt.Errorf("ycsb: unknown workload %q (want load, a–f, la or N- with 0 ≤ N ≤ 100)", name)
		}
		w.Insert, w.Read, w.Distribution = float64(p)/100, float64(100-p)/100, DistLatest
	}
	return w, nil
}

// KeysPerOp is how many keys an operation of w visits on average: one, or a
// scan's mean length for the share of scans (1 for an invalid workload,
// which Run refuses anyway). Warm-ups are sized by it (Config.WarmupOps).
func (w Workload) KeysPerOp() float64 {
	n, err := w.normalized()
	if err != nil {
		return 1
	}
	p := n.Scan / (n.Read + n.Update + n.Insert + n.Scan + n.ReadModifyWrite)
	return 1 - p + p*float64(n.MinScanLength+n.MaxScanLength)/2
}

// normalized fills the defaults and checks the weights.
func (w Workload) normalized() (Workload, error) {
	if w.ZipfTheta == 0 {
		w.ZipfTheta = DefaultZipfTheta
	}
	if w.MinScanLength == 0 {
		w.MinScanLength = 1
	}
	if w.MaxScanLength == 0 {
		w.MaxScanLength = 100
	}
	if w.HotsetFraction == 0 {
		w.HotsetFraction = 0.2
	}
	if w.HotOpnFraction == 0 {
		w.HotOpnFraction = 0.8
	}
	sum := w.Read + w.Update + w.Insert + w.Scan + w.ReadModifyWrite
	switch {
	case !finite(w.Read, w.Update, w.Insert, w.Scan, w.ReadModifyWrite):
		return w, fmt.Errorf("ycsb: workload %q: proportions must be finite (read %v, update %v, insert %v, scan %v, read-modify-write %v)",
			w.Name, w.Read, w.Update, w.Insert, w.Scan, w.ReadModifyWrite)
	case !finite(w.ZipfTheta, w.HotsetFraction, w.HotOpnFraction):
		return w, fmt.Errorf("ycsb: workload %q: Zipfian constant %v and hotspot fractions %v, %v must be finite",
			w.Name, w.ZipfTheta, w.HotsetFraction, w.HotOpnFraction)
	case w.Read < 0 || w.Update < 0 || w.Insert < 0 || w.Scan < 0 || w.ReadModifyWrite < 0 || sum <= 0:
		return w, fmt.Errorf("ycsb: workload %q: proportions must be non-negative with a positive sum", w.Name)
	case w.ZipfTheta <= 0 || w.ZipfTheta == 1:
		return w, fmt.Errorf("ycsb: workload %q: Zipfian constant %v must be positive and not 1", w.Name, w.ZipfTheta)
	case w.MinScanLength < 1 || w.MaxScanLength < w.MinScanLength:
		return w, fmt.Errorf("ycsb: workload %q: scan lengths %d..%d", w.Name, w.MinScanLength, w.MaxScanLength)
	case w.HotsetFraction < 0 || w.HotsetFraction > 1 || w.HotOpnFraction < 0 || w.HotOpnFraction > 1:
		return w, fmt.Errorf("ycsb: workload %q: hotspot fractions must be in [0, 1]", w.Name)
	case w.Distribution > DistHotspot:
		return w, fmt.Errorf("ycsb: workload %q: unknown distribution %v", w.Name, w.Distribution)
	}
	return w, nil
}

// finite reports whether every one of vs is neither NaN nor infinite.
func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Generator produces the operations of one run of a workload: the load of
// Records records and the operation streams of the clients, with
// CoreWorkload semantics. Record n is named by key number FNVHash64(n)
// (insertorder=hashed); inserts during the run continue the record
// numbering from Records through a counter shared by all streams, and keys
// are drawn only among acknowledged records (Ack), as YCSB's
// AcknowledgedCounterGenerator does. A Generator is safe for concurrent
// use; each Stream belongs to one goroutine.
type Generator struct {
	w       Workload
	keys    KeyType
	records uint64
	ops     uint64

	zipf   *ScrambledZipfian // DistZipfian; read-only after construction
	latest *Zipfian          // DistLatest template, cloned per stream

	mu      sync.Mutex
	nextSeq uint64              // next insert key number to hand out
	acked   uint64              // every key number below acked is acknowledged
	pending map[uint64]struct{} // acknowledged key numbers ≥ acked
}

// NewGenerator prepares a run of w over records records followed by ops
// operations (ops sizes the Zipfian key space, as YCSB's operationcount
// does). A workload that reads, updates or scans needs records ≥ 1.
func NewGenerator(w Workload, keys KeyType, records, ops uint64) (*Generator, error) {
	w, err := w.normalized()
	if err != nil {
		return nil, err
	}
	if err := checkGenerator(w, keys, records); err != nil {
		return nil, err
	}
	g := &Generator{w: w, keys: keys, records: records, ops: ops,
		nextSeq: records, acked: records, pending: make(map[uint64]struct{})}
	sum := w.Read + w.Update + w.Insert + w.Scan + w.ReadModifyWrite
	switch w.Distribution {
	case DistZipfian:
		// YCSB: keyspace = insertstart + insertcount + expectednewkeys,
		// expectednewkeys = (int)(opcount * insertproportion * 2.0).
		expected := uint64(float64(ops) * (w.Insert / sum) * 2)
		g.zipf = NewScrambledZipfian(0, records+expected, w.ZipfTheta)
	case DistLatest:
		// YCSB: new ZipfianGenerator(basis.lastValue()) = items 0..last-1.
		g.latest = NewZipfian(0, max(records-1, 1)-1, w.ZipfTheta)
	}
	return g, nil
}

// checkGenerator checks what NewGenerator needs besides a valid workload
// (w, normalized): a known key type, and records if w reads, updates or
// scans them.
func checkGenerator(w Workload, keys KeyType, records uint64) error {
	switch {
	case keys > KeyEmail:
		return fmt.Errorf("ycsb: unknown key type %v", keys)
	case records == 0 && !w.LoadOnly && w.Read+w.Update+w.Scan+w.ReadModifyWrite > 0:
		return fmt.Errorf("ycsb: workload %q reads existing records but records is 0", w.Name)
	}
	return nil
}

// Records returns the number of records of the load phase.
func (g *Generator) Records() uint64 { return g.records }

// LoadOp returns the insert of record n (0 ≤ n < Records), appending its
// key to dst[:0].
func (g *Generator) LoadOp(dst []byte, n uint64) Op {
	return Op{Kind: OpInsert, Key: g.keys.AppendKey(dst[:0], FNVHash64(n))}
}

// Ack acknowledges a completed (or failed) insert made by a Stream of g;
// other operations are ignored. Until acknowledged, a new record is never
// chosen for reads, updates or scans, and DistLatest counts from the
// highest record below which every insert was acknowledged.
func (g *Generator) Ack(op Op) {
	if op.seq == 0 {
		return
	}
	n := op.seq - 1
	g.mu.Lock()
	defer g.mu.Unlock()
	if n != g.acked {
		g.pending[n] = struct{}{}
		return
	}
	g.acked++
	for {
		if _, ok := g.pending[g.acked]; !ok {
			break
		}
		delete(g.pending, g.acked)
		g.acked++
	}
}

// lastAcked returns YCSB's lastValue(): the highest key number below which
// every record is loaded or acknowledged.
func (g *Generator) lastAcked() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acked - 1
}

func (g *Generator) nextInsert() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.nextSeq
	g.nextSeq++
	return n
}

// Stream returns an operation stream seeded by seed. Streams with equal
// seeds of equal generators yield equal operations as long as the inserts
// are acknowledged in the same order.
func (g *Generator) Stream(seed uint64) *Stream {
	s := &Stream{g: g, r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	switch g.w.Distribution {
	case DistUniform:
		s.uniformN = g.records
	case DistLatest:
		s.latest = g.latest.clone()
	case DistHotspot:
		s.hotspot = NewHotspot(0, g.records-1, g.w.HotsetFraction, g.w.HotOpnFraction)
	}
	w := g.w
	sum := w.Read + w.Update + w.Insert + w.Scan + w.ReadModifyWrite
	s.cum = [numOpKinds]float64{w.Read / sum, w.Update / sum, w.Insert / sum, w.Scan / sum, w.ReadModifyWrite / sum}
	return s
}

// Stream is one client's sequence of operations. It is not safe for
// concurrent use.
type Stream struct {
	g        *Generator
	r        *rand.Rand
	cum      [numOpKinds]float64 // normalised weights in YCSB's order
	uniformN uint64
	latest   *Zipfian
	hotspot  *Hotspot
	buf      []byte
}

// Next returns the next operation. Its Key is valid until the next call.
func (s *Stream) Next() Op {
	kind := s.nextKind()
	if kind == OpInsert {
		n := s.g.nextInsert()
		s.buf = s.g.keys.AppendKey(s.buf[:0], FNVHash64(n))
		return Op{Kind: OpInsert, Key: s.buf, seq: n + 1}
	}
	s.buf = s.g.keys.AppendKey(s.buf[:0], FNVHash64(s.nextKeynum()))
	op := Op{Kind: kind, Key: s.buf}
	if kind == OpScan {
		w := &s.g.w
		op.ScanLength = w.MinScanLength + s.r.IntN(w.MaxScanLength-w.MinScanLength+1)
	}
	return op
}

// nextKind is YCSB's DiscreteGenerator over the operation weights.
func (s *Stream) nextKind() OpKind {
	u := s.r.Float64()
	last := OpRead
	for k, p := range s.cum {
		if p == 0 {
			continue
		}
		if u < p {
			return OpKind(k)
		}
		u -= p
		last = OpKind(k)
	}
	return last // rounding left u just above the total
}

// nextKeynum is CoreWorkload.nextKeynum: draw until the key number is an
// acknowledged record.
func (s *Stream) nextKeynum() uint64 {
	last := s.g.lastAcked()
	for {
		var n uint64
		switch s.g.w.Distribution {
		case DistZipfian:
			n = s.g.zipf.Next(s.r)
		case DistUniform:
			n = s.r.Uint64N(s.uniformN)
		case DistLatest:
			// SkewedLatestGenerator: last − zipfian.nextLong(last).
			n = last - min(s.latest.NextN(s.r, last), last)
		case DistHotspot:
			n = s.hotspot.Next(s.r)
		}
		if n <= last {
			return n
		}
	}
}
