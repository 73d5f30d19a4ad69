package sherman

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/registry"
	"github.com/dmindex/dmindex/remote"
)

// Crash recovery (docs/sherman-layout.md, "Crash recovery", and
// docs/recovery.md).
//
// Every compute node that opens the tree joins the pool's registry and each
// session registers a member, whose tag is the value the session stores in
// a global lock word. A session whose client crashed is dropped: its member
// is marked dead with another client, and its local lock passes on without
// the global word. A waiter that keeps finding a global word held judges the
// tag in it (registry.Node.Dead); a dead holder's lock is taken over with
// CAS(word: dead → own|repairBit), the page the dead holder may have torn is
// rewritten from its redo record, and the word then holds the repairer's
// tag, which goes on with its own operation.
//
// The redo record: every page WRITE under a lock is preceded, in the same
// batch and on the same memory node, by a record in the writer's redo slot
// there (registry.Member.RedoSlot): target the page, tag the slot's
// identity (registry.SlotOf), image redoMagic|offset followed by the bytes
// written at that offset. A repairer copies the record into its own slot
// before its takeover CAS, in one batch on the word's memory node, so that
// a repairer that dies mid-repair leaves the record in its own slot for the
// next one.

// ErrLeaseLost: the compute node was silent long enough that others may
// have judged it dead, and a lock it held was taken over; the write that
// needed it was not made. It is index.ErrLeaseLost.
var ErrLeaseLost = index.ErrLeaseLost

const (
	// repairBit marks a global word taken over from a dead holder whose
	// page is being repaired (bit 61, docs/recovery.md).
	repairBit = 1 << 61
	// redoMagic is the top 16 bits of a redo image's first word, whose low
	// 48 bits are the offset of the write in its page.
	redoMagic = 0x5348 << 48
	// redoPrefix is the size of that first word.
	redoPrefix = 8
)

