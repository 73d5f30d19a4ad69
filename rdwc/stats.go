package rdwc

import "sync/atomic"

// Stats counts a Table's operations. An operation is counted once in Reads or
// Writes; Delegated, Combined and Collisions say how it ended, Queued and
// Retried what it went through.
type Stats struct {
	Reads  uint64 // Read calls
	Writes uint64 // Write calls
	// Delegated counts reads that returned another client's result without
	// remote I/O of their own.
	Delegated uint64
	// Combined counts writes published (or failed) by another client's
	// remote write.
	Combined uint64
	// Collisions counts operations that found their slot busy with another
	// key and ran on their own.
	Collisions uint64
	// Queued counts operations that waited for a window to end before
	// competing for the next one: the open window was of the other kind or
	// already sealed.
	Queued uint64
	// Retried counts operations admitted to a window that ended without
	// sharing (the callback did not seal it, or a read delegate failed on its
	// own context); they competed again.
	Retried uint64
}

// Shared returns the operations that did no remote I/O of their own.
func (s Stats) Shared() uint64 { return s.Delegated + s.Combined }

func (s Stats) add(o Stats) Stats {
	return Stats{
		Reads: s.Reads + o.Reads, Writes: s.Writes + o.Writes,
		Delegated: s.Delegated + o.Delegated, Combined: s.Combined + o.Combined,
		Collisions: s.Collisions + o.Collisions, Queued: s.Queued + o.Queued, Retried: s.Retried + o.Retried,
	}
}

// counters are a client's statistics: only the client adds, anyone reads.
type counters struct {
	reads, writes, delegated, combined, collisions, queued, retried atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Reads: c.reads.Load(), Writes: c.writes.Load(),
		Delegated: c.delegated.Load(), Combined: c.combined.Load(),
		Collisions: c.collisions.Load(), Queued: c.queued.Load(), Retried: c.retried.Load(),
	}
}
