package indextest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// The crash-recovery batteries (docs/recovery.md, "How it will be tested"):
// RunCrashPoints stops one operation at every verb and at every word of
// every WRITE it posts, RunCrashRandom runs the concurrent workloads under
// random crash injection, and RunSilentNode strands the locks of a compute
// node that falls silent. They check the contract of index.Recoverer: an
// operation whose client was stopped returns an error wrapping
// remote.ErrCrashed and has an unknown outcome (old or new, never anything
// else), acknowledged writes are never lost, whatever a stopped client left
// is repaired by the next operation that runs into it, and after Recover the
// structure verifies.

// crashModes are the orderings of the crash batteries: InOrder, and Strict,
// where the lines of one WRITE land in any order.
var crashModes = []simMode{
	{"inorder", remote.InOrder, 0},
	{"strict", remote.Strict, 0},
}

// crashConfig is the pool configuration of a crash test in mode m: smaller
// memory nodes than the other batteries', since RunCrashPoints creates a
// pool per fault point.
func crashConfig(m simMode, seed uint64) remote.Config {
	c := m.config(seed)
	c.NodeBytes = 64 << 20
	return c
}

// statsOf returns idx's index.Stats, if it reports any.
func statsOf(idx index.Index) (index.Stats, bool) {
	s, ok := idx.(interface{ Stats() index.Stats })
	if !ok || idx == nil {
		return index.Stats{}, false
	}
	return s.Stats(), true
}

// sumStats adds the Stats of idxs (nil entries skipped).
func sumStats(idxs ...index.Index) index.Stats {
	var st index.Stats
	for _, idx := range idxs {
		if idx != nil {
			s, _ := statsOf(idx)
			st = st.Add(s)
		}
	}
	return st
}

// isCrash reports whether err is the error of an operation whose client an
// injected fault stopped.
func isCrash(err error) bool { return errors.Is(err, remote.ErrCrashed) }

// simClock lets virtual time pass in a simulated pool. It uses a compute node
// of its own, which no index uses and no fault is armed on.
type simClock struct {
	c *remote.Client
	a remote.Addr
}

// newSimClock prepares a clock on a new compute node of pool. It must run in
// a goroutine started by pool.Go.
func newSimClock(ctx context.Context, pool *remote.Pool) (*simClock, error) {
	c := pool.NewComputeNode().NewClient()
	a, err := c.Named(ctx, "indextest/clock", 8)
	if err != nil {
		return nil, fmt.Errorf("the test's clock: %w", err)
	}
	return &simClock{c, a}, nil
}

// sleep lets d of virtual time pass: the clock's client charges d of CPU
// time and reads a word. It must run in a goroutine started by pool.Go.
func (s *simClock) sleep(ctx context.Context, d time.Duration) error {
	s.c.Compute(d)
	return s.c.Read(ctx, s.a, make([]byte, 8))
}

// crashScenario is one operation RunCrashPoints stops at every fault point:
// on a tree holding preload, Put(key, val), or Delete(key) if del.
type crashScenario struct {
	name    string
	preload []okv // written in this order, by one client
	key     []byte
	val     []byte
	del     bool
}

// String describes the operation.
func (sc *crashScenario) String() string {
	if sc.del {
		return fmt.Sprintf("%s: Delete(%s) on a tree of %d keys", sc.name, fmtKey(sc.key), len(sc.preload))
	}
	return fmt.Sprintf("%s: Put(%s, %d bytes) on a tree of %d keys", sc.name, fmtKey(sc.key), len(sc.val), len(sc.preload))
}

// states returns the key's state before and after the operation.
func (sc *crashScenario) states() (old, new ver) {
	for _, kv := range sc.preload {
		if kv.k == string(sc.key) {
			old = ver{true, kv.v}
		}
	}
	if !sc.del {
		new = ver{true, string(sc.val)}
	}
	return old, new
}

// crashKeys returns the keys of RunCrashPoints' small tree, one byte apart
// under a shared prefix, so that an insert between two of them is a plain
// insert into an internal node with room, and the extra keys that the
// structural-change probe inserts after them: keys that extend a key,
// diverge inside the shared prefix, fill the node past 16 children, and a
// dense run that fills a leaf page.
func (tg Target) crashKeys() (base, extra [][]byte) {
	var all [][]byte
	for _, c := range "bdfhjlnp" {
		all = append(all, []byte("crash/"+string(c)))
	}
	for _, s := range []string{"crash/d5", "crash/fa", "crash/fb", "crasH"} {
		all = append(all, []byte(s))
	}
	for _, c := range "acegikmoqrstuvwxyz" {
		all = append(all, []byte("crash/"+string(c)))
	}
	for i := range 40 {
		all = append(all, fmt.Appendf(nil, "crash/q%02d", i))
	}
	all = tg.dedupe(all) // fitted keys may collide; the first 8 cannot
	return all[:8], all[8:]
}

