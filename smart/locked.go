package smart

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// The locked-internal-node variant (Options.LockedInternal) is the
// ROWEX-like baseline of the factor analysis (Figure 4.14): readers stay
// lock-free, but every writer that changes an internal node first takes
// that node's lock word (after its 256 slots) with a CAS, re-reads what it
// changes under the lock, writes with plain WRITEs and releases the lock in
// the same batch as its last write. A writer that finds the lock held backs
// off and retries, as a remote spin lock does.

// lockNode takes node's lock and reads n bytes of it (from offset 0) into
// buf in the same round trip.
func (s *session) lockNode(ctx context.Context, node remote.Addr, buf []byte) error {
	var watch registry.Watch
	for attempt := 0; ; attempt++ {
		// Its own op array: the caller's batch may hold staged writes.
		ops := s.lockOps[:]
		tag := s.lockTag()
		ops[0], ops[1] = remote.CAS(node.Add(nodeLockOff), 0, tag), remote.Read(node, buf)
		s.nodeReads++
		from := s.m.LockedAt(s.c.Now())
		if err := s.c.Do(ctx, ops); err != nil {
			return err
		}
		if ops[0].Succeeded() {
			s.nodeLock, s.nodeFrom, s.nodeTag = node.Add(nodeLockOff), from, tag
			return nil
		}
		if attempt >= maxLockAttempts {
			return fmt.Errorf("%w: node lock at %v held by %#x for %d attempts", ErrContention, node, ops[0].Old, attempt)
		}
		// A holder that died leaves the node consistent (its slot write is
		// one 8-byte word): its lock is just released (I9).
		held := ops[0].Old
		if dead, err := s.holderDead(ctx, &watch, held, attempt); err != nil {
			return err
		} else if dead {
			// By the judgement's deadline, as a leaf lock's takeover
			// (recoverLeaf): a late release judges again.
			release := s.lockOps[:1]
			release[0] = remote.CAS(node.Add(nodeLockOff), held, 0)
			if err := s.c.DoBy(ctx, release, watch.ActBy()); err == nil && release[0].Succeeded() {
				s.t.rstats.recovered.Add(1)
			} else if err != nil && !errors.Is(err, remote.ErrLate) {
				return err
			}
			continue
		}
		s.c.Backoff(attempt)
		s.touchIn(ctx) // the waiter may hold a leaf lock (publishLocked): keep it live
	}
}

// unlockOp returns the WRITE that releases node's lock.
func (s *session) unlockOp(node remote.Addr) remote.Op {
	return remote.Write(node.Add(nodeLockOff), zeroWord[:])
}

var zeroWord [8]byte

// errNodeLost: holding found that a waiter took over the node lock the
// session held, while its compute node was silent.
var errNodeLost = errors.New("smart: node lock lost")

// giveBack releases the node lock if it still holds the tag the session
// took it with: a WRITE would release the lock of a waiter that took it
// over.
func (s *session) giveBack(ctx context.Context) error {
	release := s.lockOps[:1]
	release[0] = remote.CAS(s.nodeLock, s.nodeTag, 0)
	return s.c.Do(ctx, release)
}

// releaseNode releases the node lock the session holds, with the leaf lock
// at leafLock held too (nil: none): by a WRITE that leaves by holding's
// deadline, or not at all if a waiter took the lock over meanwhile.
func (s *session) releaseNode(ctx context.Context, leafLock remote.Addr) error {
	for late := 0; ; late++ {
		if s.lateAgain(late) {
			// Every release was late: give the lock back by a CAS of the
			// session's tag, which no waiter's takeover can meet.
			return s.giveBack(ctx)
		}
		by, err := s.holding(ctx, leafLock)
		switch {
		case err == errNodeLost:
			return nil
		case err != nil:
			return err
		}
		release := s.lockOps[:1]
		release[0] = remote.Write(s.nodeLock, zeroWord[:])
		if err := s.c.DoBy(ctx, release, by); !errors.Is(err, remote.ErrLate) {
			return err
		}
	}
}

