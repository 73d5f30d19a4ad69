package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// Crash recovery (docs/recovery.md; invariant I9 of docs/smart-protocol.md).
//
// Lock words hold registry tags. A waiter that keeps finding a leaf lock
// held judges the holder every judgeEvery attempts (registry.Node.Dead: one
// READ; dead at once if the tree saw the holder's client stop, after a lease
// if its compute node went silent). A dead holder's lock is taken over with
//
//	[CAS(L.lock: dead → own tag | repairBit), R(L)]
//
// which only one waiter wins; the winner repairs L from what it read and
// releases it:
//
//   - torn (a WRITE cut by the crash): rewrite it from the dead holder's
//     redo record on L's memory node, which names L and landed in full
//     before any byte of L changed (same memory node, posting order);
//   - valid bit clear (the holder was deleting L or moving it out of
//     place): if L's slot, named by its reverse pointer, still holds L, the
//     unlink never happened: W(L.meta with valid), release; otherwise it
//     happened: W(L.lock = RETIRED) (I4) and hand L to reclamation;
//   - otherwise the holder died between its lock and its write, after its
//     write and before the release, or in a split: point the reverse
//     pointer at the slot a descent by L's key finds L in (a split moves it
//     to its new node before its slot CAS), and release.
//
// Every step is decided from remote state only and is idempotent, so a
// repairer that dies mid-repair leaves its own tag, and the next one starts
// over; a repairer paused past a lease checks its lock before each write,
// as a holder does (takeOver, doUnder), and writes nothing more once the
// lock was taken over from it. A header split's moving flag carries no
// owner, only a nonce that tells it from a later flag on the same word
// (revNonce); waitMoving judges it by time and repairFlag finishes or
// undoes the split.

// repairBit marks a lock word taken over by a repairer.
const repairBit = 1 << 61

// judgeEvery is how many attempts on a held lock pass between two
// judgements of its holder.
const judgeEvery = 16

// replace drops a session whose client crashed (an injected fault stopped
// it, or it lost the outcome of a batch that may have changed remote
// memory: remote.Client.Crashed): the registry learns at once that its tag
// is dead (so its locks are recovered without waiting for a lease), a
// moving flag it left set is repaired at once (repairCrashed), and the
// next operation gets a new session with a new client of the compute node.
func (t *Tree) replace(s *session) {
	t.rstats.crashed.Add(1)
	marked := s.m == nil
	try := !marked
	for repairs := 0; ; {
		// The member must be marked dead: its compute node's heartbeat goes
		// on, so nothing else would ever judge its locks free. It is marked
		// under the context of the operation that crashed. A client that
		// an injected fault stops doing it is replaced in turn, and the
		// next one tries again; if the marking fails otherwise (the
		// registry's memory node does not answer, the context ended), the
		// member is kept for the next operations to mark (bury) rather
		// than tried again here with one new client after another.
		ns := t.newSession()
		if try {
			err := s.m.MarkDead(s.ctx, ns.c)
			marked, try = err == nil, errors.Is(err, remote.ErrCrashed)
		}
		if s.flag.set && !ns.c.Crashed() && repairs < maxCrashRepairs {
			// A repair whose clients keep crashing is left to the
			// waiters, which repair a flag that stood still for a lease:
			// retried without end here, it would hold the operation (and,
			// under fault injection that stops the next client to post,
			// every repairer) forever.
			repairs++
			ns.repairCrashed(s.flag)
		}
		if ns.c.Crashed() {
			t.rstats.crashed.Add(1)
			continue
		}
		if !marked {
			t.bury(s.m)
		}
		t.mu.Lock()
		t.free = append(t.free, ns)
		t.mu.Unlock()
		return
	}
}