// crashPreload returns the preload of keys, with self-checking values of n
// bytes (key ids from 1).
func (tg Target) crashPreload(keys [][]byte, n int) []okv {
	out := make([]okv, len(keys))
	for i, k := range keys {
		out[i] = okv{string(k), string(makeValue(packTag(i+1, 0, 1), tg.vlen(n)))}
	}
	return out
}

// crashScenarios returns the single-operation scenarios of RunCrashPoints
// on the small tree: a plain insert, same-size and larger updates, and a
// delete.
func (tg Target) crashScenarios() []*crashScenario {
	base, _ := tg.crashKeys()
	pre := tg.crashPreload(base, 24)
	newKey := tg.fitKey([]byte("crash/e"))
	scs := []*crashScenario{
		{name: "insert", preload: pre, key: newKey, val: makeValue(packTag(900, 1, 1), tg.vlen(24))},
		{name: "update-same-size", preload: pre, key: base[2], val: makeValue(packTag(3, 1, 2), tg.vlen(24))},
	}
	if big := tg.vlen(1500); big > tg.vlen(24) {
		scs = append(scs, &crashScenario{name: "update-larger", preload: pre, key: base[3], val: makeValue(packTag(4, 1, 2), big)})
	}
	return append(scs, &crashScenario{name: "delete", preload: pre, key: base[4], del: true})
}

// opCost is what one Put cost, as the structural-change probe measures it.
type opCost struct {
	verbs, cases, writes, roundTrips uint64
}

// splitScenarios finds, with a crash-free probe in the simulator, inserts
// that change the structure (an internal node, a leaf page split, a node
// type switch): those that cost more verbs or round trips than the most
// common insert, at most max of them, each with a different cost. It also
// reports whether the index implements index.Recoverer.
func (tg Target) splitScenarios(ctx context.Context, seed uint64, max int) (scs []*crashScenario, recoverer bool, err error) {
	pool, err := remote.NewPool(crashConfig(crashModes[0], seed))
	if err != nil {
		return nil, false, err
	}
	defer pool.Close()
	base, extra := tg.crashKeys()
	pre := tg.crashPreload(base, 24)
	all := tg.crashPreload(append(slices.Clone(base), extra...), 24)
	costs := make([]opCost, len(extra))
	pool.Go(func() {
		idx, oerr := tg.Open(pool.NewComputeNode(), "crash-probe")
		if oerr != nil {
			err = oerr
			return
		}
		defer idx.Close()
		_, recoverer = idx.(index.Recoverer)
		for _, kv := range all {
			before := pool.Stats()
			if err = idx.Put(ctx, []byte(kv.k), []byte(kv.v)); err != nil {
				err = fmt.Errorf("probe Put(%s): %w", fmtKey([]byte(kv.k)), err)
				return
			}
			if j := slices.IndexFunc(extra, func(k []byte) bool { return string(k) == kv.k }); j >= 0 {
				d := pool.Stats().Sub(before)
				costs[j] = opCost{d.Verbs(), d.CASes, d.Writes, d.RoundTrips}
			}
		}
	})
	if werr := pool.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, recoverer, err
	}
	count := make(map[opCost]int)
	for _, c := range costs {
		count[c]++
	}
	var common opCost
	for c, n := range count {
		if n > count[common] || n == count[common] && c.verbs < common.verbs {
			common = c
		}
	}
	var seen []opCost
	for j, c := range costs {
		if len(scs) == max {
			break
		}
		if c.verbs <= common.verbs && c.roundTrips <= common.roundTrips || slices.Contains(seen, c) {
			continue
		}
		seen = append(seen, c)
		sc := &crashScenario{
			name:    fmt.Sprintf("split-%s", strings.TrimRight(string(extra[j]), "\x00")),
			preload: all[:len(pre)+j],
			key:     extra[j],
			val:     []byte(all[len(pre)+j].v),
		}
		scs = append(scs, sc)
	}
	return scs, recoverer, nil
}

