package remote

import "math/bits"

// evKind says what an event does when the scheduler reaches it.
type evKind uint8

const (
	// evPost: a batch reaches its client's NIC; the NIC model computes its
	// path and schedules the memory-node events of its verbs.
	evPost evKind = iota + 1
	// evLine: one line of a Strict-mode READ or WRITE lands in memory.
	evLine
	// evDone: a verb completes at its memory node (its effect, or its last
	// line, lands) and its response is sent.
	evDone
	// evWake: hand the token to the goroutine blocked on a client's channel.
	evWake
	// evStart: hand the token to a goroutine started by Pool.Go, for the
	// first time.
	evStart
)

// event is one entry of the simulator's agenda. Events are pointer-free
// values (they name verbs and goroutines by index), so the heap is a plain
// slice that moves them without write barriers and allocates nothing once
// it has grown.
type event struct {
	at   int64  // virtual time in picoseconds
	seq  uint64 // insertion order: breaks ties of at
	ref  int32  // evPost, evLine, evDone: verb record id; evWake, evStart: waiter slot
	line int32  // evLine, evDone: line index of a Strict verb, or -1
	kind evKind
	next int32 // in an agenda's wheel: the bucket's next event, plus one (0: none)
}

func (e *event) before(o *event) bool {
	return e.at < o.at || e.at == o.at && e.seq < o.seq
}

// eventHeap is a 4-ary min-heap of events ordered by (at, seq). Since seq is
// unique, the order is total and the pop sequence is deterministic. The
// agenda keeps its distant events in one.
type eventHeap []event

func (h *eventHeap) push(e event) {
	s := append(*h, event{})
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
	*h = s
}

// pop removes and returns the earliest event. The heap must not be empty.
func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	last := s[n]
	s = s[:n]
	*h = s
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+4, n); j++ {
			if s[j].before(&s[m]) {
				m = j
			}
		}
		if !s[m].before(&last) {
			break
		}
		s[i] = s[m]
		i = m
	}
	s[i] = last
	return top
}

// The agenda's timing wheel: wheelBuckets buckets of 2^wheelShift ps (2 ns)
// cover the next 8 µs of virtual time, where nearly every event of a
// simulation falls (a verb's round trip is about 2 µs).
const (
	wheelShift   = 11
	wheelBuckets = 1 << 12
	wheelSpan    = wheelBuckets << wheelShift
	bucketMask   = 1<<wheelShift - 1
)

// agenda is the simulator's queue of events, popped in (at, seq) order like
// an eventHeap, but in a time independent of its size: events earlier than
// start+wheelSpan sit in the bucket of their time in a timing wheel, each
// bucket a list sorted by (at, seq), and later ones in a heap. Buckets are
// found through a bitmap of the non-empty ones. The simulator never
// schedules an event before the latest one popped, so the wheel's start only
// advances; an earlier push (only tests make one) moves the wheel back, at a
// cost proportional to its events.
type agenda struct {
	start int64 // a multiple of the bucket span, at most the time of every event in the wheel
	n     int   // events in the wheel
	used  [wheelBuckets / 64]uint64
	head  [wheelBuckets]int32 // a bucket's first event: its index in recs, plus one (0: empty)
	recs  []event             // the wheel's events, and free records linked from free
	free  int32               // first free record, plus one (0: none)
	far   eventHeap           // events at or after start+wheelSpan
}

// len returns the number of events queued.
func (q *agenda) len() int { return q.n + len(q.far) }

func (q *agenda) push(e event) {
	if e.at >= q.start+wheelSpan {
		q.far.push(e)
		return
	}
	if e.at < q.start {
		q.rewind(e.at)
	}
	q.insert(e)
}

// insert puts e, which is inside the wheel's window, in its bucket.
func (q *agenda) insert(e event) {
	i := q.free
	if i != 0 {
		q.free = q.recs[i-1].next
	} else {
		q.recs = append(q.recs, event{})
		i = int32(len(q.recs))
	}
	b := int(e.at>>wheelShift) & (wheelBuckets - 1)
	link := &q.head[b]
	for *link != 0 && !e.before(&q.recs[*link-1]) {
		link = &q.recs[*link-1].next
	}
	e.next = *link
	q.recs[i-1] = e
	*link = i
	q.used[b/64] |= 1 << (b % 64)
	q.n++
}

// pop removes and returns the earliest event. The agenda must not be empty.
func (q *agenda) pop() event {
	if q.n == 0 {
		q.start = q.far[0].at &^ bucketMask
		q.refill()
	}
	b := q.first()
	i := q.head[b]
	e := q.recs[i-1]
	q.head[b] = e.next
	if e.next == 0 {
		q.used[b/64] &^= 1 << (b % 64)
	}
	q.recs[i-1].next = q.free
	q.free = i
	q.n--
	e.next = 0
	if s := e.at &^ bucketMask; s != q.start {
		q.start = s
		q.refill()
	}
	return e
}

// first returns the first non-empty bucket from the one of start on, around
// the wheel. The wheel must not be empty.
func (q *agenda) first() int {
	b := int(q.start>>wheelShift) & (wheelBuckets - 1)
	w := b / 64
	if x := q.used[w] >> (b % 64); x != 0 {
		return b + bits.TrailingZeros64(x)
	}
	for k := 1; ; k++ {
		w := (w + k) % len(q.used)
		if x := q.used[w]; x != 0 {
			return w*64 + bits.TrailingZeros64(x)
		}
	}
}

// refill moves the heap's events that the wheel's window now covers into
// the wheel.
func (q *agenda) refill() {
	for len(q.far) > 0 && q.far[0].at < q.start+wheelSpan {
		q.insert(q.far.pop())
	}
}

// rewind moves the wheel's window back to start at the bucket of at: every
// event goes to the heap, then those inside the new window come back.
func (q *agenda) rewind(at int64) {
	for q.n > 0 {
		b := q.first()
		for i := q.head[b]; i != 0; i = q.recs[i-1].next {
			e := q.recs[i-1]
			e.next = 0
			q.far.push(e)
			q.n--
		}
		q.head[b] = 0
		q.used[b/64] &^= 1 << (b % 64)
	}
	q.recs, q.free = q.recs[:0], 0
	q.start = at &^ bucketMask
	q.refill()
}
