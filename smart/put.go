package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/rdwc"
	"github.com/dmindex/dmindex/remote"
)

// Put inserts key or replaces its value.
//
// Every structural change is one 8-byte CAS on a slot (normal insert, leaf
// split, header split) followed, where needed, by completing CASes on the
// moved node's header or reverse pointer before Put returns; an existing
// key is updated in place under the leaf's rear lock in two round trips
// (docs/smart-protocol.md).
//
// It fails with ErrValueTooLarge if the value exceeds MaxValueLen or if
// its leaf (24 bytes, the key, the value and the 8-byte lock, rounded up to
// a size class) would be larger than a memory node can ever hold
// (remote.Pool.MaxAllocBytes: remote.Config.NodeBytes less what the node
// reserves for its own state), at once and with nothing stored,
// and with remote.ErrOutOfMemory if no memory node has room for what it
// needs (a new leaf, also for an update that outgrows its leaf or under
// Options.OutOfPlaceLeaves, or new nodes). A Put that fails has not stored
// the pair and the old value stays, with two exceptions where it may have
// been stored: an error wrapping ErrClosed (the pool closed in the middle),
// and the context's error of a Put whose write was combined into another
// client's (read delegation and write combining) after that client had
// taken its value.
func (t *Tree) Put(ctx context.Context, key, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(value), MaxValueLen)
	}
	if err := t.usable(); err != nil {
		return err
	}
	if n := classBytes(t.lf.classOf(key, value)); int64(n) > t.maxLeaf {
		return fmt.Errorf("%w: its leaf of %d bytes exceeds what a memory node can hold (%d of its %d bytes)",
			ErrValueTooLarge, n, t.maxLeaf, t.nodeBytes)
	}
	s, err := t.sessionFor(ctx)
	if err != nil {
		return err
	}
	defer t.release(s)
	s.enc = appendEncoded(s.enc[:0], key)
	return wrapRemote(t.rd.Write(ctx, s.c, key, value, s.putFn))
}

// putInWindow is the write of Put run by rdwc: alone, or as the leader that
// publishes the latest value combined into its window.
func (s *session) putInWindow(ctx context.Context, w *rdwc.Window) error {
	s.win = w
	return s.attempt(ctx, "put", func() error { return s.put(ctx, w.Key()) })
}

// put runs one attempt of Put. The value to publish is read with s.value()
// right before the verb that publishes it (write combining).
func (s *session) put(ctx context.Context, key []byte) error {
	cur, err := s.start(ctx)
	if err != nil {
		return err
	}
	done, cur, err := s.insertCached(ctx, cur, key)
	if err != nil || done {
		return err
	}
	for {
		d, err := s.descend(ctx, s.enc, cur)
		if err != nil {
			return err
		}
		var done bool
		switch d.out {
		case atLeaf:
			done, cur, err = s.putAtLeaf(ctx, d.cur, key)
		case atTomb:
			done, cur, err = s.installLeaf(ctx, d.cur, key, s.value())
		case atMissing:
			if s.t.opts.LockedInternal {
				done, cur, err = s.insertLocked(ctx, d, key, s.value())
			} else {
				done, cur, err = s.insertIntoNode(ctx, d, key, s.value())
			}
		case atMismatch:
			done, cur, err = s.splitHeader(ctx, d, key, s.value())
		default:
			err = corruptf("key encoding ends inside node %v", s.node.addr)
		}
		if err != nil || done {
			return err
		}
	}
}

// putAtLeaf handles a leaf on the key's path: update it if it holds the
// key, split it otherwise. It returns the cursor to continue from when a CAS
// lost a race.
func (s *session) putAtLeaf(ctx context.Context, cur cursor, key []byte) (bool, cursor, error) {
	res, v, cur, err := s.lockLeaf(ctx, cur, key, true)
	switch {
	case err != nil || res == leafMoved:
		return false, cur, err
	}
	// The leaf is locked: from here on the operation completes even if ctx
	// ends, so that the lock is always released (the check below posts a
	// heartbeat when one is due, and with the caller's context it failed
	// with the lock held).
	ctx = context.WithoutCancel(ctx)
	// Checked once here too, not only by doUnder before each batch: a split
	// or an update may give the lock back with an unchecked release
	// (unlockAsync) before it writes anything.
	if _, err := s.holding(ctx, leafLockAddr(cur.sl)); err != nil {
		return false, cur, err
	}
	if res == leafOther {
		return s.splitLeaf(ctx, cur, v, key, s.value())
	}
	value := s.value()
	if !s.t.opts.OutOfPlaceLeaves && s.t.lf.fits(key, value, cur.sl.leafClass()) {
		return true, cur, s.writeInPlace(ctx, cur.sl, key, value, v.birth)
	}
	return s.moveLeaf(ctx, cur, v.meta, key, value)
}