// RunCrashPoints stops single operations at every fault point, in the
// simulator in InOrder and Strict modes. The operations: an insert of a new
// key into a small tree, an update of an existing key with a value of the
// same size, one with a much larger value (when the target accepts one),
// a delete, and inserts that change the structure (found by a crash-free
// probe: the inserts of a fixed key sequence that cost more verbs or round
// trips than a plain one, such as leaf splits and node type switches).
//
// A fault point is a remote.Fault{After: i, Words: w} armed with
// (*remote.ComputeNode).Crash just before the operation: i from 0 until the
// operation completes without crashing, and for a verb that is a WRITE, w
// over the words it can be cut at (all of them when there are few, the
// first and last ones and evenly spaced ones between when there are many;
// fewer under -short). Each fault point runs on a pool of its own, on which
// compute node A preloads the tree, B opens it and scans it, and A runs the
// operation. Then:
//
//   - the operation returned nil (the crash did not strike it, or struck
//     the index's upkeep after it took effect) or an error wrapping
//     remote.ErrCrashed;
//   - a compute node C, opened after the crash, runs Verify once, only to
//     learn whether the crash left something held (a lock, a torn write)
//     for the Stats check below;
//   - Gets of the key from A, B and C return its old or its new value, the
//     same one, except that a stopped operation may take effect late (old
//     values, then the new one: another client finished what it published),
//     never the other way;
//   - every other key is intact (Gets from A or B, alternating with the
//     fault point, and a full scan from C);
//   - Put and Delete of the key and of its neighbours succeed at once (no
//     error at all: in particular no index.ErrContention), from A or B,
//     and are read back from the other one;
//   - Recover (index.Recoverer) on the other one succeeds, and its
//     Stats().Recovered grows by what it returned; Verify passes; a full
//     scan from C matches;
//   - Stats().Crashed summed over A, B and C equals the crashes injected;
//     if the compute nodes count a lock recovered (Stats().Recovered) after
//     the Verify run just after the crash, that Verify must have found
//     something held; and if it reported something held that names a lock
//     (its message contains "lock"), they must count it as recovered.
//
// Every failure names the ordering, the operation, the fault point and the
// seed. A failing fault point is reproduced by rerunning the subtest with
// its -seed; the first three failures of a scenario are reported in full,
// the others listed by fault point.
func RunCrashPoints(t *testing.T, tg Target) {
	checkTarget(t, tg)
	maxSplits, maxWords := 4, 16
	if testing.Short() {
		maxSplits, maxWords = 2, 3
	}
	for _, m := range crashModes {
		t.Run(m.name, func(t *testing.T) {
			seed := seedFor(t)
			splits, recoverer, err := tg.splitScenarios(t.Context(), seed, maxSplits)
			if err != nil {
				t.Fatalf("structural-change probe: %v", err)
			}
			if !recoverer {
				t.Errorf("%s does not implement index.Recoverer: Recover is not checked", tg.Name)
			}
			if len(splits) == 0 {
				t.Logf("the probe found no insert that costs more than a plain one: no structural change is tried")
			}
			for _, sc := range append(tg.crashScenarios(), splits...) {
				t.Run(sc.name, func(t *testing.T) {
					seed := seedFor(t)
					sw := &crashSweep{tg: tg, mode: m, seed: seed, sc: sc, maxWords: maxWords}
					sw.run(t)
				})
			}
		})
	}
}

// crashSweep runs one scenario at every fault point.
type crashSweep struct {
	tg       Target
	mode     simMode
	seed     uint64
	sc       *crashScenario
	maxWords int // interior cut points tried per WRITE

	points, failed int
	failures       []string // fault points that failed, beyond the first ones
	outcomes       map[string]int
	held           int    // fault points after which Verify found something held
	recovered      uint64 // locks recovered, summed over the fault points
}

// maxAfter bounds the verbs of one operation: a fault point past it ends
// the sweep with an error.
const maxAfter = 400

