package artcache

// clock is the eviction policy: CLOCK (second chance) over the cached
// entries in the order their index keeps them (prefix order for the ART,
// insertion order for the hash index), wrapping around: the hand sweeps
// that order, evicts the first entry whose reference bit is clear and
// clears the bits it passes; a hit sets the entry's bit. Unlike FIFO, an
// entry in use survives; unlike LRU, a hit is one atomic store under the
// read lock; and entries carry no ring links of their own.
type clock struct {
	hand *Entry // next entry to consider; nil when the cache is empty
}

// victim advances the hand to the first entry other than skip whose
// reference bit is clear, clearing the bits on its way, and returns it.
// next is the index's order; the cache must hold an entry other than skip.
func (k *clock) victim(next func(*Entry) *Entry, skip *Entry) *Entry {
	for {
		switch h := k.hand; {
		case h == skip:
			k.hand = next(h)
		case h.referenced():
			h.setReferenced(false)
			k.hand = next(h)
		default:
			return h
		}
	}
}

// leave moves the hand off e, which is about to leave the index (next is
// the index's order, e still in it).
func (k *clock) leave(next func(*Entry) *Entry, e *Entry) {
	if k.hand != e {
		return
	}
	if k.hand = next(e); k.hand == e {
		k.hand = nil
	}
}
