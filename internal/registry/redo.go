package registry

import (
	"context"
	"encoding/binary"
	"fmt"

	farm "github.com/dgryski/go-farm"
	"github.com/dmindex/dmindex/remote"
)

// Redo records (docs/recovery.md, "The redo record"). A member that writes
// in place under a lock first writes, in the same batch and on the same
// memory node, a record of that WRITE into its redo slot on that node:
//
//	word 0   the WRITE's target address
//	word 1   the writer's tag: SlotOf(Tag()), so that every incarnation of
//	         the slot finds it (see SlotOf)
//	word 2   the image's length
//	word 3   checksum of words 0..2 and the image
//	then     the image: the bytes of the WRITE
//
// Verbs to one memory node execute in posting order, so no byte of the
// target changes before the whole record has landed: a repairer that finds
// the target torn under a dead holder's lock rewrites it from the record.
//
// Each block has a redo directory on memory node 0 (its address in word 3
// of the block header): per client slot and memory node, the address and
// size of the slot's redo slot. A new incarnation of a client slot inherits
// its predecessor's redo slots, and settles a record left in one (a
// predecessor that died with its WRITE cut) before it writes its own.

// RedoHeader is the size of a redo record's header, before the image.
const RedoHeader = 32

// Redo is a decoded redo record.
type Redo struct {
	Target remote.Addr // where the image goes
	Tag    uint64      // the lock tag of the writer
	Image  []byte      // aliases the buffer it was parsed from
}

// AppendRedo appends the record of writing image at target under tag to
// buf.
func AppendRedo(buf []byte, target remote.Addr, tag uint64, image []byte) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, uint64(target))
	buf = binary.LittleEndian.AppendUint64(buf, tag)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(image)))
	buf = binary.LittleEndian.AppendUint64(buf, redoSum(target, tag, image))
	return append(buf, image...)
}

// ParseRedo decodes a record read from a redo slot; ok is false for an
// empty slot or a record whose WRITE was cut.
func ParseRedo(b []byte) (r Redo, ok bool) {
	if len(b) < RedoHeader {
		return r, false
	}
	r.Target = remote.Addr(binary.LittleEndian.Uint64(b))
	r.Tag = binary.LittleEndian.Uint64(b[8:])
	n := binary.LittleEndian.Uint64(b[16:])
	if r.Target == 0 || n > uint64(len(b)-RedoHeader) {
		return Redo{}, false
	}
	r.Image = b[RedoHeader : RedoHeader+int(n)]
	if redoSum(r.Target, r.Tag, r.Image) != binary.LittleEndian.Uint64(b[24:]) {
		return Redo{}, false
	}
	return r, true
}

func redoSum(target remote.Addr, tag uint64, image []byte) uint64 {
	return farm.Hash64WithSeed(image, uint64(target)*0x9E3779B97F4A7C15^tag^uint64(len(image))<<40)
}

// SlotOf returns the identity of the client slot that tag names: the tag
// with its incarnation and any flag bits other than the tag bit cleared, so
// that every incarnation of a slot has the same SlotOf. A writer that tags
// its redo records with SlotOf(Tag()) lets a repairer find, with
// RedoOf(SlotOf(holder), mn), the record of whichever incarnation of the
// holder's slot wrote last on mn (an incarnation that settled its
// predecessor's record and died before writing its own leaves that one).
func SlotOf(tag uint64) uint64 { return tag&tagFieldMask&^incMask | tagBit }

// dirOff is the offset of the redo directory's address in a block header.
const dirOff = 24

// redoSlot is what a member knows of its redo slot on one memory node.
type redoSlot struct {
	known bool
	addr  remote.Addr
	size  int
}

// RedoSlot returns the address of the member's redo slot on memory node mn,
// with room for a record of an image of n bytes. The first call for mn
// reads what the slot's previous incarnations left (one or two round trips)
// and passes a record another incarnation wrote to settle, which must
// repair its target if the writer's lock still holds it (the record is
// overwritten next); a slot too small is replaced, its address published
// with a WRITE that completes before RedoSlot returns.
func (m *Member) RedoSlot(ctx context.Context, c *remote.Client, mn, n int, settle func(Redo) error) (remote.Addr, error) {
	if len(m.redo) == 0 {
		m.redo = make([]redoSlot, c.Pool().MemoryNodes())
	}
	if mn < 0 || mn >= len(m.redo) {
		return 0, fmt.Errorf("registry: %w: memory node %d", remote.ErrUnknownNode, mn)
	}
	st := &m.redo[mn]
	need := RedoHeader + n
	if !st.known {
		dir, err := m.n.directory(ctx, c, m.blk)
		if err != nil {
			return 0, err
		}
		var e [16]byte
		if err := c.Read(ctx, m.n.entryAddr(dir, m.k, mn, len(m.redo)), e[:]); err != nil {
			return 0, fmt.Errorf("registry: %w", err)
		}
		st.addr, st.size = remote.Addr(binary.LittleEndian.Uint64(e[:])), int(binary.LittleEndian.Uint64(e[8:]))
		if st.addr == 0 || st.size < RedoHeader || st.size > 1<<30 {
			st.addr, st.size = 0, 0 // none, or an entry whose WRITE a crash cut
		}
		if st.addr != 0 && settle != nil {
			r, ok, err := readRedo(ctx, c, st.addr, st.size)
			if err != nil {
				return 0, err
			}
			if ok && r.Tag != m.tag {
				if err := settle(r); err != nil {
					return 0, err
				}
			}
		}
		st.known = true
	}
	if st.size >= need {
		return st.addr, nil
	}
	size := 256
	for size < need {
		size *= 2
	}
	a, err := c.AllocOn(ctx, mn, size, 8)
	if err != nil {
		return 0, fmt.Errorf("registry: redo slot: %w", err)
	}
	var e [16]byte
	binary.LittleEndian.PutUint64(e[:], uint64(a))
	binary.LittleEndian.PutUint64(e[8:], uint64(size))
	dir, err := m.n.directory(ctx, c, m.blk)
	if err != nil {
		return 0, err
	}
	if err := c.Write(ctx, m.n.entryAddr(dir, m.k, mn, len(m.redo)), e[:]); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	if st.addr != 0 {
		// Settled, or this member's own record of an operation that
		// returned: no repairer needs it.
		if err := c.Free(st.addr, st.size); err != nil {
			return 0, fmt.Errorf("registry: %w", err)
		}
	}
	st.addr, st.size = a, size
	return a, nil
}