// leafLock is what lockLeaf found.
type leafLock uint8

const (
	leafLocked leafLock = iota // the leaf holds the key; its lock is ours
	leafOther                  // the leaf holds another key; locked for a split
	leafMoved                  // the leaf left the slot: continue from the cursor returned
)

// lockLeaf takes the rear lock of the leaf cur points to, reading it in the
// same round trip, and classifies it for an update or a delete of key:
// retired, invalid or moved away (I4, I6, or a reverse pointer that, read
// under the lock, names another slot: re-read the slot), torn (I7: the
// previous holder's WRITE is still landing; release and read again), another
// key, or locked by someone else (back off, bounded by maxLockAttempts).
// Nothing is decided on a leaf that failed validation.
//
// A leaf of another key is returned locked if split is set (a Put splits
// it, holding its lock: no other operation can move or remove it
// meanwhile), unlocked otherwise (a Delete has nothing to do).
func (s *session) lockLeaf(ctx context.Context, cur cursor, key []byte, split bool) (leafLock, leafView, cursor, error) {
	var watch registry.Watch
	for attempt := 0; ; attempt++ {
		v, st, lockOld, err := s.lockAndRead(ctx, cur.sl)
		if err != nil {
			return 0, v, cur, err
		}
		locked := lockOld == 0
		switch {
		case st == leafRetired || lockOld == lockRetired || (st == leafOK && s.stale(cur, v.rev)) ||
			(locked && st == leafOK && v.rev != cur.addr) ||
			(st != leafTorn && s.reused(cur, v.birth)) || (st == leafTorn && s.mayBeReused(cur)):
			if locked {
				s.unlockAsync(ctx, cur.sl)
				if st == leafOK && v.rev != cur.addr && !cur.cached {
					// Possibly a move that died before pointing the leaf at
					// its new slot (docs/smart-node-growth.md).
					if _, err := s.unfinishedMove(ctx, cur, v.rev); err != nil {
						return 0, v, cur, err
					}
				}
			} else if st == leafRetired && lockOld != lockRetired {
				// Retired under a lock: an unlink in progress, or one whose
				// client died before or after its slot CAS (I9).
				if err := s.recoverHeld(ctx, &s.watch, cur.sl, lockOld, s.waits); err != nil {
					return 0, v, cur, err
				}
			}
			cur, err = s.reread(ctx, cur)
			return leafMoved, v, cur, err
		case st == leafTorn:
			// A WRITE still landing: its holder's, or under a free lock the
			// previous holder's (I7). Wait as for a held lock.
			if locked {
				s.t.tornLocked.Add(1)
				s.unlockAsync(ctx, cur.sl)
			}
			if err := s.lockWait(ctx, &watch, cur.sl, lockOld, attempt); err != nil {
				return 0, v, cur, err
			}
		case s.lost():
			// What the leaf holds may be another life of it (I8).
			if locked {
				s.unlockAsync(ctx, cur.sl)
			}
			return 0, v, cur, errRestart
		case !v.matches(key) && (locked || !split):
			if locked && !split {
				s.unlockAsync(ctx, cur.sl)
			}
			return leafOther, v, cur, nil
		case !locked:
			if err := s.lockWait(ctx, &watch, cur.sl, lockOld, attempt); err != nil {
				return 0, v, cur, err
			}
		default:
			return leafLocked, v, cur, nil
		}
	}
}