// run sweeps the fault points and reports.
func (sw *crashSweep) run(t *testing.T) {
	sw.outcomes = make(map[string]int)
	t.Logf("%s, %s, seed %#x", sw.mode.name, sw.sc, sw.seed)
	for i := 0; ; i++ {
		if i > maxAfter {
			t.Errorf("%s: the operation still crashes with the fault After=%d: it posts more verbs than the sweep allows", sw.sc, maxAfter)
			break
		}
		r0 := sw.point(t, remote.Fault{After: i})
		if r0.done {
			t.Logf("completed without crashing at After=%d; %d fault points, %d failed; outcomes %v; %d left something held, %d locks recovered",
				i, sw.points, sw.failed, sw.outcomes, sw.held, sw.recovered)
			break
		}
		rmax := sw.point(t, remote.Fault{After: i, Words: 1 << 20})
		if rmax.writeBytes <= r0.writeBytes {
			continue // not a WRITE, or one word: no interior cut
		}
		cuts := int((rmax.writeBytes - r0.writeBytes + 7) / 8) // the last cut, rmax's
		for _, w := range spread(cuts-1, sw.maxWords) {
			sw.point(t, remote.Fault{After: i, Words: w})
		}
	}
	if len(sw.failures) > 0 {
		t.Errorf("%s (%s, seed %#x): %d more failing fault points: %s", sw.sc, sw.mode.name, sw.seed, len(sw.failures), strings.Join(sw.failures, " "))
	}
}

