package remote

import (
	"fmt"
	"sync/atomic"
)

// Stats counts a client's (or a compute node's, or a pool's) remote I/O.
// Unsignaled verbs are counted like signaled ones but add no round trip.
type Stats struct {
	Reads, Writes, CASes, FAAs uint64 // verbs by kind
	ReadBytes                  uint64 // payload bytes returned by READs
	WriteBytes                 uint64 // payload bytes carried by WRITEs
	RoundTrips                 uint64 // signaled batches (one per Do)
	Unsignaled                 uint64 // verbs posted without completion
	RPCs                       uint64 // two-sided calls (chunk allocation, named regions)
	CASFailures                uint64 // CASes that did not swap
	// AllocBytes counts the bytes Alloc and AllocOn handed out (reused ones
	// included) and FreedBytes those handed back with Free: their
	// difference over a pool is the memory-node memory its structures use,
	// without the unused tails of the clients' chunks that
	// Pool.MemoryUsed counts.
	AllocBytes, FreedBytes uint64
}

// Verbs returns the number of one-sided verbs.
func (s Stats) Verbs() uint64 { return s.Reads + s.Writes + s.CASes + s.FAAs }

// String formats s on one line, verbs by kind with their payload bytes
// and CAS failures, then round trips, unsignaled verbs and RPCs, then the
// bytes allocated and freed:
//
//	reads=5 (4096 B) writes=3 (96 B) cas=2 (1 failed) faa=1 round_trips=7 unsignaled=1 rpcs=1 alloc=640 B freed=64 B
func (s Stats) String() string {
	return fmt.Sprintf("reads=%d (%d B) writes=%d (%d B) cas=%d (%d failed) faa=%d round_trips=%d unsignaled=%d rpcs=%d alloc=%d B freed=%d B",
		s.Reads, s.ReadBytes, s.Writes, s.WriteBytes, s.CASes, s.CASFailures, s.FAAs, s.RoundTrips, s.Unsignaled, s.RPCs,
		s.AllocBytes, s.FreedBytes)
}

// Add returns s + o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Reads: s.Reads + o.Reads, Writes: s.Writes + o.Writes, CASes: s.CASes + o.CASes, FAAs: s.FAAs + o.FAAs,
		ReadBytes: s.ReadBytes + o.ReadBytes, WriteBytes: s.WriteBytes + o.WriteBytes,
		RoundTrips: s.RoundTrips + o.RoundTrips, Unsignaled: s.Unsignaled + o.Unsignaled,
		RPCs: s.RPCs + o.RPCs, CASFailures: s.CASFailures + o.CASFailures,
		AllocBytes: s.AllocBytes + o.AllocBytes, FreedBytes: s.FreedBytes + o.FreedBytes,
	}
}

// Sub returns s - o, the I/O between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Reads: s.Reads - o.Reads, Writes: s.Writes - o.Writes, CASes: s.CASes - o.CASes, FAAs: s.FAAs - o.FAAs,
		ReadBytes: s.ReadBytes - o.ReadBytes, WriteBytes: s.WriteBytes - o.WriteBytes,
		RoundTrips: s.RoundTrips - o.RoundTrips, Unsignaled: s.Unsignaled - o.Unsignaled,
		RPCs: s.RPCs - o.RPCs, CASFailures: s.CASFailures - o.CASFailures,
		AllocBytes: s.AllocBytes - o.AllocBytes, FreedBytes: s.FreedBytes - o.FreedBytes,
	}
}

// counters are a client's live statistics. Only the owning client adds;
// anyone may snapshot, so every field is atomic.
type counters struct {
	reads, writes, cases, faas atomic.Uint64
	readBytes, writeBytes      atomic.Uint64
	roundTrips, unsignaled     atomic.Uint64
	rpcs, casFailures          atomic.Uint64
	allocBytes, freedBytes     atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Reads: c.reads.Load(), Writes: c.writes.Load(), CASes: c.cases.Load(), FAAs: c.faas.Load(),
		ReadBytes: c.readBytes.Load(), WriteBytes: c.writeBytes.Load(),
		RoundTrips: c.roundTrips.Load(), Unsignaled: c.unsignaled.Load(),
		RPCs: c.rpcs.Load(), CASFailures: c.casFailures.Load(),
		AllocBytes: c.allocBytes.Load(), FreedBytes: c.freedBytes.Load(),
	}
}

// countBatch adds the verbs of a completed batch. CAS failures are counted
// only when the result is known (signaled batches).
func (c *counters) countBatch(ops []Op, signaled bool) {
	var r, w, cs, fa, rb, wb, fail uint64
	for i := range ops {
		o := &ops[i]
		switch o.Kind {
		case OpRead:
			r++
			rb += uint64(len(o.Buf))
		case OpWrite:
			w++
			wb += uint64(len(o.Buf))
		case OpCAS:
			cs++
			if signaled && o.Old != o.Compare {
				fail++
			}
		case OpFAA:
			fa++
		}
	}
	if r != 0 {
		c.reads.Add(r)
		c.readBytes.Add(rb)
	}
	if w != 0 {
		c.writes.Add(w)
		c.writeBytes.Add(wb)
	}
	if cs != 0 {
		c.cases.Add(cs)
	}
	if fail != 0 {
		c.casFailures.Add(fail)
	}
	if fa != 0 {
		c.faas.Add(fa)
	}
	if signaled {
		c.roundTrips.Add(1)
	} else {
		c.unsignaled.Add(uint64(len(ops)))
	}
}