// insertLocked is the normal insert (and type switch) under the node lock.
func (s *session) insertLocked(ctx context.Context, d descent, key, value []byte) (bool, cursor, error) {
	n := &s.node
	node := n.addr
	buf := s.nodeBuf[:nodeLockOff]
	if err := s.lockNode(ctx, node, buf); err != nil {
		return false, d.cur, err
	}
	defer func() { s.nodeLock = 0 }()
	ctx = context.WithoutCancel(ctx) // the lock is always released
	h := header(binary.LittleEndian.Uint64(buf[nodeHeaderOff:]))
	b := s.enc[d.pos]
	free := -1
	for i := range 256 {
		sl := slot(binary.LittleEndian.Uint64(buf[nodeSlotsOff+8*i:]))
		if sl.isEmpty() {
			if free < 0 {
				free = i
			}
			continue
		}
		if sl.partial() == b {
			// Inserted meanwhile: follow it, after helping raise the type if
			// its insert put it behind the node's capacity and did not
			// (it may have died there, I9).
			err := s.releaseNode(ctx, 0)
			if err == nil && i >= h.nodeType().capacity() {
				err = s.raiseType(ctx, d.cur, node, h, typeFor(i))
			}
			return false, cursor{addr: nodeSlotAddr(node, i), sl: sl, depth: int16(d.pos + 1), level: d.cur.level + 1, node: node}, err
		}
	}
	if free < 0 || h.depth() != n.h.depth() {
		// Full (impossible with 256 partial keys) or split meanwhile.
		err := s.releaseNode(ctx, 0)
		if err == nil {
			err = errRestart
		}
		return false, d.cur, err
	}
	class := s.t.lf.classOf(key, value)
	la, err := s.allocLeaf(ctx, node.MN(), class)
	if err != nil {
		_ = s.releaseNode(ctx, 0) // the allocation error is the one to report
		return false, d.cur, err
	}
	s.img = s.t.lf.image(s.img, nodeSlotAddr(node, free), key, value, class, s.t.epoch())
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], uint64(leafSlot(b, class, la)))
	if _, err := s.linkUnder(ctx, s.nodeLock, append(s.batch(), remote.Write(la, s.img)),
		remote.Write(nodeSlotAddr(node, free), word[:]), s.unlockOp(node)); err != nil {
		if err == errRestart {
			s.dropUnlinked(la, class) // the lock may have been lost: nothing linked it
		}
		return false, d.cur, err
	}
	// The header's type is raised by CAS, as in the lock-free variant: header
	// splits change the same word without this node's lock.
	return true, d.cur, s.raiseType(ctx, d.cur, node, h, typeFor(free))
}

// publishLocked replaces cur's slot under the lock of the node holding it:
// lock and re-read the slot, write the new structure, then CAS the slot and
// release the lock. It reports whether the CAS succeeded. leafLock is the
// word of the leaf lock the caller holds (a leaf split), or nil; flagBy, if
// not 0, is the deadline of the moving flag's commit (session.commitBy) the
// CAS is: past it, the lock is released and the CAS not posted
// (remote.ErrLate).
//
// Every batch goes through holding, which checks (and renews) both locks.
// Only the release needs the node lock to be still the session's: the
// slot changes by CAS, as leaf-level operations (delete, out-of-place
// update) change leaf slots without taking node locks. So a node lock
// taken over meanwhile (errNodeLost) is just not released.
func (s *session) publishLocked(ctx context.Context, cur cursor, leafLock remote.Addr, ops []remote.Op, repl slot, flagBy time.Duration) (bool, cursor, error) {
	parent := cur.node
	if err := s.lockNode(ctx, parent, s.word[:]); err != nil {
		return false, cur, err
	}
	defer func() { s.nodeLock = 0 }()
	ctx = context.WithoutCancel(ctx) // the lock is always released
	now, err := s.readWord(ctx, cur.addr)
	if err != nil {
		return false, cur, err
	}
	if slot(now) != cur.sl {
		return false, cur.with(slot(now)), s.releaseNode(ctx, leafLock)
	}
	err = s.doUnder(ctx, leafLock, ops)
	if err == errNodeLost {
		err = s.doUnder(ctx, leafLock, ops) // the leaf lock alone now
	}
	if err != nil {
		return false, cur, err
	}
	for late := 0; ; late++ {
		if s.lateAgain(late) {
			return false, cur, s.abandon(ctx, "a publish under a node lock", late)
		}
		ops = append(s.batch(), remote.CAS(cur.addr, uint64(cur.sl), uint64(repl)))
		if !s.nodeLock.IsNil() {
			ops = append(ops, remote.Write(s.nodeLock, zeroWord[:]))
		} else if leafLock.IsNil() {
			// Under no lock any more (the flag of a header split guards
			// it: publish), by the flag's deadline all the same: a split
			// whose node lock was taken over was paused for a lease.
			if err := s.doBy(ctx, ops, flagBy); err != nil {
				return false, cur, err
			}
			break
		}
		by, err := s.holding(ctx, leafLock)
		if err == errNodeLost {
			continue
		}
		if err == nil {
			err = s.c.DoBy(ctx, ops, min(by, cmp.Or(flagBy, by)))
		}
		if !errors.Is(err, remote.ErrLate) {
			if err != nil {
				return false, cur, err
			}
			break
		}
		if flagBy > 0 && s.c.Now() > flagBy {
			// Late for the flag, not only for the lock: publish nothing.
			return false, cur, cmp.Or(s.releaseNode(ctx, leafLock), remote.ErrLate)
		}
	}
	got := slot(ops[0].Old)
	return got == cur.sl, cur.with(got), nil
}
