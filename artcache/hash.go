package artcache

// hashSlotBytes is the memory the hash index spends per entry besides the
// key bytes: a Go map[string]*hashSlot's 24-byte slot (string header and
// pointer) and control byte at the table's maximum load of 7/8, rounded up
// to 32, and the 24-byte hashSlot with the entry's ring links.
const hashSlotBytes = 32 + 24

// hashIndex is the factor-analysis baseline: entries in a hash map keyed by
// their full prefix. Every prefix is stored in full, and a lookup probes the
// prefixes of the key from the longest to the shortest, skipping lengths no
// entry has. Its entries form a ring in insertion order (a new one joins
// just before the CLOCK hand, as in the classic CLOCK), which the hand
// sweeps.
type hashIndex struct {
	m     map[string]*hashSlot
	lens  []int32 // number of entries per prefix length; the last is non-zero
	bytes int64   // map slots, ring links and key bytes
}

// hashSlot is an entry of the hash index with its neighbours in the ring.
type hashSlot struct {
	e          *Entry
	prev, next *hashSlot
}

func newHashIndex() *hashIndex { return &hashIndex{m: make(map[string]*hashSlot)} }

func (h *hashIndex) size() int64 { return h.bytes }

func (h *hashIndex) lookup(key []byte) (*Entry, int, int, bool) {
	for i := min(len(h.lens), len(key)) - 1; i >= 0; i-- {
		if h.lens[i] == 0 {
			continue
		}
		if s := h.m[string(key[:i])]; s != nil {
			if j := s.e.slot(key[i]); j >= 0 {
				return s.e, j, i, true
			}
		}
	}
	return nil, 0, 0, false
}

func (h *hashIndex) deepest(key []byte) (*Entry, int) {
	for i := min(len(h.lens), len(key)) - 1; i >= 0; i-- {
		if h.lens[i] == 0 {
			continue
		}
		if s := h.m[string(key[:i])]; s != nil {
			return s.e, i
		}
	}
	return nil, 0
}

func (h *hashIndex) get(prefix []byte) *Entry {
	if s := h.m[string(prefix)]; s != nil {
		return s.e
	}
	return nil
}

// insert stores e under prefix and returns the entry it replaces (whose
// place in the ring e takes), or nil; a new entry joins the ring just
// before hand (nil: the ring is empty).
func (h *hashIndex) insert(prefix []byte, e *Entry, hand *Entry) *Entry {
	if s := h.m[string(prefix)]; s != nil {
		old := s.e
		e.leaf, old.leaf = old.leaf, node{}
		s.e = e
		return old
	}
	k := string(prefix)
	s := &hashSlot{e: e}
	if hand == nil {
		s.prev, s.next = s, s
	} else {
		at := h.m[hand.leaf.prefix]
		s.prev, s.next = at.prev, at
		at.prev.next, at.prev = s, s
	}
	h.m[k] = s
	e.leaf = node{kind: kindHashed, prefix: k}
	for len(h.lens) <= len(k) {
		h.lens = append(h.lens, 0)
	}
	h.lens[len(k)]++
	h.bytes += hashSlotBytes + int64(len(k))
	return nil
}

// next returns the entry after e in the ring.
func (h *hashIndex) next(e *Entry) *Entry { return h.m[e.leaf.prefix].next.e }

func (h *hashIndex) remove(e *Entry) {
	k := e.leaf.prefix
	s := h.m[k]
	s.prev.next, s.next.prev = s.next, s.prev
	delete(h.m, k)
	h.lens[len(k)]--
	for len(h.lens) > 0 && h.lens[len(h.lens)-1] == 0 {
		h.lens = h.lens[:len(h.lens)-1]
	}
	h.bytes -= hashSlotBytes + int64(len(k))
	e.leaf = node{}
}
