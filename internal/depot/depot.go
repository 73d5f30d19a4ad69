package depot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dmindex/dmindex/remote"
)

// Kind says what an entry's memory is.
type Kind uint8

const (
	// Unused is memory never handed out (a client's Leftovers): the next
	// node gives it to remote.ComputeNode.Reuse.
	Unused Kind = iota + 1
	// Retired is an object of the structure that no link reaches any more
	// but a reader may still hold until the registry's epoch passes Tau:
	// the next node adopts it into its limbo (registry.Node.Adopt).
	Retired
	// Free is an object of the structure that no reader can hold any
	// more, freed when the registry's epoch was past Tau: the next node
	// reuses it for the structure once its own epoch is past Tau.
	Free
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Unused:
		return "unused"
	case Retired:
		return "retired"
	case Free:
		return "free"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Entry is one piece of memory handed on.
type Entry struct {
	Kind Kind
	Addr remote.Addr
	Size uint64
	Tau  uint64 // Retired, Free: the epoch the registry must pass before reuse
}

// ErrCorrupt is wrapped by Take's error when a record does not decode: the
// entries of the records before it are returned, the rest is lost.
var ErrCorrupt = errors.New("corrupt")

const (
	headerBytes = 16
	entryBytes  = 24
	minCapacity = 8
	// maxCapacity bounds a record to 48 KB.
	maxCapacity = 2048
	sizeMask    = 1<<56 - 1
	// maxPushes bounds the CASes of one Push: each failure means another
	// node's Push or Take succeeded.
	maxPushes = 1 << 16
)

// recordBytes returns the allocation of a record of capacity entries.
func recordBytes(capacity int) int { return headerBytes + entryBytes*capacity }

// capacityFor returns the capacity of a record for n entries: a power of
// two, at least minCapacity and within limit bytes if that allows more.
func capacityFor(n int, limit int64) int {
	c := minCapacity
	for c < n && c < maxCapacity && int64(recordBytes(2*c)) <= limit {
		c *= 2
	}
	return c
}

// encode writes the record of es, linked to next, into b, which holds a
// record of capacity len(b).
func encode(b []byte, next remote.Addr, capacity int, es []Entry) {
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(next))
	le.PutUint64(b[8:], uint64(len(es))|uint64(capacity)<<32)
	for i, e := range es {
		w := b[headerBytes+entryBytes*i:]
		le.PutUint64(w[0:], uint64(e.Addr))
		le.PutUint64(w[8:], e.Size&sizeMask|uint64(e.Kind)<<56)
		le.PutUint64(w[16:], e.Tau)
	}
}

