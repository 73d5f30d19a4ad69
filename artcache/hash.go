package artcache

// hashSlotBytes is the memory a Go map[string]*Entry spends per entry
// besides the key bytes: a 24-byte slot (string header and pointer) and a
// control byte, at the table's maximum load of 7/8, rounded up.
const hashSlotBytes = 32

// hashIndex is the factor-analysis baseline: entries in a hash map keyed by
// their full prefix. Every prefix is stored in full, and a lookup probes the
// prefixes of the key from the longest to the shortest, skipping lengths no
// entry has.
type hashIndex struct {
	m     map[string]*Entry
	lens  []int32 // number of entries per prefix length; the last is non-zero
	bytes int64   // map slots plus key bytes
}

func newHashIndex() *hashIndex { return &hashIndex{m: make(map[string]*Entry)} }

func (h *hashIndex) size() int64 { return h.bytes }

func (h *hashIndex) lookup(key []byte) (*Entry, int, int, bool) {
	for i := min(len(h.lens), len(key)) - 1; i >= 0; i-- {
		if h.lens[i] == 0 {
			continue
		}
		if e := h.m[string(key[:i])]; e != nil {
			if j := e.slot(key[i]); j >= 0 {
				return e, j, i, true
			}
		}
	}
	return nil, 0, 0, false
}

func (h *hashIndex) get(prefix []byte) *Entry { return h.m[string(prefix)] }

func (h *hashIndex) insert(prefix []byte, e *Entry) *Entry {
	if old := h.m[string(prefix)]; old != nil {
		e.leaf, old.leaf = old.leaf, node{}
		h.m[e.leaf.prefix] = e
		return old
	}
	k := string(prefix)
	h.m[k] = e
	e.leaf = node{kind: kindHashed, prefix: k}
	for len(h.lens) <= len(k) {
		h.lens = append(h.lens, 0)
	}
	h.lens[len(k)]++
	h.bytes += hashSlotBytes + int64(len(k))
	return nil
}

func (h *hashIndex) remove(e *Entry) {
	k := e.leaf.prefix
	delete(h.m, k)
	h.lens[len(k)]--
	for len(h.lens) > 0 && h.lens[len(h.lens)-1] == 0 {
		h.lens = h.lens[:len(h.lens)-1]
	}
	h.bytes -= hashSlotBytes + int64(len(k))
	e.leaf = node{}
}