// lockWait is lockLeaf's wait on its attempt-th try for the holder of the
// lock word held (0: the lock was free but the leaf torn): past
// maxLockAttempts the operation fails with ErrContention; otherwise the
// holder is judged every judgeEvery attempts (recovered if dead), and the
// session backs off.
func (s *session) lockWait(ctx context.Context, w *registry.Watch, sl slot, held uint64, attempt int) error {
	switch {
	case attempt >= maxLockAttempts && held == 0:
		return fmt.Errorf("%w: leaf %v torn under a free lock for %d attempts (a WRITE that never finished landing: docs/recovery.md, \"Stale writers\")",
			ErrContention, sl.addr(), attempt)
	case attempt >= maxLockAttempts:
		return fmt.Errorf("%w: leaf lock at %v held by %#x for %d attempts", ErrContention, sl.addr(), held, attempt)
	}
	if err := s.recoverHeld(ctx, w, sl, held, attempt); err != nil {
		return err
	}
	s.c.Backoff(attempt)
	s.touchIn(ctx)
	return nil
}

// lockAndRead tries to take the rear lock of the leaf sl points to and reads
// the leaf in the same round trip (the READ executes after the CAS, so if
// the CAS succeeded the leaf is stable).
func (s *session) lockAndRead(ctx context.Context, sl slot) (leafView, leafState, uint64, error) {
	n := classBytes(sl.leafClass())
	s.leafBuf = grow(s.leafBuf, n)
	lockAddr := sl.addr().Add(uint64(n - 8))
	ops := append(s.batch(), remote.CAS(lockAddr, 0, s.lockTag()), remote.Read(sl.addr(), s.leafBuf))
	s.lockFrom, s.lockBits = s.m.LockedAt(s.c.Now()), 0
	if err := s.do(ctx, ops); err != nil {
		return leafView{}, 0, 0, err
	}
	v, st := s.t.lf.parse(s.leafBuf, sl.leafClass())
	return v, st, ops[0].Old, nil
}

// leafLockAddr returns the address of the lock word of the leaf sl points
// to (its last word).
func leafLockAddr(sl slot) remote.Addr {
	return sl.addr().Add(uint64(classBytes(sl.leafClass()) - 8))
}

// lockStartsLine reports whether the lock word of the leaf sl points to
// starts a line (Tree.line), so that the meta word before it lies on
// another: an in-place update then releases with a WRITE of its own (I7).
func (t *Tree) lockStartsLine(sl slot) bool { return uint64(leafLockAddr(sl).Offset())%t.line == 0 }

// leafMetaAddr returns the address of the meta word of the leaf sl points
// to (the word before its lock word).
func leafMetaAddr(sl slot) remote.Addr {
	return sl.addr().Add(uint64(classBytes(sl.leafClass()) - 16))
}

// unlockAsync releases a leaf lock without waiting (the protocol does not
// depend on when it lands). Like every batch under the lock it leaves by
// the lock's deadline (stillHeld, without a heartbeat of its own the first
// time, so that it posts no verb the release did not): a holder paused
// past the lease whose lock a waiter took over releases nothing, since
// its WRITE would release the new holder's lock (RunStalls, seed 2120 of
// the locked-internal battery: a split found its leaf split by another
// holder under its own lock).
func (s *session) unlockAsync(ctx context.Context, sl slot) {
	ctx = context.WithoutCancel(ctx)
	lockAddr := leafLockAddr(sl)
	check := s.stillHeld
	for late := 0; ; late++ {
		if s.lateAgain(late) {
			_ = s.abandon(ctx, "a leaf lock's release", late) // the caller goes on without the lock
			return
		}
		by, err := check(ctx, lockAddr)
		if err == errNodeLost {
			continue // a node lock held too was taken over; the leaf's is kept
		}
		if err != nil {
			return // taken over (the lock is the repairer's), or the pool failed
		}
		check = s.holding // late: the heartbeat too, or the deadline stays past
		s.img = putWord(s.img[:0], 0)
		ops := append(s.batch(), remote.Write(lockAddr, s.img))
		s.ops = ops
		if err := s.c.PostBy(ctx, ops, by); !errors.Is(err, remote.ErrLate) {
			return // a failure means the pool is closed
		}
	}
}