// replaceIdle replaces the free sessions whose clients crashed while
// nobody used them (a connection that carried a release they posted
// unsignaled broke: remote.Client.Crashed), as release replaces a session
// whose client crashed in its operation: a lock whose release may be lost
// would otherwise keep the tag of a client that no operation uses, whose
// member stays live. n is the compute node's count of crashed clients;
// ctx is the context of the operation that looks, which bounds the
// markings (replace marks under the session's context).
func (t *Tree) replaceIdle(ctx context.Context, n uint64) {
	t.crashesSeen.Store(n)
	var crashed []*session
	t.mu.Lock()
	t.free = slices.DeleteFunc(t.free, func(s *session) bool {
		if !s.c.Crashed() {
			return false
		}
		crashed = append(crashed, s) // in the same pass: a client may crash meanwhile
		return true
	})
	t.mu.Unlock()
	for _, s := range crashed {
		s.ctx = ctx
		t.replace(s)
	}
}

// bury keeps m, the member of a crashed client that could not be marked
// dead, for the next operations of the compute node to mark (markBuried).
// Until then it holds its registry slot, its state says live and its
// compute node's heartbeat goes on: nobody would ever judge a lock holding
// its tag free, so it must not be forgotten.
func (t *Tree) bury(m *registry.Member) {
	t.mu.Lock()
	t.unburied = append(t.unburied, m)
	t.hasUnburied.Store(true)
	t.mu.Unlock()
}

// markBuried marks the members that crashed clients left unmarked (bury)
// dead, with the session's client, under the operation's context (begin
// calls it, and Recover's begin before its walk, so that it recovers their
// locks); those it cannot mark stay for the next operation, and the error
// is returned. It first reads the registry (registry.Node.Reachable), so
// that its client is not stopped by a write to a memory node still down.
func (s *session) markBuried() error {
	t := s.t
	if err := t.reg.Reachable(s.ctx, s.c); err != nil {
		return wrapRemote(err)
	}
	t.mu.Lock()
	ms := t.unburied
	t.unburied = nil
	t.hasUnburied.Store(false)
	t.mu.Unlock()
	for i, m := range ms {
		if err := m.MarkDead(s.ctx, s.c); err != nil {
			t.mu.Lock()
			t.unburied = append(t.unburied, ms[i:]...)
			t.hasUnburied.Store(true)
			t.mu.Unlock()
			return wrapRemote(err)
		}
	}
	return nil
}

// maxCrashRepairs bounds the repairs of one crashed session's moving flag
// that replace tries, each with a new client.
const maxCrashRepairs = 4

// flagHold is a moving flag a session set (a move's or a split's mark,
// I6): the reverse pointer's address, the value the flag CAS wrote, and
// the cursor of the slot that led to the flagged object.
type flagHold struct {
	set              bool
	cur              cursor
	revAddr, flagged remote.Addr
}

// flagOf returns the reverse pointer rev flagged by the session's next
// moving flag: revMoving and a nonce (revNonce) drawn from the session's
// registry tag, unique in the cluster, and the count of its flags, so that
// two flags set on one word one after the other differ but by a chance of
// one in 1,024, and a run in the simulator repeats exactly.
func (s *session) flagOf(rev remote.Addr) remote.Addr {
	s.flags++
	x := s.flags*0x9e3779b97f4a7c15 ^ s.m.Tag()*0xbf58476d1ce4e5b9
	x ^= x >> 29
	x *= 0x94d049bb133111eb
	x ^= x >> 32
	return rev | revMoving | remote.Addr(x&0x7f)<<56 | remote.Addr(x>>7&7)
}

// holdFlag records that the session set a moving flag; dropFlag forgets it
// when the session is done with it.
func (s *session) holdFlag(cur cursor, revAddr, flagged remote.Addr) {
	s.flag = flagHold{set: true, cur: cur, revAddr: revAddr, flagged: flagged}
}

// dropFlag forgets the moving flag the session held, unless its client
// crashed: replace then repairs the flag.
func (s *session) dropFlag() {
	if !s.c.Crashed() {
		s.flag = flagHold{}
	}
}