// RedoOf reads the redo record that the holder of lock tag left on memory
// node mn (three round trips: the directory's address, the entry, the
// slot); ok is false if it has none, or one whose WRITE was cut.
func (n *Node) RedoOf(ctx context.Context, c *remote.Client, tag uint64, mn int) (Redo, bool, error) {
	if !IsTag(tag) {
		return Redo{}, false, nil
	}
	b, k, _ := parseTag(tag)
	mns := c.Pool().MemoryNodes()
	if b >= n.opts.Blocks || k >= n.opts.Clients || mn < 0 || mn >= mns {
		return Redo{}, false, fmt.Errorf("registry: no redo slot for tag %#x on memory node %d", tag, mn)
	}
	var w [16]byte
	if err := c.Read(ctx, n.blockAddr(b).Add(dirOff), w[:8]); err != nil {
		return Redo{}, false, fmt.Errorf("registry: %w", err)
	}
	dir := remote.Addr(binary.LittleEndian.Uint64(w[:]))
	if dir == 0 {
		return Redo{}, false, nil
	}
	if err := c.Read(ctx, n.entryAddr(dir, k, mn, mns), w[:]); err != nil {
		return Redo{}, false, fmt.Errorf("registry: %w", err)
	}
	a, size := remote.Addr(binary.LittleEndian.Uint64(w[:])), binary.LittleEndian.Uint64(w[8:])
	if a == 0 || size < RedoHeader || size > 1<<30 {
		return Redo{}, false, nil
	}
	r, ok, err := readRedo(ctx, c, a, int(size))
	if err != nil || !ok || r.Tag&tagFieldMask != tag&tagFieldMask {
		return Redo{}, false, err
	}
	return r, true, nil
}

// readRedo reads the record in the redo slot of size bytes at a: the first
// 256 bytes, and the rest of the record in a second round trip if its
// header says it is longer (slots grow for large images and keep their
// size, most records are small).
func readRedo(ctx context.Context, c *remote.Client, a remote.Addr, size int) (Redo, bool, error) {
	if size < RedoHeader {
		return Redo{}, false, nil // an entry whose WRITE a crash cut
	}
	buf := make([]byte, min(size, 256))
	if err := c.Read(ctx, a, buf); err != nil {
		return Redo{}, false, fmt.Errorf("registry: %w", err)
	}
	if n := RedoHeader + int(min(binary.LittleEndian.Uint64(buf[16:]), uint64(size))); n > len(buf) && n <= size {
		buf = append(buf, make([]byte, n-len(buf))...)
		if err := c.Read(ctx, a.Add(256), buf[256:]); err != nil {
			return Redo{}, false, fmt.Errorf("registry: %w", err)
		}
	}
	r, ok := ParseRedo(buf)
	return r, ok, nil
}

// directory returns the address of blk's redo directory, allocating,
// zeroing and publishing it on first use.
func (n *Node) directory(ctx context.Context, c *remote.Client, blk *block) (remote.Addr, error) {
	n.mu.Lock()
	dir := blk.dir
	n.mu.Unlock()
	if dir != 0 {
		return dir, nil
	}
	size := 16 * n.opts.Clients * c.Pool().MemoryNodes()
	a, err := c.AllocOn(ctx, 0, size, 8)
	if err != nil {
		return 0, fmt.Errorf("registry: redo directory: %w", err)
	}
	// Allocation may hand out memory freed by others (a compute node's
	// free list): its entries must read as none before the CAS publishes
	// it (readers take a zero entry for no slot; leftover bytes named
	// slots anywhere, out of bounds included).
	if err := c.Write(ctx, a, make([]byte, size)); err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	old, err := c.CAS(ctx, n.blockAddr(blk.idx).Add(dirOff), 0, uint64(a))
	if err != nil {
		return 0, fmt.Errorf("registry: %w", err)
	}
	if old != 0 {
		// Another member of this node published one first.
		if err := c.Free(a, size); err != nil {
			return 0, fmt.Errorf("registry: %w", err)
		}
		a = remote.Addr(old)
	}
	n.mu.Lock()
	blk.dir = a
	n.mu.Unlock()
	return a, nil
}

// entryAddr is the address of client k's entry for memory node mn in a
// redo directory.
func (n *Node) entryAddr(dir remote.Addr, k, mn, mns int) remote.Addr {
	return dir.Add(uint64(16 * (k*mns + mn)))
}