// writeInPlace writes the new value into a locked leaf born in epoch
// birth and releases the lock. By default one WRITE carries the data and,
// in its last word, the release (invariant I7: the next holder validates
// what it reads before acting on it, and every line of the WRITE has landed
// before that holder's READ completes). The WRITE starts at the value (the
// reverse pointer and the key stay as they are) and ends with the meta word
// (the word before the lock). Options.Release selects a second WRITE of the
// lock word in the same batch (after every data line, by posting order) or
// in a third round trip.
func (s *session) writeInPlace(ctx context.Context, sl slot, key, value []byte, birth uint32) error {
	class := sl.leafClass()
	n := classBytes(class)
	s.img = grow(s.img, n)
	s.t.lf.fill(s.img, key, value, class, birth) // the same leaf: its birth stays
	// The release rides in the data's WRITE only if the lock word shares
	// a line with the meta word (I7): a holder that finds the lock free
	// then reads the new meta word, whose checksum tells any line still
	// landing. Otherwise a second WRITE in the batch releases it, after
	// every line of the first.
	release := s.t.opts.Release
	if release == ReleaseInWrite && s.t.lockStartsLine(sl) {
		release = ReleaseSecondWrite
	}
	last := n - 8
	if release == ReleaseInWrite {
		last = n
	}
	from := leafKeyOff + len(key)
	a := sl.addr()
	// I9: the redo record first, on the leaf's memory node, so that no byte
	// of the leaf changes before it has landed. Its image is the data part
	// from the value to the meta word: where it ends tells a repairer the
	// leaf's class and address (redoLeaf).
	ops, err := s.redoOps(ctx, s.batch(), a.Add(uint64(from)), s.img[from:n-8])
	if err != nil {
		s.unlockAsync(ctx, sl) // nothing was written
		return err
	}
	lock := leafLockAddr(sl)
	ops = append(ops, remote.Write(a.Add(uint64(from)), s.img[from:last]))
	switch release {
	case ReleaseInWrite:
		return s.doUnder(ctx, lock, ops)
	case ReleaseRoundTrip:
		if err := s.doUnder(ctx, lock, ops); err != nil {
			return err
		}
		ops = s.batch()
	}
	return s.doUnder(ctx, lock, append(ops, remote.Write(a.Add(uint64(n-8)), s.img[n-8:n])))
}

// moveLeaf replaces a locked leaf whose new value does not fit its size
// class. The old leaf's valid bit is cleared before the slot CAS that links
// the new leaf: a reader that reaches the old leaf through a stale path then
// reads its slot, and uses the old (frozen) content only while the slot still
// holds it, i.e. before the update linearizes. After the CAS the old leaf's
// lock is retired for good before returning.
func (s *session) moveLeaf(ctx context.Context, cur cursor, meta uint64, key, value []byte) (bool, cursor, error) {
	old := cur.sl
	class := s.t.lf.classOf(key, value)
	na, err := s.allocLeaf(ctx, cur.addr.MN(), class)
	if err != nil {
		// No memory node has room (or the pool closed): nothing changed;
		// give the leaf back and fail, since a retry would find the same
		// leaf and the same shortage.
		uerr := s.unlock(ctx, old, meta)
		if uerr == errRestart {
			uerr = nil // the lock was lost meanwhile: nothing to give back
		}
		return false, cur, errors.Join(err, uerr)
	}
	return s.moveLeafTo(ctx, cur, meta, key, value, na, class)
}

// moveLeafTo is moveLeaf into na, a leaf of class class allocated for it
// and never linked. When the move fails where its slot CAS cannot have
// linked na (the lock was lost, errRestart; the slot was frozen), na is
// given back (dropUnlinked); after other failures it leaks.
func (s *session) moveLeafTo(ctx context.Context, cur cursor, meta uint64, key, value []byte, na remote.Addr, class int) (bool, cursor, error) {
	old := cur.sl
	// Out-of-place update:
	//  1. W(L') and W(L.meta without valid): I3, L' complete before it is
	//     linked; I6, L marked before the slot stops leading to it.
	//  2. CAS(slot: L → L') publishes (I1).
	//  3. W(L.lock = RETIRED) before returning (I4, I5).
	s.img = s.t.lf.image(s.img, cur.addr, key, value, class, s.t.epoch())
	ops := s.markRemoved(append(s.batch(), remote.Write(na, s.img)), old, meta)
	ops, err := s.linkUnder(ctx, leafLockAddr(old), ops, remote.CAS(cur.addr, uint64(cur.sl), uint64(leafSlot(cur.sl.partial(), class, na))))
	if err != nil {
		if err == errRestart {
			s.dropUnlinked(na, class) // the lock was lost: never linked
		}
		return false, cur, err
	}
	if got := slot(ops[len(ops)-1].Old); got != cur.sl {
		if got == cur.sl|slotFrozen {
			// The node holding the slot is moving: undo and start again.
			s.dropUnlinked(na, class)
			return false, cur.with(got), s.unlock(ctx, old, meta)
		}
		return false, cur, lockedSlotChanged(cur, got)
	}
	return true, cur, s.retire(ctx, old)
}