// repairCrashed repairs the moving flag f that a crashed session of this
// compute node may have left set. A waiter repairs a flag only after it
// stood still for a lease (waitMoving), since its owner may be slow rather
// than gone; this one's client is known to be stopped for good (no verb of
// it lands any more), so the same repair (repairFlag: finish a move that
// froze anything, else undo the flag) runs at once. A flag no longer
// holding the value the crashed CAS wrote (it never landed, was cleared,
// or its address part moved with a parent's move) is left to the waiters.
func (s *session) repairCrashed(f flagHold) {
	if err := s.begin(); err != nil {
		return
	}
	defer s.end()
	ctx := context.Background()
	w, err := s.readWord(ctx, f.revAddr)
	if err != nil || remote.Addr(w) != f.flagged {
		return
	}
	_ = s.repairFlag(f.cur, f.revAddr)(ctx, f.flagged)
}

// holding is called after the session took a leaf's lock, and by doUnder
// before each batch written under it (docs/recovery.md, "Stale writers").
// It sends the heartbeat if one is due; if any client of the compute node
// found it silent for half a lease since the lock was taken
// (registry.Node.Judged: other nodes may have judged this client dead and
// taken the lock over), the client takes a new incarnation and moves the
// lock word to its new tag with a CAS, which fails if the lock was taken
// over (and makes every waiter's takeover of the old tag fail from then
// on). The lock is then the repairer's, the session has written nothing
// under it since this check last passed, and the operation starts again
// (errRestart). It returns the deadline of the batch that follows
// (registry.Node.WriteBy, read before the check so that a heartbeat ending
// a gap after the check is too late for it).
//
// In the locked-internal variant the session may hold a node lock too
// (session.nodeLock; lockAddr nil if it holds no leaf lock): the check
// covers it from the time it was taken, and the renewal moves both words
// to the new tag in one round trip, so that no word keeps the incarnation
// that waiters now judge dead at once. If the leaf lock was taken over, a
// node lock still held is given back (errRestart); if only the node lock
// was, holding reports errNodeLost.
func (s *session) holding(ctx context.Context, lockAddr remote.Addr) (time.Duration, error) {
	if _, err := s.m.Touch(ctx, s.c); err != nil {
		return 0, wrapRemote(err)
	}
	return s.stillHeld(ctx, lockAddr)
}

// stillHeld is holding without the heartbeat: the check, the renewal if
// the node may have been judged, and the deadline.
func (s *session) stillHeld(ctx context.Context, lockAddr remote.Addr) (time.Duration, error) {
	by := s.t.reg.WriteBy()
	from := s.lockFrom
	switch {
	case lockAddr.IsNil():
		from = s.nodeFrom
	case !s.nodeLock.IsNil():
		from = min(from, s.nodeFrom)
	}
	if !s.t.reg.Judged(from, s.c.Now()) {
		return by, nil
	}
	old, err := s.m.Renew(ctx, s.c)
	if err != nil {
		return 0, wrapRemote(err)
	}
	tag, now := s.lockTag(), s.c.Now()
	ops := s.lockOps[:0]
	if !lockAddr.IsNil() {
		ops = append(ops, remote.CAS(lockAddr, old|s.lockBits, tag|s.lockBits))
		s.lockFrom = now
	}
	if !s.nodeLock.IsNil() {
		ops = append(ops, remote.CAS(s.nodeLock, s.nodeTag, tag))
		s.nodeFrom, s.nodeTag = now, tag
	}
	if err := s.c.Do(ctx, ops); err != nil {
		return 0, err
	}
	if !lockAddr.IsNil() && !ops[0].Succeeded() {
		if !s.nodeLock.IsNil() && ops[1].Succeeded() {
			if err := s.giveBack(ctx); err != nil {
				return 0, err
			}
		}
		s.nodeLock = 0
		return 0, errRestart
	}
	if !s.nodeLock.IsNil() && !ops[len(ops)-1].Succeeded() {
		s.nodeLock = 0
		return 0, errNodeLost
	}
	return s.t.reg.WriteBy(), nil
}

