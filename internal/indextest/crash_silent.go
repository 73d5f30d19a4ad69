package indextest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// silentFaults is how many faults RunSilentNode queues on the silent
// compute node after the one that stops its operation: every client of the
// node that posts afterwards (a replacement client, one that would tell the
// registry that the first one died, a heartbeat) stops before its first
// verb.
const silentFaults = 1000

// RunSilentNode strands what an operation leaves when its whole compute
// node falls silent, in the simulator in InOrder and Strict modes. Compute
// node A preloads a small tree and B opens it; then A runs an operation
// (the scenarios of RunCrashPoints: insert, updates, delete, and with
// -short only the same-size update and the first structural insert) with
// a fault armed at After = 0, 1, … (until the operation completes), each
// fault point cutting a WRITE at its first word and at its last, followed
// by faults that stop every other client of A before its first verb, so
// that A cannot tell the registry, replace its client or beat its heart;
// every client of A is then stopped and A is never used again. Afterwards,
// for each fault point:
//
//   - the operation on A returned nil or an error wrapping
//     remote.ErrCrashed;
//   - Gets of the key from B return its old or its new value, or fail with
//     index.ErrContention while the lease runs;
//   - Put and Delete of the key and its neighbours from B succeed, retried
//     while they fail with index.ErrContention, within 20 leases
//     (Target.Lease) of virtual time after the crash: the locks A left
//     are taken over once A has been silent for a lease;
//   - then the same writes from a compute node C opened after the crash,
//     and from B again, succeed at once; every other key is intact;
//     Recover on C and Verify pass, and a full scan matches;
//   - if a write waited (ErrContention), a lock was stranded: B and C
//     together must count at least one recovered lock (Stats().Recovered).
//
// It needs a target whose indexes use a short lease (Target.Lease) and
// skips otherwise.
func RunSilentNode(t *testing.T, tg Target) {
	checkTarget(t, tg)
	if tg.Lease <= 0 {
		t.Skipf("%s: Target.Lease is zero: the index offers no option for a short lease (e.g. Options.Lease, after which a silent compute node's locks are taken over), which RunSilentNode needs", tg.Name)
	}
	for _, m := range crashModes {
		t.Run(m.name, func(t *testing.T) {
			seed := seedFor(t)
			splits, _, err := tg.splitScenarios(t.Context(), seed, 1)
			if err != nil {
				t.Fatalf("structural-change probe: %v", err)
			}
			scs := append(tg.crashScenarios(), splits...)
			if testing.Short() {
				scs = append(scs[1:2], splits...)
			}
			for _, sc := range scs {
				t.Run(sc.name, func(t *testing.T) {
					seed := seedFor(t)
					t.Logf("%s, %s, lease %v, seed %#x", m.name, sc, tg.Lease, seed)
					failed := 0
					for i := 0; i <= maxAfter; i++ {
						done := false
						for _, words := range []int{1, 1 << 20} {
							s := &silentCheck{tg: tg, mode: m, seed: seed, sc: sc, f: remote.Fault{After: i, Words: words}}
							s.point(t)
							if len(s.problems) > 0 {
								if failed++; failed <= 3 {
									t.Errorf("%s, %s, fault {After: %d, Words: %d} then silence, seed %#x: the operation returned %v;\n\t%s",
										m.name, sc, i, words, seed, s.opErr, strings.Join(s.problems, "\n\t"))
								}
							}
							done = s.done
							if done {
								break
							}
						}
						if done {
							t.Logf("completed without crashing at After=%d; %d fault points failed", i, failed)
							return
						}
					}
					t.Errorf("%s: the operation still crashes with the fault After=%d", sc, maxAfter)
				})
			}
		})
	}
}

// silentCheck is one fault point of RunSilentNode.
type silentCheck struct {
	tg   Target
	mode simMode
	seed uint64
	sc   *crashScenario
	f    remote.Fault

	problems []string
	opErr    error
	done     bool
}

