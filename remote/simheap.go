package remote

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
}

func (e *event) before(o *event) bool {
	return e.at < o.at || e.at == o.at && e.seq < o.seq
}

// eventHeap is a 4-ary min-heap of events ordered by (at, seq). Since seq is
// unique, the order is total and the pop sequence is deterministic.
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