// doUnder executes ops, a batch written under the lock whose word is at
// lock (a leaf's; the node lock the session holds in the locked-internal
// variant; nil: none, a plain do): holding confirms the lock, and the batch
// must leave by the deadline it returns (remote.Client.DoBy); if it would
// leave later (the client stalled), nothing of it runs and the check runs
// again. If the batch is under the node lock alone and a waiter took it
// over, nothing of it runs and doUnder returns errRestart; under a leaf
// lock, a node lock held besides that was taken over is errNodeLost.
func (s *session) doUnder(ctx context.Context, lock remote.Addr, ops []remote.Op) error {
	if lock.IsNil() {
		return s.do(ctx, ops)
	}
	leaf := lock
	if lock == s.nodeLock {
		leaf = 0 // holding covers the node lock the session holds
	}
	s.ops = ops
	for late := 0; ; late++ {
		if s.lateAgain(late) {
			return s.abandon(ctx, "a batch under a lock", late)
		}
		by, err := s.holding(ctx, leaf)
		switch {
		case err == errNodeLost && leaf.IsNil():
			return errRestart
		case err != nil:
			return err
		}
		if err := s.c.DoBy(ctx, ops, by); !errors.Is(err, remote.ErrLate) {
			return err
		}
	}
}

// lateAgain bounds the loops that check a lock again and post a batch by
// the deadline the check returns, and post nothing past it
// (remote.ErrLate): it reports whether late batches in a row exhaust the
// retry budget. Each check renews what was judged, so a batch is late again
// only if the client takes half a lease from a check to its post: a lease
// too short for the client's latency (an Options.Lease of a nanosecond has
// every batch late), which would otherwise loop for ever.
func (s *session) lateAgain(late int) bool { return late >= s.t.retryBudget }

// abandon ends the locks the session holds when no batch under them could
// be posted in time (lateAgain), and returns an error wrapping
// ErrContention that says what was late: the client takes a new
// incarnation without moving its lock words, so that a waiter judges
// every lock word still holding the old tag dead at once
// (registry.Node.Dead) and repairs it as a crashed client's
// (docs/recovery.md). Nothing under the locks is undone, as nothing of a
// crashed client's is.
func (s *session) abandon(ctx context.Context, what string, late int) error {
	err := fmt.Errorf("%w: %s was past its deadline %d times in a row (Options.Lease %v too short for the client's latency?)",
		ErrContention, what, late, s.t.reg.Lease())
	s.nodeLock = 0
	if _, rerr := s.m.Renew(ctx, s.c); rerr != nil {
		return errors.Join(err, wrapRemote(rerr))
	}
	return err
}

// commitBy is the deadline of the commit of a header split's or a move's
// moving flag whose CAS this session posted at time at: the split's
// publishing CAS, the move's first freeze. The flag carries no owner: a
// waiter undoes it once it stood still for a lease on the waiter's clock
// (waitMoving, repairFlag), which starts after the flag landed; half a
// lease is left for clocks and the network. A commit that would leave
// later is not posted (remote.ErrLate), and the setter takes its flag back
// (clearFlag: the nonce tells it from a flag another operation set since).
// Once committed, a flag is finished by whoever judges it, never undone.
func (s *session) commitBy(at time.Duration) time.Duration { return at + s.t.reg.Lease()/2 }

// holderDead judges the holder of a lock word found held (a tag, possibly
// with repairBit) for a waiter on its attempt-th try. Only every judgeEvery
// attempts does it cost a READ. First it tries again to mark dead the
// crashed clients that could not be marked yet (markBuried): the holder may
// be one of them, which nothing else would ever judge dead, and the other
// operations of the compute node may all be waiting behind this one.
func (s *session) holderDead(ctx context.Context, w *registry.Watch, word uint64, attempt int) (bool, error) {
	if attempt%judgeEvery != judgeEvery-1 || !registry.IsTag(word) {
		return false, nil
	}
	if s.t.hasUnburied.Load() {
		_ = s.markBuried()
	}
	dead, err := s.t.reg.Dead(ctx, s.c, w, word)
	return dead, wrapRemote(err)
}