// lockedSlotChanged reports the slot of a leaf locked by this session found
// changed by a CAS. Only the holder of a leaf's lock changes the slot that
// holds it (updates, deletes and splits all take the lock), and lockLeaf
// checked that the slot was the leaf's, by its reverse pointer, under the
// lock: the lock was taken over while this client was stalled past the
// lease (docs/recovery.md, "Stale writers"), so it is not this session's
// to release any more, and nothing more is written.
func lockedSlotChanged(cur cursor, got slot) error {
	return fmt.Errorf("%w: slot %v of leaf %v changed to %v under the leaf's lock", ErrLeaseLost, cur.addr, cur.sl.addr(), got)
}

// markRemoved appends the WRITE that clears the valid bit of the leaf sl
// points to (whose meta word is meta).
func (s *session) markRemoved(ops []remote.Op, sl slot, meta uint64) []remote.Op {
	binary.LittleEndian.PutUint64(s.meta[:], meta&^metaValidBit)
	return append(ops, remote.Write(leafMetaAddr(sl), s.meta[:]))
}

// retire retires the lock of a locked, unlinked leaf (I4) and hands the
// leaf to reclamation (I8).
func (s *session) retire(ctx context.Context, sl slot) error {
	binary.LittleEndian.PutUint64(s.meta[:], lockRetired)
	switch err := s.doUnder(context.WithoutCancel(ctx), leafLockAddr(sl), append(s.batch(), remote.Write(leafLockAddr(sl), s.meta[:]))); err {
	case nil:
		s.retireLeaf(sl)
		return nil
	case errRestart:
		// Taken over while the client was silent: the repairer finds the
		// leaf unlinked and retires it (recover.go).
		return nil
	default:
		return err
	}
}

// unlock restores a leaf that the session locked, or took over as a
// repairer, and that stays linked: valid again (meta) and its lock free,
// the release after the meta in one batch, posted by doUnder.
func (s *session) unlock(ctx context.Context, sl slot, meta uint64) error {
	binary.LittleEndian.PutUint64(s.meta[:], meta|metaValidBit)
	ops := append(s.batch(), remote.Write(leafMetaAddr(sl), s.meta[:]),
		remote.Write(leafLockAddr(sl), zeroWord[:]))
	return s.doUnder(context.WithoutCancel(ctx), leafLockAddr(sl), ops)
}

// installLeaf replaces a tombstone slot with a new leaf, written on the
// slot's memory node in the same batch as the CAS that links it (or, if that
// node is full, on another one in a round trip of its own): I3, complete
// before linked; the tombstone kept the partial key (I1, I2), so the CAS
// fails only if another operation changed this very slot.
func (s *session) installLeaf(ctx context.Context, cur cursor, key, value []byte) (bool, cursor, error) {
	class := s.t.lf.classOf(key, value)
	na, err := s.allocLeaf(ctx, cur.addr.MN(), class)
	if err != nil {
		return false, cur, err
	}
	s.img = s.t.lf.image(s.img, cur.addr, key, value, class, s.t.epoch())
	ops, err := s.link(ctx, append(s.batch(), remote.Write(na, s.img)),
		remote.CAS(cur.addr, uint64(cur.sl), uint64(leafSlot(cur.sl.partial(), class, na))))
	if err != nil {
		return false, cur, err
	}
	if got := slot(ops[len(ops)-1].Old); got != cur.sl {
		s.dropUnlinked(na, class)
		return false, cur.with(got), nil
	}
	return true, cur, nil
}