func (s *silentCheck) failf(format string, args ...any) {
	if len(s.problems) < 12 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// point runs the fault point on a pool of its own.
func (s *silentCheck) point(t *testing.T) {
	onCrashPool(t, s.mode, s.seed, s.failf, s.run)
}

// run runs the fault point in a goroutine started by Pool.Go.
func (s *silentCheck) run(ctx context.Context, pool *remote.Pool) {
	tg, sc := s.tg, s.sc
	clock, err := newSimClock(ctx, pool)
	if err != nil {
		s.failf("%v", err)
		return
	}
	cnA := pool.NewComputeNode()
	var idxs []index.Index // closed at the end; A is not among them
	defer func() {
		for _, idx := range idxs {
			idx.Close()
		}
	}()
	open := func(cn *remote.ComputeNode, who string) index.Index {
		return openChecked(tg, cn, "silent", who, s.failf)
	}
	a := open(cnA, "A")
	if a == nil {
		return
	}
	o := preloadChecked(ctx, a, sc.preload, s.failf)
	if o == nil {
		return
	}
	b := open(pool.NewComputeNode(), "B")
	if b == nil {
		return
	}
	idxs = append(idxs, b)
	if p := scanN(ctx, b, nil, nil, -1).problem(o.all()); p != "" {
		s.failf("full scan from B after the preload: %s", p)
		return
	}

	// The operation, then silence.
	crashes := pool.Crashes()
	cnA.Crash(s.f)
	for range silentFaults {
		cnA.Crash(remote.Fault{})
	}
	if sc.del {
		_, s.opErr = a.Delete(ctx, sc.key)
	} else {
		s.opErr = a.Put(ctx, sc.key, sc.val)
	}
	for _, c := range cnA.Clients() {
		if !c.Crashed() {
			c.Crash(remote.Fault{})
		}
	}
	oldV, newV := sc.states()
	switch {
	case s.opErr == nil && pool.Crashes() == crashes:
		s.done = true
		return
	case s.opErr != nil && !isCrash(s.opErr):
		s.failf("the operation returned %v; want nil or an error wrapping remote.ErrCrashed", s.opErr)
	}
	acked := s.opErr == nil
	t0 := pool.Now()
	deadline := t0 + 20*tg.Lease
	waited := false

	// B reads the key: old or new, or contention while the lease runs.
	var seen *ver
	v, ok, err := b.Get(ctx, sc.key)
	switch got := (ver{ok, string(v)}); {
	case isContention(err):
		waited = true
	case err != nil:
		s.failf("Get(%s) from B after the crash: %v", fmtKey(sc.key), err)
	case got == newV || got == oldV && !acked:
		seen = &got
	default:
		s.failf("Get(%s) from B = %s, neither the old value %s nor the new one %s", fmtKey(sc.key),
			fmtState(ok, v), fmtState(oldV.present, []byte(oldV.val)), fmtState(newV.present, []byte(newV.val)))
	}

	// B writes the key and its neighbours, waiting out the lease.
	retry := func(what string, call func() error) bool {
		for attempt := 0; ; attempt++ {
			err := call()
			switch {
			case err == nil:
				return true
			case !isContention(err):
				s.failf("%s from B after the crash: %v", what, err)
				return false
			case pool.Now() > deadline:
				s.failf("%s from B still fails after %d attempts, %v after the crash (lease %v): %v", what, attempt+1, pool.Now()-t0, tg.Lease, err)
				return false
			}
			waited = true
			if err := clock.sleep(ctx, tg.Lease/10); err != nil {
				s.failf("%v", err)
				return false
			}
		}
	}
	if seen == nil {
		// Learn the key's state once the lease has passed.
		retry(fmt.Sprintf("Get(%s)", fmtKey(sc.key)), func() error {
			v, ok, err := b.Get(ctx, sc.key)
			if err == nil {
				got := ver{ok, string(v)}
				if got != newV && (got != oldV || acked) {
					s.failf("Get(%s) from B = %s, neither the old value %s nor the new one %s", fmtKey(sc.key),
						fmtState(ok, v), fmtState(oldV.present, []byte(oldV.val)), fmtState(newV.present, []byte(newV.val)))
				}
				seen = &got
			}
			return err
		})
	}
	if seen == nil {
		return
	}
	if seen.present {
		o.put(sc.key, []byte(seen.val))
	} else {
		o.del(sc.key)
	}
	var prev, next []byte
	for _, kv := range o.all() {
		switch {
		case kv.k < string(sc.key):
			prev = []byte(kv.k)
		case kv.k > string(sc.key) && next == nil:
			next = []byte(kv.k)
		}
	}
	seq := 0
	for _, k := range [][]byte{sc.key, prev, next} {
		if k == nil {
			continue
		}
		seq++
		val := makeValue(packTag(960, 3, seq), tg.vlen(16))
		if retry(fmt.Sprintf("Put(%s)", fmtKey(k)), func() error { return b.Put(ctx, k, val) }) {
			o.put(k, val)
		}
	}
	if len(s.problems) > 0 {
		return
	}

	// Everything recovered: writes succeed at once, from a new compute node
	// and from B.
	cc := open(pool.NewComputeNode(), "C")
	if cc == nil {
		return
	}
	idxs = append(idxs, cc)
	ck := &crashCheck{sw: &crashSweep{tg: tg, sc: sc}}
	ck.writeAround(ctx, cc, b, "C", "B", o)
	ck.writeAround(ctx, b, cc, "B", "C", o)
	s.problems = append(s.problems, ck.problems...)
	for _, kv := range o.all() {
		if p := checkGet(ctx, b, o, []byte(kv.k)); p != "" {
			s.failf("from B at the end: %s", p)
		}
	}
	if rec, ok := cc.(index.Recoverer); ok {
		if _, err := rec.Recover(ctx); err != nil {
			s.failf("Recover on C: %v", err)
		}
	} else {
		s.failf("%s does not implement index.Recoverer", tg.Name)
	}
	if err := tg.verifyErr(ctx, cc); err != nil {
		s.failf("Verify after Recover: %v", err)
	}
	if p := scanN(ctx, cc, nil, nil, -1).problem(o.all()); p != "" {
		s.failf("full scan from C at the end: %s", p)
	}
	if st := sumStats(b, cc); waited && st.Recovered == 0 {
		s.failf("writes from B waited for a lock of the silent node, but B and C count no recovered lock (Stats().Recovered = 0)")
	}
}