// recoverHeld is a waiter's step on the leaf sl points to, whose lock it
// found holding word on its attempt-th try: every judgeEvery attempts it
// judges the holder and, if dead, recovers the leaf (the caller then reads
// it again).
func (s *session) recoverHeld(ctx context.Context, w *registry.Watch, sl slot, word uint64, attempt int) error {
	dead, err := s.holderDead(ctx, w, word, attempt)
	if err != nil || !dead {
		return err
	}
	_, err = s.recoverLeaf(ctx, sl.addr(), sl.leafClass(), word, w.ActBy())
	return err
}

// judgeLeaf is recoverHeld for a reader whose leaf READ left the lock word
// out (leafReadBytes): on the attempts that judge the holder it reads the
// word first.
func (s *session) judgeLeaf(ctx context.Context, sl slot, attempt int) error {
	if attempt%judgeEvery != judgeEvery-1 {
		return nil
	}
	w, err := s.readWord(ctx, leafLockAddr(sl))
	if err != nil {
		return err
	}
	return s.recoverHeld(ctx, &s.watch, sl, w, attempt)
}

// recoverLeaf takes over the lock of the leaf of class class at a, held by
// the dead tag dead, repairs what its holder left and releases it. It
// reports false if the lock word no longer held dead (another repairer won,
// or the holder released it after all) or if the takeover would have left
// after by, the deadline of the judgement (registry.Watch.ActBy): the
// caller judges again.
//
// Before the takeover it copies the dead holder's redo record of this leaf,
// if there is one, into its own redo slot: a repairer that dies in turn
// leaves its tag in the lock, and the next one finds the record through
// that tag. Records carry the writer's client slot (registry.SlotOf), not
// its incarnation, and are looked up by it: a new incarnation of the dead
// holder's slot that repairs the leaf (settle) rewrites the record in the
// slot it shares with the dead holder, and if it dies before its lock CAS
// the next repairer, looking up the dead holder, still finds the record.
func (s *session) recoverLeaf(ctx context.Context, a remote.Addr, class int, dead uint64, by time.Duration) (bool, error) {
	ctx = context.WithoutCancel(ctx) // a lock taken over is always released
	buf, rec, ok, err := s.takeOver(ctx, a, class, dead, by)
	if !ok || err != nil {
		return false, err
	}
	return true, s.repairLeaf(ctx, a, class, buf, dead, rec)
}

// takeOver is recoverLeaf's takeover: it reports whether the session now
// holds the lock of the leaf at a, as a repairer (lockBits: repairBit),
// with the leaf as read by the takeover's batch in buf and the dead
// holder's redo record of it (a zero Target if none). Like a lock the
// session takes itself, the lock counts from registry.Member.LockedAt of
// the takeover's posting (lockFrom): every batch the repair writes under it
// goes through doUnder, so that a repairer paused past a lease, whose lock
// a waiter judged dead and took over in turn, writes nothing more
// (docs/recovery.md, "Stale writers").
func (s *session) takeOver(ctx context.Context, a remote.Addr, class int, dead uint64, by time.Duration) ([]byte, registry.Redo, bool, error) {
	n := classBytes(class)
	rec, ok, err := s.carryRedo(ctx, a, n, dead)
	if err != nil {
		return nil, rec, false, err
	}
	buf := make([]byte, n)
	ops := append(s.batch(), remote.CAS(a.Add(uint64(n-8)), dead, s.lockTag()|repairBit), remote.Read(a, buf))
	s.ops = ops
	from := s.m.LockedAt(s.c.Now())
	if err := s.c.DoBy(ctx, ops, by); errors.Is(err, remote.ErrLate) {
		return nil, rec, false, nil // the judgement is too old to act on: judge again
	} else if err != nil {
		return nil, rec, false, err
	}
	if !ops[0].Succeeded() {
		return nil, rec, false, nil
	}
	s.lockFrom, s.lockBits = from, repairBit
	s.t.rstats.recovered.Add(1)
	if !ok {
		rec = registry.Redo{}
	}
	return buf, rec, true, nil
}

