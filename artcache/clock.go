package artcache

// clock is the eviction policy: CLOCK (second chance) over a circular
// doubly linked ring of the cached entries. A hit sets the entry's
// reference bit; the hand evicts the first entry without it, clearing the
// bits it passes. New entries join just behind the hand, so they get a full
// revolution before they are considered. Unlike FIFO, an entry in use
// survives; unlike LRU, a hit is one atomic store under the read lock.
type clock struct {
	hand *Entry // next entry to consider; nil when the ring is empty
}

// add puts e into the ring just behind the hand.
func (k *clock) add(e *Entry) {
	if k.hand == nil {
		e.prev, e.next, k.hand = e, e, e
		return
	}
	e.prev, e.next = k.hand.prev, k.hand
	e.prev.next, k.hand.prev = e, e
}

// remove takes e out of the ring.
func (k *clock) remove(e *Entry) {
	switch {
	case e.next == e:
		k.hand = nil
	case k.hand == e:
		k.hand = e.next
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// victim advances the hand to the first entry whose reference bit is clear,
// clearing the bits on its way, and returns it. The ring must not be empty.
func (k *clock) victim() *Entry {
	for k.hand.referenced() {
		k.hand.setReferenced(false)
		k.hand = k.hand.next
	}
	return k.hand
}