// initRedo finds the session's redo slot on every memory node (nothing
// with NoRedo), then settles the records earlier incarnations of its client
// slot left there: a record is overwritten by the session's first write, so
// a lock that a previous incarnation still holds is taken over (and its
// page repaired from the record) first. No lock is held while it runs.
func (s *session) initRedo(ctx context.Context) error {
	t := s.t
	if t.opts.NoRedo {
		return nil
	}
	var inherited []registry.Redo
	keep := func(r registry.Redo) error {
		r.Image = bytes.Clone(r.Image)
		inherited = append(inherited, r)
		return nil
	}
	s.redo = make([]remote.Addr, t.cn.Pool().MemoryNodes())
	for mn := range s.redo {
		a, err := s.m.RedoSlot(ctx, s.c, mn, redoPrefix+t.g.pageBytes, keep)
		if err != nil {
			return fmt.Errorf("sherman: redo slot: %w", err)
		}
		s.redo[mn] = a
	}
	for _, r := range inherited {
		if err := s.settle(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// settle handles record r that an earlier incarnation of the session's
// client slot left: if the global word of r's page still names that slot,
// the session locks the page (taking the word over and repairing the page
// from r, which is still in the slot) and unlocks it.
func (s *session) settle(ctx context.Context, r registry.Redo) error {
	if _, _, ok := s.t.parseImage(r); !ok {
		return nil
	}
	_, word := s.t.locks.lockWord(r.Target)
	var w [8]byte
	if err := s.c.Read(ctx, word, w[:]); err != nil {
		return err
	}
	if v := le.Uint64(w[:]); !registry.IsTag(v) || registry.SlotOf(v) != registry.SlotOf(s.tag) {
		return nil
	}
	return s.lockUnlock(ctx, r.Target)
}

// parseImage decodes a Sherman redo record: the offset in the target page
// and the bytes written there. ok is false for a record that is not one
// (another structure's slot inherited with a registry block) or does not
// fit a page.
func (t *Tree) parseImage(r registry.Redo) (off int, data []byte, ok bool) {
	if len(r.Image) < redoPrefix || r.Target.MN() >= t.cn.Pool().MemoryNodes() {
		return 0, nil, false
	}
	w := le.Uint64(r.Image)
	off, data = int(w&(1<<48-1)), r.Image[redoPrefix:]
	if w&^(1<<48-1) != redoMagic || off+len(data) > t.g.pageBytes {
		return 0, nil, false
	}
	return off, data, true
}

// pageWrite returns the verbs that write b at offset off of page a, whose
// lock the session holds: the redo record of the write into the session's
// slot on a's memory node (unless NoRedo), then the write. They go to
// unlock, which appends the unlock to the same batch.
func (s *session) pageWrite(a remote.Addr, off int, b []byte) []remote.Op {
	w := remote.Write(a.Add(uint64(off)), b)
	if s.t.opts.NoRedo {
		s.wops = append(s.wops[:0], w)
		return s.wops
	}
	s.img = le.AppendUint64(s.img[:0], redoMagic|uint64(off))
	s.img = append(s.img, b...)
	s.rec = registry.AppendRedo(s.rec[:0], a, registry.SlotOf(s.tag), s.img)
	s.wops = append(s.wops[:0], remote.Write(s.redo[a.MN()], s.rec), w)
	return s.wops
}

// touch sends the compute node's heartbeat if one is due (an unsignaled
// WRITE every Lease/10 while the node works), so that others do not judge
// its clients dead while they work or wait; ctx bounds it.
func (s *session) touch(ctx context.Context) {
	_, _ = s.m.Touch(ctx, s.c)
}

// stillHeld is called before a write under h: it sends the heartbeat if one
// is due and, if any client of the compute node found it silent for half a
// lease since h's word was set (registry.Node.Judged: others may have
// judged it dead and may be taking the word over), renews the member's
// incarnation (registry.Member.Renew: the old tag is dead from now on) and
// moves the word to the new tag with CAS(word: old → new). Success proves
// that no waiter took the word over, and every later takeover CAS naming
// the old tag fails; failure means the lock was lost. It returns the
// deadline of the write that follows (registry.Node.WriteBy, read before
// the check; remote.Client.DoBy).
func (s *session) stillHeld(ctx context.Context, h *held) (by time.Duration, err error) {
	if _, err := s.m.Touch(ctx, s.c); err != nil {
		return 0, err
	}
	by = s.t.reg.WriteBy()
	if !s.t.reg.Judged(h.from, s.c.Now()) {
		return by, nil
	}
	if _, err := s.m.Renew(ctx, s.c); err != nil {
		return 0, err
	}
	s.tag = s.m.Tag()
	h.from = s.c.Now()
	old, err := s.c.CAS(ctx, h.word, h.val, s.tag)
	if err != nil {
		return 0, err
	}
	if old != h.val {
		h.global = false
		return 0, fmt.Errorf("sherman: global lock %v now holds %#x: %w", h.word, old, ErrLeaseLost)
	}
	h.val = s.tag
	return s.t.reg.WriteBy(), nil
}

// takeover judges the holder of the global word h.word whose value is old
// (watch carries the judgement across the waiter's retries) and, if it is
// dead, takes the lock over: the dead holder's redo record on the word's
// memory node, if it names a page under this word, is copied into the
// session's slot in the batch of CAS(word: old → tag|repairBit); the winner
// repairs the page (repair) and holds the lock with its tag. It reports
// whether the session now holds the word (h.global). The lock counts from
// h.from, set before the judgement, like a lock the session takes itself.
func (s *session) takeover(ctx context.Context, h *held, old uint64, watch *registry.Watch) (bool, error) {
	r, relevant, won, err := s.takeWord(ctx, h, old, watch)
	if err != nil || !won {
		return false, err
	}
	if err := s.repair(ctx, h, r, relevant); err != nil {
		if h.global && !s.c.Crashed() {
			// Still the session's (not taken over meanwhile): give it
			// back, by a CAS of the value it holds.
			_ = s.c.Post(context.WithoutCancel(ctx), []remote.Op{remote.CAS(h.word, h.val, 0)})
			h.global = false
		}
		return false, err
	}
	return true, nil
}

// takeWord is takeover's judgement and CAS: won reports whether the session
// took h.word over (h.global, h.val: its tag with repairBit), r the dead
// holder's redo record and relevant whether it names a page under the word.
func (s *session) takeWord(ctx context.Context, h *held, old uint64, watch *registry.Watch) (r registry.Redo, relevant, won bool, err error) {
	t, word := s.t, h.word
	dead, err := t.reg.Dead(ctx, s.c, watch, old)
	if err != nil || !dead {
		return r, false, false, err
	}
	ops := s.ops[:0]
	if !t.opts.NoRedo {
		var ok bool
		if r, ok, err = t.reg.RedoOf(ctx, s.c, registry.SlotOf(old), word.MN()); err != nil {
			return r, false, false, err
		}
		if ok {
			_, w := t.locks.lockWord(r.Target)
			_, _, valid := t.parseImage(r)
			if relevant = valid && w == word; relevant {
				s.rec = registry.AppendRedo(s.rec[:0], r.Target, registry.SlotOf(s.tag), r.Image)
				ops = append(ops, remote.Write(s.redo[word.MN()], s.rec))
			}
		}
	}
	ops = append(ops, remote.CAS(word, old, s.tag|repairBit))
	s.ops = ops[:0]
	if err := s.c.DoBy(context.WithoutCancel(ctx), ops, watch.ActBy()); errors.Is(err, remote.ErrLate) {
		return r, false, false, nil // the judgement is too old to act on: judge again
	} else if err != nil {
		return r, false, false, err
	}
	if ops[len(ops)-1].Old != old {
		return r, false, false, nil
	}
	t.stats.recovered.Add(1)
	s.recovered++
	h.global, h.val = true, s.tag|repairBit
	return r, relevant, true, nil
}

// repair runs after a takeover of h.word: if r (relevant: it names a page
// under the word) is the dead holder's last record and its page is torn,
// the WRITE it records was cut, and the image is written again; the word's
// repair bit is cleared in the same batch. Every page under the word other
// than r's is intact: a word is released only after repair, and the dead
// holder's last write under it is the one recorded. Its writes are checked
// and posted as any holder's (retag): a repairer paused past a lease, whose
// word a waiter took over in turn, writes nothing more (ErrLeaseLost).
func (s *session) repair(ctx context.Context, h *held, r registry.Redo, relevant bool) error {
	ctx = context.WithoutCancel(ctx)
	if !relevant {
		return s.retag(ctx, h)
	}
	g := &s.t.g
	if s.rbuf == nil {
		s.rbuf = make([]byte, g.pageBytes)
	}
	if err := s.c.Read(ctx, r.Target, s.rbuf); err != nil {
		return err
	}
	if (page{g, s.rbuf}).valid() {
		return s.retag(ctx, h)
	}
	off, data, _ := s.t.parseImage(r)
	if err := s.retag(ctx, h, remote.Write(r.Target.Add(uint64(off)), data)); err != nil {
		return err
	}
	if err := s.c.Read(ctx, r.Target, s.rbuf); err != nil {
		return err
	}
	if !(page{g, s.rbuf}).valid() {
		return corrupt("page %v stays torn after its redo record was applied", r.Target)
	}
	s.t.stats.redone.Add(1)
	return nil
}

// retag posts data, then the WRITE that leaves h.word holding the session's
// tag alone (signaled: a client this one hands the lock over to re-tags the
// word with a CAS that must find the tag, not the repair bit), after
// stillHeld and by the deadline it returns; a late batch checks again,
// RetryBudget times in a row at most (then the lock is left to the waiters,
// who judge its tag dead at once once the member renews, and it fails with
// index.ErrContention).
func (s *session) retag(ctx context.Context, h *held, data ...remote.Op) error {
	for late := 0; ; late++ {
		if late >= s.t.opts.RetryBudget {
			if _, err := s.m.Renew(ctx, s.c); err != nil {
				return err
			}
			s.tag, h.global = s.m.Tag(), false
			return fmt.Errorf("%w: a repair under global lock %v was past its deadline %d times in a row (Options.Lease %v too short for the client's latency?)",
				index.ErrContention, h.word, late, s.t.opts.Lease)
		}
		by, err := s.stillHeld(ctx, h)
		if err != nil {
			return err
		}
		le.PutUint64(s.tagWord[:], s.tag)
		ops := append(append(s.ops[:0], data...), remote.Write(h.word, s.tagWord[:]))
		s.ops = ops[:0]
		if err := s.c.DoBy(ctx, ops, by); !errors.Is(err, remote.ErrLate) {
			if err == nil {
				h.val = s.tag
			}
			return err
		}
	}
}

// bury drops session s whose client crashed (an injected fault stopped it,
// or a batch of it that writes failed: remote.Client.Crashed): its member is marked dead with another session's
// client, so that waiters on every compute node judge its tag dead at
// once. If that fails (the other client crashed too, no session could be
// made, or the registry's memory node does not answer), the member keeps
// its slot and waits in t.unburied for the next operations of the compute
// node to mark it (markBuried, and markMembers when a lock wait judges a
// holder). It must not be forgotten: its compute node's heartbeat goes on,
// so nothing else would ever judge a lock holding its tag free. The
// marking is bounded by ctx: the context of the operation whose client
// crashed, or of the one that found the crashed session idle (buryIdle).
func (t *Tree) bury(ctx context.Context, s *session) {
	t.mu.Lock()
	t.unburied = append(t.unburied, s.m)
	t.hasUnburied.Store(true)
	t.mu.Unlock()
	if o, err := t.anySession(ctx); err == nil {
		o.markBuried(ctx)
		t.release(o)
	}
}

// buryIdle drops the idle sessions whose clients crashed while nobody used
// them (a connection that carried a release they posted unsignaled broke:
// remote.Client.Crashed), as release drops a session whose client crashed
// in its operation (bury): a word whose release may be lost would
// otherwise keep the tag of a client that no operation uses, whose member
// stays live. n is the compute node's count of crashed clients; ctx is the
// context of the operation that looks, which bounds the markings.
func (t *Tree) buryIdle(ctx context.Context, n uint64) {
	t.crashesSeen.Store(n)
	var crashed []*session
	t.mu.Lock()
	t.idle = slices.DeleteFunc(t.idle, func(s *session) bool {
		if !s.c.Crashed() {
			return false
		}
		crashed = append(crashed, s) // in the same pass: a client may crash meanwhile
		return true
	})
	t.mu.Unlock()
	for _, s := range crashed {
		t.stats.crashed.Add(1)
		t.bury(ctx, s)
	}
}

// markBuried marks the members of crashed clients dead with the session's
// client (markMembers), then frees the lock words that crashed receivers of
// hand-overs left (lockUnlock of their pages: the acquire takes the word
// noted stale in the local entry or, if the receiver's re-tag landed, takes
// it over from that dead client, unless a local holder took it first);
// what it cannot do stays for the next operation.
func (s *session) markBuried(ctx context.Context) {
	if s.markMembers(ctx) != nil {
		return
	}
	t := s.t
	t.mu.Lock()
	pages := t.stale
	t.stale = nil
	t.hasUnburied.Store(len(t.unburied) > 0)
	t.mu.Unlock()
	for i, a := range pages {
		if err := s.lockUnlock(ctx, a); err != nil {
			t.mu.Lock()
			t.stale = append(t.stale, pages[i:]...)
			t.hasUnburied.Store(true)
			t.mu.Unlock()
			return
		}
	}
}

// markMembers marks the members of crashed clients dead with the session's
// client; those it could not mark stay for the next operation, and the
// error says why. It first reads the registry (registry.Node.Reachable),
// so that its client is not stopped by a write to a memory node still
// down. It takes no lock, so a lock wait may call it (acquire).
func (s *session) markMembers(ctx context.Context) error {
	t := s.t
	t.mu.Lock()
	none := len(t.unburied) == 0
	t.mu.Unlock()
	if none {
		return nil
	}
	if err := t.reg.Reachable(ctx, s.c); err != nil {
		return err
	}
	t.mu.Lock()
	ms := t.unburied
	t.unburied = nil
	t.hasUnburied.Store(len(t.stale) > 0)
	t.mu.Unlock()
	for i, m := range ms {
		if err := m.MarkDead(ctx, s.c); err != nil {
			t.mu.Lock()
			t.unburied = append(t.unburied, ms[i:]...)
			t.hasUnburied.Store(true)
			t.mu.Unlock()
			return err
		}
	}
	return nil
}

// noteStale records page a, whose global word a crashed receiver of a
// hand-over left naming the previous holder (hocl.go, pass): that holder
// is alive, so waiters on other compute nodes would never judge it dead,
// and the compute node frees the word itself (markBuried).
func (t *Tree) noteStale(a remote.Addr) {
	t.mu.Lock()
	t.stale = append(t.stale, a)
	t.hasUnburied.Store(true)
	t.mu.Unlock()
}

// discard drops a session that failed before serving an operation, whose
// context is ctx.
func (t *Tree) discard(ctx context.Context, s *session) {
	if s.c.Crashed() {
		t.stats.crashed.Add(1)
		t.bury(ctx, s)
		return
	}
	_ = s.m.Close(context.Background(), s.c)
}

// leaveRegistry marks the members of crashed clients dead, closes those of
// idle sessions and, if no session is in use, the compute node's
// membership. A member left open (an operation still ran) is judged dead by
// the others after a lease.
func (t *Tree) leaveRegistry() {
	ctx := context.Background()
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	if len(idle) > 0 {
		idle[0].markBuried(ctx)
	}
	t.handOn(ctx, idle)
	var c *remote.Client
	for _, s := range idle {
		_ = s.m.Close(ctx, s.c)
		c = s.c
	}
	if c != nil {
		_ = t.reg.Close(ctx, c)
	}
}

// Recover implements index.Recoverer: it walks every page of every level
// along the sibling chains, takes over every global lock held by a dead
// holder (waiting up to a lease, Options.Lease, for a silent compute node,
// and for live holders to release), repairs torn pages from redo records,
// and inserts the separators of pages that a split linked into their level
// but not into the level above. It returns the number of locks it took
// over. Safe to run concurrently with operations; after it returns, with no
// operation running, Verify passes.
func (t *Tree) Recover(ctx context.Context) (int, error) {
	s, err := t.session(ctx)
	if err != nil {
		return 0, closedError(err)
	}
	defer t.release(s)
	if t.hasUnburied.Load() {
		// Crashed clients whose members could not be marked dead: until
		// they are, their locks look live (their compute node beats).
		if err := s.markMembers(ctx); err != nil {
			return 0, closedError(fmt.Errorf("sherman: recover: marking crashed clients dead: %w", err))
		}
	}
	before := s.recovered
	// The first walk takes over the words of holders it can judge dead at
	// once and begins judging the others (prewatch); the second, if there
	// are others, takes those over a lease after the first walk saw them,
	// rather than a lease after each one's turn.
	s.prewatch = map[remote.Addr]*registry.Watch{}
	defer func() { s.prewatch = nil }()
	levels, err := s.sweep(ctx, true)
	if err == nil && len(s.prewatch) > 0 {
		levels, err = s.sweep(ctx, false)
	}
	if err == nil {
		err = s.linkSplits(ctx, levels)
	}
	return s.recovered - before, closedError(err)
}

// sweptPage is a page seen by Recover's sweep.
type sweptPage struct {
	addr     remote.Addr
	low      []byte
	children []remote.Addr // internal pages: leftmost, then entry children
}

// sweep visits every page from the top level down, level by level along
// the sibling chain, and frees every held lock word it finds: a page that
// does not validate, or whose word is set, is locked (taking the word over
// from a dead holder and repairing the page) and unlocked. On a first walk
// a valid page whose word is held by a holder not known dead yet is only
// noted (s.prewatch) for the next walk. It returns the pages of each
// level, top level last.
func (s *session) sweep(ctx context.Context, first bool) ([][]sweptPage, error) {
	root, err := s.refreshRoot(ctx)
	if err != nil {
		return nil, err
	}
	var levels [][]sweptPage
	leftmost := root
	for level := -1; ; {
		var pages []sweptPage
		for a, n := leftmost, 0; a != 0; n++ {
			if n > 1<<26 {
				return nil, corrupt("sibling chain at level %d does not end", level)
			}
			p, err := s.sweepPage(ctx, a, level, first)
			if err != nil {
				return nil, err
			}
			if level < 0 {
				level = p.level()
			}
			sp := sweptPage{addr: a, low: bytes.Clone(p.low())}
			if level > 0 {
				sp.children = append(sp.children, p.leftmost())
				for i := range p.count() {
					sp.children = append(sp.children, p.innerChild(i))
				}
			}
			pages = append(pages, sp)
			a = p.sibling()
		}
		levels = append([][]sweptPage{pages}, levels...)
		if level == 0 {
			break
		}
		leftmost, level = pages[0].children[0], level-1
	}
	return levels, nil
}

// sweepPage reads page a and frees its lock word if it is held; on a first
// walk (sweep) it notes the word instead if the page is valid and its
// holder not known dead yet.
func (s *session) sweepPage(ctx context.Context, a remote.Addr, level int, first bool) (page, error) {
	_, word := s.t.locks.lockWord(a)
	var w [8]byte
	b := s.buf[0][:s.t.g.bytesFor(level)]
	ops := []remote.Op{remote.Read(word, w[:]), remote.Read(a, b)}
	if err := s.c.Do(ctx, ops); err != nil {
		return page{}, err
	}
	held, valid := le.Uint64(w[:]), (page{&s.t.g, b}).valid()
	leave := held == 0 && valid // nothing to free, or (first walk) not yet
	if first && held != 0 && valid {
		watch := s.prewatch[word]
		if watch == nil {
			watch = new(registry.Watch)
		}
		dead, err := s.t.reg.Dead(ctx, s.c, watch, held)
		if err != nil {
			return page{}, err
		}
		if leave = !dead; leave {
			s.prewatch[word] = watch // judged on the next walk, a lease from now
		}
	}
	if !leave {
		if err := s.lockUnlock(ctx, a); err != nil {
			return page{}, err
		}
	}
	p, err := s.read(ctx, a, level, s.buf[0])
	if errors.Is(err, index.ErrContention) {
		return page{}, corrupt("page %v never validates after recovery: %v", a, err)
	}
	return p, err
}

// linkSplits inserts the separator of every page that is on its level's
// sibling chain but not a child of the level above (a split whose holder
// died after linking the new page into the chain and before inserting its
// separator), bottom-up; pages to the right of a root with a sibling grow a
// new root.
func (s *session) linkSplits(ctx context.Context, levels [][]sweptPage) error {
	for l, pages := range levels {
		linked := map[remote.Addr]bool{pages[0].addr: true}
		if l+1 < len(levels) {
			for _, p := range levels[l+1] {
				for _, c := range p.children {
					linked[c] = true
				}
			}
		}
		for _, p := range pages {
			if linked[p.addr] {
				continue
			}
			if err := s.insertSep(ctx, l+1, p.low, p.addr, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ index.Recoverer = (*Tree)(nil)