// carryRedo reads the redo record that the holder of tag dead left for the
// leaf of n bytes at a, and writes it into the session's own redo slot
// under its own client slot (ok is false if there is none).
func (s *session) carryRedo(ctx context.Context, a remote.Addr, n int, dead uint64) (registry.Redo, bool, error) {
	if s.t.opts.NoRedo {
		return registry.Redo{}, false, nil
	}
	rec, ok, err := s.t.reg.RedoOf(ctx, s.c, registry.SlotOf(dead), a.MN())
	if err != nil || !ok || rec.Target < a || uint64(rec.Target-a)+uint64(len(rec.Image)) > uint64(n) {
		return registry.Redo{}, false, wrapRemote(err)
	}
	at, err := s.m.RedoSlot(ctx, s.c, a.MN(), len(rec.Image), nil)
	if err != nil {
		return registry.Redo{}, false, wrapRemote(err)
	}
	s.redo = registry.AppendRedo(s.redo[:0], rec.Target, registry.SlotOf(s.lockTag()), rec.Image)
	return rec, true, s.c.Write(ctx, at, s.redo)
}

// repairLeaf repairs the leaf at a, read into buf after its lock was taken
// over from dead, and releases the lock (see the top of this file). rec is
// the dead holder's redo record of the leaf, if it left one (a zero Target
// otherwise).
func (s *session) repairLeaf(ctx context.Context, a remote.Addr, class int, buf []byte, dead uint64, rec registry.Redo) error {
	n := classBytes(class)
	lockAddr := a.Add(uint64(n - 8))
	v, st := s.t.lf.parse(buf, class)
	if st == leafTorn {
		if ra, rc, ok := redoLeaf(rec.Target, rec.Image); !ok || ra != a || rc != class {
			return s.unrepairable(ctx, lockAddr, dead, corruptf("I9: leaf %v: torn by the dead writer %#x, which left no redo record of it", a, dead))
		}
		copy(buf[rec.Target-a:], rec.Image)
		if v, st = s.t.lf.parse(buf, class); st == leafTorn {
			return s.unrepairable(ctx, lockAddr, dead, corruptf("I9: leaf %v: still torn after the redo record of %#x", a, dead))
		}
		// The data part; the lock word stays ours.
		if err := s.doUnder(ctx, lockAddr, append(s.batch(), remote.Write(rec.Target, rec.Image))); err != nil {
			return err
		}
	}
	if st == leafRetired {
		linked, err := s.stillLinked(ctx, a, v.rev)
		switch {
		case err != nil:
			return err
		case linked:
			return s.unlock(ctx, leafSlot(0, class, a), v.meta)
		}
		return s.retire(ctx, leafSlot(0, class, a))
	}
	if err := s.relink(ctx, a, lockAddr, v.key, v.rev); err != nil {
		return err
	}
	return s.doUnder(ctx, lockAddr, append(s.batch(), remote.Write(lockAddr, zeroWord[:])))
}

// unrepairable gives the lock of a leaf that its repair cannot repair
// (torn, with no usable redo record: Options.NoRedo) back to the dead tag
// it was taken over from, and returns err (ErrCorrupt). Left with the
// repairer's tag, the lock would hold every later operation on the key
// until its retry budget ran out (ErrContention), and the repairer's own
// Recover would find nothing to recover; under the dead tag every one of
// them takes it over in turn, finds the leaf torn and fails with
// ErrCorrupt, as Options.NoRedo says.
func (s *session) unrepairable(ctx context.Context, lockAddr remote.Addr, dead uint64, err error) error {
	back := append(s.batch(), remote.CAS(lockAddr, s.lockTag()|s.lockBits, dead))
	return errors.Join(err, s.c.Do(ctx, back))
}

// stillLinked reports whether the slot named by rev, the reverse pointer of
// the locked leaf at a, still holds the leaf. Nothing moves a locked leaf
// (splits take its lock too), and every holder leaves the pointer right
// before it releases (a repair moves it back, relink), so one read of the
// slot decides.
func (s *session) stillLinked(ctx context.Context, a, rev remote.Addr) (bool, error) {
	w, err := s.readWord(ctx, rev)
	if err != nil {
		return false, err
	}
	sl := slot(w)
	return sl.isLeaf() && sl.addr() == a, nil
}