// spread returns up to max values of 1..n: all of them if they fit, else
// the first and last few and evenly spaced ones between.
func spread(n, max int) []int {
	var out []int
	if n <= max {
		for w := 1; w <= n; w++ {
			out = append(out, w)
		}
		return out
	}
	edge := max / 4
	for w := 1; w <= edge; w++ {
		out = append(out, w, n+1-w)
	}
	mid := max - len(out)
	for j := 1; j <= mid; j++ {
		out = append(out, edge+j*(n-2*edge)/(mid+1))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pointResult is what one fault point did.
type pointResult struct {
	done       bool   // the operation completed without any crash
	writeBytes uint64 // bytes the pool's WRITEs carried during the operation
}

// point runs the scenario with fault f on a pool of its own and records its
// problems.
func (sw *crashSweep) point(t *testing.T, f remote.Fault) pointResult {
	t.Helper()
	sw.points++
	c := &crashCheck{sw: sw, f: f}
	onCrashPool(t, sw.mode, sw.seed, c.failf, func(ctx context.Context, pool *remote.Pool) {
		c.pool = pool
		c.run(ctx)
	})
	if len(c.problems) > 0 {
		sw.failed++
		where := fmt.Sprintf("After=%d,Words=%d", f.After, f.Words)
		if sw.failed <= 3 {
			t.Errorf("%s, %s, fault {After: %d, Words: %d}, seed %#x (rerun with -seed=%d): the operation returned %v;\n\t%s",
				sw.mode.name, sw.sc, f.After, f.Words, sw.seed, testseed.Base(), c.opErr, strings.Join(c.problems, "\n\t"))
		} else {
			sw.failures = append(sw.failures, where)
		}
	}
	if c.outcome != "" {
		sw.outcomes[c.outcome]++
	}
	return pointResult{done: c.done, writeBytes: c.writeBytes}
}

// crashCheck is one fault point of a sweep, run in the simulator.
type crashCheck struct {
	sw   *crashSweep
	f    remote.Fault
	pool *remote.Pool

	problems   []string
	opErr      error
	done       bool
	writeBytes uint64
	outcome    string // "old", "new" (or "" if never observed)
}

func (c *crashCheck) failf(format string, args ...any) {
	if len(c.problems) < 12 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// preloadChecked writes the pairs of kvs into idx in order and returns an
// oracle holding them, or nil after reporting a failed Put with failf.
func preloadChecked(ctx context.Context, idx index.Index, kvs []okv, failf func(string, ...any)) *oracle {
	o := newOracle()
	for _, kv := range kvs {
		if err := idx.Put(ctx, []byte(kv.k), []byte(kv.v)); err != nil {
			failf("preload Put(%s): %v", fmtKey([]byte(kv.k)), err)
			return nil
		}
		o.put([]byte(kv.k), []byte(kv.v))
	}
	return o
}

// onCrashPool runs fn, with five minutes to go, in a goroutine of a new
// pool of mode and seed, closed afterwards; a failed Wait is reported with
// failf.
func onCrashPool(t *testing.T, mode simMode, seed uint64, failf func(string, ...any), fn func(context.Context, *remote.Pool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	pool, err := remote.NewPool(crashConfig(mode, seed))
	if err != nil {
		t.Fatalf("remote.NewPool: %v", err)
	}
	defer pool.Close()
	pool.Go(func() { fn(ctx, pool) })
	if err := pool.Wait(); err != nil {
		failf("pool.Wait: %v", err)
	}
}

// openChecked opens tg's index name on cn, the compute node called who,
// and reports a failure (an error, or a nil index) with failf.
func openChecked(tg Target, cn *remote.ComputeNode, name, who string, failf func(string, ...any)) index.Index {
	idx, err := tg.Open(cn, name)
	if err == nil && idx == nil {
		err = errors.New("nil index")
	}
	if err != nil {
		failf("Open on %s: %v", who, err)
		return nil
	}
	return idx
}

// run runs the fault point; it runs in a goroutine started by Pool.Go.
func (c *crashCheck) run(ctx context.Context) {
	tg, sc := c.sw.tg, c.sw.sc
	name := "crash"
	cnA, cnB := c.pool.NewComputeNode(), c.pool.NewComputeNode()
	open := func(cn *remote.ComputeNode, who string) index.Index { return openChecked(tg, cn, name, who, c.failf) }
	var idxs []index.Index
	defer func() {
		for _, idx := range idxs {
			idx.Close()
		}
	}()
	a := open(cnA, "A")
	if a == nil {
		return
	}
	idxs = append(idxs, a)
	o := preloadChecked(ctx, a, sc.preload, c.failf)
	if o == nil {
		return
	}
	b := open(cnB, "B")
	if b == nil {
		return
	}
	idxs = append(idxs, b)
	if p := scanN(ctx, b, nil, nil, -1).problem(o.all()); p != "" {
		c.failf("full scan from B after the preload: %s", p)
		return
	}

	// The operation, with the fault armed.
	before, crashes := c.pool.Stats(), c.pool.Crashes()
	cnA.Crash(c.f)
	var found bool
	if sc.del {
		found, c.opErr = a.Delete(ctx, sc.key)
	} else {
		c.opErr = a.Put(ctx, sc.key, sc.val)
	}
	c.writeBytes = c.pool.Stats().WriteBytes - before.WriteBytes
	struck := c.pool.Crashes() - crashes
	oldV, newV := sc.states()
	switch {
	case c.opErr == nil && struck == 0:
		// Past the operation's last verb: the fault is still armed on a
		// client of A, so A is not used again.
		c.done = true
		if sc.del && !found {
			c.failf("Delete of a present key returned found=false")
		}
		v, ok, err := b.Get(ctx, sc.key)
		if err != nil || (ver{ok, string(v)}) != newV {
			c.failf("Get from B after the operation completed = %s, %v; want %s", fmtState(ok, v), err, fmtState(newV.present, []byte(newV.val)))
		}
		return
	case c.opErr == nil:
		// The crash struck the index's upkeep after the operation took
		// effect (a heartbeat, reclamation): an acknowledged operation,
		// checked as such below.
	case !isCrash(c.opErr):
		c.failf("the operation returned %v; want nil or an error wrapping remote.ErrCrashed", c.opErr)
	case struck == 0:
		c.failf("the operation returned %v, but no crash was injected", c.opErr)
	}
	acked := c.opErr == nil
	if acked && sc.del && !found {
		c.failf("Delete of a present key returned found=false")
	}

	// What the crash left, seen by a compute node that arrives afterwards.
	cc := open(c.pool.NewComputeNode(), "C")
	if cc == nil {
		return
	}
	idxs = append(idxs, cc)
	verifyBefore := tg.verifyErr(ctx, cc)
	// Locks recovered from here on were held when Verify ran (an index may
	// repair what its own stopped client left before it returns).
	recovered0 := sumStats(a, b).Recovered

	// The key holds its old or its new value, the same for everyone.
	x, y, xName, yName := a, b, "A", "B"
	if c.f.After%2 == 1 {
		x, y, xName, yName = b, a, "B", "A"
	}
	var seen *ver
	for _, r := range []struct {
		idx  index.Index
		name string
	}{{x, xName}, {y, yName}, {cc, "C"}, {x, xName}} {
		v, ok, err := r.idx.Get(ctx, sc.key)
		if err != nil {
			c.failf("Get(%s) from %s after the crash: %v", fmtKey(sc.key), r.name, err)
			continue
		}
		got := ver{ok, string(v)}
		switch {
		case seen != nil && got != *seen && !(*seen == oldV && got == newV && !acked):
			// A stopped operation may take effect after the crash (another
			// client completes what it published), never be undone.
			c.failf("Get(%s) from %s = %s, but an earlier Get returned %s", fmtKey(sc.key), r.name, fmtState(ok, v), fmtState(seen.present, []byte(seen.val)))
		case got == newV:
			c.outcome = "new"
		case got == oldV && !acked:
			c.outcome = "old"
		default:
			c.failf("Get(%s) from %s = %s, neither the old value %s nor the new one %s", fmtKey(sc.key), r.name,
				fmtState(ok, v), fmtState(oldV.present, []byte(oldV.val)), fmtState(newV.present, []byte(newV.val)))
			continue
		}
		if seen == nil || got == newV {
			seen = &got
		}
	}
	if seen == nil {
		return
	}
	if seen.present {
		o.put(sc.key, []byte(seen.val))
	} else {
		o.del(sc.key)
	}

	// Every other key is intact.
	for _, kv := range sc.preload {
		if kv.k != string(sc.key) {
			if p := checkGet(ctx, x, o, []byte(kv.k)); p != "" {
				c.failf("from %s after the crash: %s", xName, p)
			}
		}
	}
	if p := scanN(ctx, cc, nil, nil, -1).problem(o.all()); p != "" {
		c.failf("full scan from C after the crash: %s", p)
	}

	// Writes to the key and its neighbours succeed at once.
	c.writeAround(ctx, x, y, xName, yName, o)

	// Recover, then Verify.
	if rec, ok := y.(index.Recoverer); ok {
		st0, _ := statsOf(y)
		n, err := rec.Recover(ctx)
		st1, _ := statsOf(y)
		if err != nil {
			c.failf("Recover on %s: %v", yName, err)
		} else if d := st1.Recovered - st0.Recovered; d != uint64(n) {
			c.failf("Recover on %s returned %d recovered locks, but its Stats().Recovered grew by %d", yName, n, d)
		}
	}
	if err := tg.verifyErr(ctx, cc); err != nil {
		c.failf("Verify after Recover: %v", err)
	}
	if p := scanN(ctx, cc, nil, nil, -1).problem(o.all()); p != "" {
		c.failf("full scan from C at the end: %s", p)
	}

	// The counters.
	st := sumStats(idxs...)
	if crashes := c.pool.Crashes(); st.Crashed != crashes {
		c.failf("Stats().Crashed summed over A, B and C = %d, but %d clients crashed", st.Crashed, crashes)
	}
	if verifyBefore != nil {
		c.sw.held++
	}
	c.sw.recovered += st.Recovered
	switch later := st.Recovered - recovered0; {
	case later > 0 && verifyBefore == nil:
		c.failf("A, B and C recovered %d locks after Verify found nothing held just after the crash (Stats().Recovered)", later)
	case verifyBefore != nil && later == 0 && strings.Contains(strings.ToLower(verifyBefore.Error()), "lock held"):
		c.failf("the crash left a lock held (Verify just after it: %v), but Stats().Recovered is 0 on A, B and C", verifyBefore)
	}
}

// writeAround writes the crashed key and its neighbours from x, reads them
// back from y, and keeps o up to date. Every call must succeed.
func (c *crashCheck) writeAround(ctx context.Context, x, y index.Index, xName, yName string, o *oracle) {
	key := c.sw.sc.key
	var prev, next []byte
	for _, kv := range o.all() {
		switch {
		case kv.k < string(key):
			prev = []byte(kv.k)
		case kv.k > string(key) && next == nil:
			next = []byte(kv.k)
		}
	}
	tg := c.sw.tg
	seq := 10
	put := func(k []byte) {
		seq++
		v := makeValue(packTag(950, 2, seq), tg.vlen(8+seq))
		if err := x.Put(ctx, k, v); err != nil {
			c.failf("Put(%s) from %s after the crash: %v", fmtKey(k), xName, err)
			return
		}
		o.put(k, v)
	}
	del := func(k []byte) {
		_, want := o.get(k)
		found, err := x.Delete(ctx, k)
		if err != nil {
			c.failf("Delete(%s) from %s after the crash: %v", fmtKey(k), xName, err)
			return
		}
		if found != want {
			c.failf("Delete(%s) from %s after the crash: found=%v, want %v", fmtKey(k), xName, found, want)
		}
		o.del(k)
	}
	put(key)
	if prev != nil {
		put(prev)
	}
	if next != nil {
		del(next)
	}
	del(key)
	put(key)
	if next != nil {
		put(next)
	}
	for _, k := range [][]byte{prev, key, next} {
		if k != nil {
			if p := checkGet(ctx, y, o, k); p != "" {
				c.failf("from %s, after writes from %s: %s", yName, xName, p)
			}
		}
	}
}