// decodeHeader returns a record's next address, entry count and capacity.
func decodeHeader(b []byte) (next remote.Addr, n, capacity int, err error) {
	if len(b) < headerBytes {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	le := binary.LittleEndian
	w := le.Uint64(b[8:])
	n, capacity = int(uint32(w)), int(w>>32)
	if capacity < minCapacity || capacity > maxCapacity || n > capacity {
		return 0, 0, 0, fmt.Errorf("%w: %d entries of %d", ErrCorrupt, n, capacity)
	}
	return remote.Addr(le.Uint64(b)), n, capacity, nil
}

// decodeEntries appends the n entries in b to es.
func decodeEntries(es []Entry, b []byte, n int) ([]Entry, error) {
	if len(b) < entryBytes*n {
		return es, fmt.Errorf("%w: %d bytes for %d entries", ErrCorrupt, len(b), n)
	}
	le := binary.LittleEndian
	for i := range n {
		w := b[entryBytes*i:]
		e := Entry{Addr: remote.Addr(le.Uint64(w)), Size: le.Uint64(w[8:]) & sizeMask,
			Kind: Kind(le.Uint64(w[8:]) >> 56), Tau: le.Uint64(w[16:])}
		if !e.valid() {
			return es[:len(es)-i], fmt.Errorf("%w: entry %d: kind %v, %d bytes at %v", ErrCorrupt, i, e.Kind, e.Size, e.Addr)
		}
		es = append(es, e)
	}
	return es, nil
}

// valid reports whether e can be pushed: a known kind, a size that fits in
// 56 bits, on a memory node's main region.
func (e Entry) valid() bool {
	return e.Kind >= Unused && e.Kind <= Free && e.Size != 0 && e.Size <= sizeMask && !e.Addr.IsNil() && !e.Addr.IsOnChip()
}

// Push publishes es on the depot whose head word is at head, with c. Its
// records are carved out of the Unused entries when one has room, else
// allocated with c. Nothing is published if an allocation or a WRITE
// fails. Entries of no known kind, of size 0 or beyond 56 bits, at
// the nil address or on an on-chip region are refused with
// remote.ErrBadRequest.
func Push(ctx context.Context, c *remote.Client, head remote.Addr, es []Entry) error {
	if len(es) == 0 {
		return nil
	}
	for _, e := range es {
		if !e.valid() {
			return fmt.Errorf("depot: %w: entry of kind %v, %d bytes at %v", remote.ErrBadRequest, e.Kind, e.Size, e.Addr)
		}
	}
	// Records small enough to come out of a client's chunk, and so out of
	// the Unused memory of records taken before (remote.ComputeNode.Reuse).
	limit := min(c.Pool().MaxAllocBytes(), c.Pool().Config().ChunkBytes/4-8)
	type record struct {
		addr remote.Addr
		img  []byte
	}
	// Records are carved out of the Unused memory handed on when it has
	// room, else allocated.
	es = slices.Clone(es)
	var recs []record
	for rest := len(es); rest > 0; {
		capacity := capacityFor(rest, limit)
		n := recordBytes(capacity)
		a := carve(es, uint64(n))
		if a.IsNil() {
			var err error
			if a, err = c.Alloc(ctx, n); err != nil {
				return fmt.Errorf("depot: %w", err)
			}
		}
		recs = append(recs, record{a, make([]byte, n)})
		rest -= min(capacity, rest)
	}
	es = slices.DeleteFunc(es, func(e Entry) bool { return e.Size == 0 })
	for _, r := range recs {
		capacity := (len(r.img) - headerBytes) / entryBytes
		n := min(len(es), capacity)
		encode(r.img, 0, capacity, es[:n])
		es = es[n:]
	}
	var w [8]byte
	if err := c.Read(ctx, head, w[:]); err != nil {
		return fmt.Errorf("depot: %w", err)
	}
	old := binary.LittleEndian.Uint64(w[:])
	ops := make([]remote.Op, len(recs))
	for i, r := range recs {
		next := uint64(old)
		if i+1 < len(recs) {
			next = uint64(recs[i+1].addr)
		}
		binary.LittleEndian.PutUint64(r.img, next)
		ops[i] = remote.Write(r.addr, r.img)
	}
	if err := c.Do(ctx, ops); err != nil {
		return fmt.Errorf("depot: %w", err)
	}
	last := recs[len(recs)-1]
	for range maxPushes {
		got, err := c.CAS(ctx, head, old, uint64(recs[0].addr))
		if err != nil {
			return fmt.Errorf("depot: %w", err)
		}
		if got == old {
			return nil
		}
		old = got
		binary.LittleEndian.PutUint64(w[:], old)
		if err := c.Write(ctx, last.addr, w[:]); err != nil {
			return fmt.Errorf("depot: %w", err)
		}
	}
	return fmt.Errorf("depot: %w: the head moved %d times", remote.ErrBadRequest, maxPushes)
}

// HandOn publishes, for a compute node cn that leaves a structure, es and
// what cn and its idle clients cs hold of the memory they were given (the
// rest of the clients' chunks, cn's Spares), on the depot whose head word
// is at head. It pushes with the first of cs that has not crashed
// (Poster), and nothing if there is none: the records of es come out of
// the Unused memory or that client's chunks, and that client's rest goes
// last, in records carved out of it (a rest too small to hold one, a few
// hundred bytes per memory node, is dropped rather than costing a new
// chunk).
func HandOn(ctx context.Context, cn *remote.ComputeNode, cs []*remote.Client, head remote.Addr, es []Entry) error {
	c := Poster(cs)
	if c == nil {
		return nil
	}
	es = leftovers(es, cn)
	for _, o := range cs {
		if o != c {
			es = leftovers(es, nil, o)
		}
	}
	if err := Push(ctx, c, head, es); err != nil {
		return err
	}
	rest := leftovers(nil, nil, c)
	need := uint64(recordBytes(capacityFor(len(rest), math.MaxInt64)))
	if !slices.ContainsFunc(rest, func(e Entry) bool { return e.Size >= need }) {
		return nil
	}
	return Push(ctx, c, head, rest)
}

// carve takes n bytes from the start of an Unused entry of es that holds
// them, or returns 0.
func carve(es []Entry, n uint64) remote.Addr {
	for i := range es {
		if e := &es[i]; e.Kind == Unused && e.Size >= n {
			a := e.Addr
			e.Addr, e.Size = e.Addr.Add(n), e.Size-n
			return a
		}
	}
	return 0
}

// Take empties the depot whose head word is at head, with c, and returns
// its entries, most recently pushed first, followed by each record's own
// memory as an Unused entry. An error after the stack was taken
// (a READ failed, a record is corrupt: ErrCorrupt) comes with the entries
// read before it; the rest is lost.
func Take(ctx context.Context, c *remote.Client, head remote.Addr) ([]Entry, error) {
	first, err := readHead(ctx, c, head)
	for err == nil && !first.IsNil() {
		var got uint64
		if got, err = c.CAS(ctx, head, uint64(first), 0); err == nil && got == uint64(first) {
			break
		}
		first = remote.Addr(got)
	}
	if err != nil {
		return nil, fmt.Errorf("depot: %w", err)
	}
	es, recs, err := readRecords(ctx, c, first)
	for _, r := range recs {
		es = append(es, Entry{Kind: Unused, Addr: r.Addr, Size: r.Size})
	}
	return es, err
}

// readHead reads the depot's head word.
func readHead(ctx context.Context, c *remote.Client, head remote.Addr) (remote.Addr, error) {
	var w [8]byte
	err := c.Read(ctx, head, w[:])
	return remote.Addr(binary.LittleEndian.Uint64(w[:])), err
}

// readRecords reads the records from first on and returns their entries and the
// records' own extents: on an error, those read before it.
func readRecords(ctx context.Context, c *remote.Client, first remote.Addr) ([]Entry, []remote.Extent, error) {
	var es []Entry
	var recs []remote.Extent
	var hdr [headerBytes]byte
	var body []byte
	seen := make(map[remote.Addr]bool)
	for rec := first; !rec.IsNil(); {
		if seen[rec] {
			return es, recs, fmt.Errorf("depot: %w: record at %v is linked twice (a cycle)", ErrCorrupt, rec)
		}
		seen[rec] = true
		if err := c.Read(ctx, rec, hdr[:]); err != nil {
			return es, recs, fmt.Errorf("depot: record at %v: %w", rec, err)
		}
		next, n, capacity, err := decodeHeader(hdr[:])
		if err != nil {
			return es, recs, fmt.Errorf("depot: record at %v: %w", rec, err)
		}
		body = append(body[:0], make([]byte, entryBytes*n)...)
		if n > 0 {
			if err := c.Read(ctx, rec.Add(headerBytes), body); err != nil {
				return es, recs, fmt.Errorf("depot: record at %v: %w", rec, err)
			}
		}
		if es, err = decodeEntries(es, body, n); err != nil {
			return es, recs, fmt.Errorf("depot: record at %v: %w", rec, err)
		}
		recs = append(recs, remote.Extent{Addr: rec, Size: uint64(recordBytes(capacity))})
		rec = next
	}
	return es, recs, nil
}

// leftovers appends to es an Unused entry for each extent of the
// Leftovers of the clients cs (remote.Client.Leftovers), which must be
// idle, and for each of cn's Spares (cn may be nil: none).
func leftovers(es []Entry, cn *remote.ComputeNode, cs ...*remote.Client) []Entry {
	add := func(xs []remote.Extent) {
		for _, x := range xs {
			es = append(es, Entry{Kind: Unused, Addr: x.Addr, Size: x.Size})
		}
	}
	for _, c := range cs {
		add(c.Leftovers())
	}
	if cn != nil {
		add(cn.Spares())
	}
	return es
}

// Poster returns the first of cs that has not crashed (remote.Client.Crashed),
// to push with, or nil.
func Poster(cs []*remote.Client) *remote.Client {
	for _, c := range cs {
		if !c.Crashed() {
			return c
		}
	}
	return nil
}

// Reuse gives the Unused entries of es to cn (remote.ComputeNode.Reuse)
// and returns the others. An entry cn refuses (outside the pool) is
// dropped.
func Reuse(cn *remote.ComputeNode, es []Entry) []Entry {
	var rest []Entry
	for _, e := range es {
		if e.Kind != Unused {
			rest = append(rest, e)
			continue
		}
		_ = cn.Reuse(remote.Extent{Addr: e.Addr, Size: e.Size})
	}
	return rest
}