// relink points the reverse pointer of the valid, locked leaf at a, holding
// key, at the slot that links it, found by a descent from the root: a split
// that died after moving the pointer (to its new node) and before or after
// its slot CAS leaves it naming a slot that may or may not be linked. A leaf
// no descent reaches is left alone. The WRITE goes under the leaf's lock,
// whose word is at lockAddr (doUnder).
func (s *session) relink(ctx context.Context, a, lockAddr remote.Addr, key []byte, rev remote.Addr) error {
	// The descent caches what it reads under s.enc's prefixes: it runs on
	// L's key, and the operation's own is put back after.
	opEnc := s.enc
	s.enc = appendEncoded(nil, key)
	defer func() { s.enc = opEnc }()
	var d descent
	for attempt := 0; ; attempt++ {
		root, err := s.root(ctx)
		if err != nil {
			return err
		}
		d, err = s.descend(ctx, s.enc, root)
		if err == errRestart && attempt < s.t.retryBudget {
			s.retries = 0 // a node on the path was moving: this lock is ours until released
			continue
		}
		if err != nil || d.out != atLeaf || d.cur.sl.addr() != a || d.cur.addr == rev {
			return err
		}
		break
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], uint64(d.cur.addr))
	return s.doUnder(ctx, lockAddr, append(s.batch(), remote.Write(a.Add(leafRevOff), w[:])))
}

// settle repairs the leaf named by a redo record that a previous
// incarnation of the session's client slot left, if that incarnation's lock
// still holds it: the record is about to be overwritten, and with it the
// only way to repair the leaf if the cut WRITE tore it.
func (s *session) settle(ctx context.Context) func(registry.Redo) error {
	return func(r registry.Redo) error {
		a, class, ok := redoLeaf(r.Target, r.Image)
		if !ok {
			return nil // not a leaf record of this tree
		}
		n := classBytes(class)
		lock, err := s.readWord(ctx, a.Add(uint64(n-8)))
		if err != nil || !registry.IsTag(lock) || registry.SlotOf(lock) != r.Tag || lock&^repairBit == s.lockTag() {
			return err
		}
		_, err = s.recoverLeaf(ctx, a, class, lock, registry.NoDeadline) // judged by its slot's new incarnation
		return err
	}
}

// redoLeaf returns the leaf that the redo record of an in-place update
// (target, image; writeInPlace) names: the image runs from the value to the
// meta word, which gives the leaf's class, and ends at the leaf's lock
// word. ok is false if the record cannot be such a record (too short, or a
// leaf that would start past the record's target or be misaligned).
func redoLeaf(target remote.Addr, image []byte) (a remote.Addr, class int, ok bool) {
	if len(image) < 8 {
		return 0, 0, false
	}
	class = metaClass(binary.LittleEndian.Uint64(image[len(image)-8:]))
	n := uint64(classBytes(class))
	end := target.Offset() + uint64(len(image)) + 8
	if end < n || target.Offset() <= end-n+leafKeyOff || (end-n)%leafAlign != 0 {
		return 0, 0, false
	}
	return remote.MakeAddr(target.MN(), end-n), class, true
}

// reserveRedo takes the new member's redo slots on every memory node,
// room for the records of leaves of up to 256 bytes, when it registers:
// an in-place update of such a leaf then needs no allocation, so it works
// on a pool that fills up later; a larger one grows its slot on first use.
// A memory node that is full already is skipped: an in-place update on it
// tries again, and fails with ErrOutOfMemory, leaving the leaf unchanged,
// if the node is still full.
func (s *session) reserveRedo(ctx context.Context) error {
	if s.t.opts.NoRedo {
		return nil
	}
	for mn := range s.c.Pool().MemoryNodes() {
		_, err := s.m.RedoSlot(ctx, s.c, mn, 256-registry.RedoHeader, s.settle(ctx))
		if err != nil && !errors.Is(err, remote.ErrOutOfMemory) {
			return wrapRemote(err)
		}
	}
	return nil
}

