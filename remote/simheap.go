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
	// evWake: hand the token to the goroutine blocked on ch.
	evWake
	// evStart: hand the token to a goroutine started by Pool.Go, for the
	// first time.
	evStart
)

// event is one entry of the simulator's agenda. Events are values: the heap
// is a slice of them, so scheduling allocates nothing once the slice has
// grown.
type event struct {
	at   int64         // virtual time in picoseconds
	seq  uint64        // insertion order: breaks ties of at
	v    *verbRec      // evPost (head of the batch), evLine, evDone
	ch   chan struct{} // evWake, evStart
	line int32         // evLine, evDone: line index of a Strict verb, or -1
	kind evKind
}

// eventHeap is a binary min-heap of events ordered by (at, seq). Since seq
// is unique, the order is total and the pop sequence is deterministic.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the earliest event. The heap must not be empty.
func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = event{} // drop references for the garbage collector
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