// redoOps returns the WRITE of the redo record of writing image at target
// under the session's lock, into its redo slot on target's memory node,
// appended to ops, the batch the WRITE follows in (nothing with
// Options.NoRedo).
func (s *session) redoOps(ctx context.Context, ops []remote.Op, target remote.Addr, image []byte) ([]remote.Op, error) {
	if s.t.opts.NoRedo {
		return ops, nil
	}
	at, err := s.m.RedoSlot(ctx, s.c, target.MN(), len(image), s.settle(ctx))
	if err != nil {
		return ops, wrapRemote(err)
	}
	s.redo = registry.AppendRedo(s.redo[:0], target, registry.SlotOf(s.lockTag()), image)
	return append(ops, remote.Write(at, s.redo)), nil
}

// repairFlag returns the repair of a moving flag left on the reverse
// pointer at revAddr of the object cur's slot led to, by a split that
// stood still for a lease: read the slot again; if it still holds the
// object, unfrozen, and the flag names it, the split never published:
// clear the flag.
// If the flag names another slot, the split published and the object is
// now in cur's slot, which the traversal reached through the new node:
// move the reverse pointer there (I5), after lowering a node's header to
// the depth of that slot (the header split's other completing step).
// Anything else is left for the traversal to read again.
func (s *session) repairFlag(cur cursor, revAddr remote.Addr) func(context.Context, remote.Addr) error {
	return func(ctx context.Context, rev remote.Addr) error {
		if !s.t.opts.PaperNodes && !cur.sl.isLeaf() {
			// The flag may be a node move's (docs/smart-node-growth.md): once
			// anything is frozen, it is finished, never undone.
			if moved, _, err := s.repairMove(ctx, cur.sl.addr()); err != nil || moved {
				return err
			}
		}
		w, err := s.readWord(ctx, cur.addr)
		if err != nil || slot(w).isFrozen() || slot(w).addr() != cur.sl.addr() {
			// A frozen slot still names the object, but its node is
			// moving or moved: the object's reverse pointer belongs in the
			// successor's slot (a move keeps the flag there, M4), and the
			// traversal restarts.
			return err
		}
		if revSlot(rev) != cur.addr && !cur.sl.isLeaf() {
			if err := s.lowerTo(ctx, cur.sl.addr(), int(cur.depth)); err != nil {
				return err
			}
		}
		old, err := s.c.CAS(ctx, revAddr, uint64(rev), uint64(cur.addr))
		if err == nil && old == uint64(rev) {
			s.t.rstats.recovered.Add(1)
		}
		return err
	}
}

// lowerTo raises the header depth of the node at a to depth (dropping the
// prefix bytes now matched above it) unless it is there already; if the
// node moved, the depth is raised in its last successor.
func (s *session) lowerTo(ctx context.Context, a remote.Addr, depth int) error {
	hdr := a.Add(nodeHeaderOff)
	w, err := s.readWord(ctx, hdr)
	hops := 0
	for h := header(w); err == nil; h = header(w) {
		if h.isForwarded() {
			// The node moved: its successor took the header as it was
			// (a move after a header split published, before the split
			// raised the depth), so the depth is raised there.
			if hops++; hops > maxMoves {
				return corruptf("node %v: more than %d forwards", a, maxMoves)
			}
			a = h.successor()
			hdr = a.Add(nodeHeaderOff)
			w, err = s.readWord(ctx, hdr)
			continue
		}
		if h.depth() >= depth {
			break
		}
		if depth-h.depth() > h.prefixLen() {
			return corruptf("node %v: header %#x cannot move to depth %d", a, uint64(h), depth)
		}
		w, err = s.c.CAS(ctx, hdr, uint64(h), uint64(h.dropped(depth-h.depth())))
	}
	return err
}
