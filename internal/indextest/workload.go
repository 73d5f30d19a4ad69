package indextest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// The mixed workload of RunConcurrent and RunSim. Every goroutine owns a
// contiguous key range (its own prefix) and checks every result on it
// exactly, tracking for each key the set of states it may be in (a call
// that failed with ErrContention may or may not have been applied). It also
// reads the keys of other goroutines (any result must be a value written to
// that key, intact), reads and scans a preloaded stable range that nobody
// writes (exact), and runs Get, Put and Delete on a few hot keys shared by
// everybody, recorded for the linearizability checker. An index.Compacter
// is compacted meanwhile: one operation in 40 lays out the hot keys, the
// stable range or the goroutine's own keys again.

// ver is one possible state of a key.
type ver struct {
	present bool
	val     string
}

// ownedKey is a key of one goroutine and what the goroutine knows of it.
// Only the owner touches poss while the workload runs.
type ownedKey struct {
	key     []byte
	id      int
	poss    []ver // the states the key may be in; never empty
	pending []ver // writes of unknown outcome since the last known one
}

// observe checks that the key was seen in state (present, v) and collapses
// the knowledge to it, and to the writes of unknown outcome since the last
// known one: a write whose client crashed may still take effect later (a
// client that runs into what it published completes it), but never after a
// later acknowledged write.
func (k *ownedKey) observe(present bool, v []byte) string {
	for _, p := range k.poss {
		if p.present == present && (!present || p.val == string(v)) {
			k.poss = append(k.poss[:0], ver{present, string(v)})
			for _, q := range k.pending {
				if !slices.Contains(k.poss, q) {
					k.poss = append(k.poss, q)
				}
			}
			return ""
		}
	}
	return fmt.Sprintf("key %s seen %s, but it can only be %s", fmtKey(k.key), fmtState(present, v), k.describe())
}

// set records a write whose outcome is known (certain) or not.
func (k *ownedKey) set(v ver, certain bool) {
	if certain {
		k.poss, k.pending = append(k.poss[:0], v), k.pending[:0]
		return
	}
	if !slices.Contains(k.poss, v) {
		k.poss = append(k.poss, v)
	}
	k.pending = append(k.pending, v)
}

func (k *ownedKey) describe() string {
	var s []string
	for _, p := range k.poss {
		s = append(s, fmtState(p.present, []byte(p.val)))
	}
	return strings.Join(s, " or ")
}

func fmtState(present bool, v []byte) string {
	if !present {
		return "absent"
	}
	return fmtVal(v)
}

// workload configures one run of the mixed workload.
type workload struct {
	tg      Target
	idxs    []index.Index // one per compute node
	perCN   int           // goroutines per compute node
	ops     int           // operations per goroutine
	ownKeys int           // keys per goroutine
	hot     int           // number of hot keys (0: none)
	stable  int           // number of preloaded stable keys
	seed    uint64
	// clock timestamps the hot-key operations: virtual time in the
	// simulator, a shared counter in local mode.
	clock func() int64

	owned   [][]*ownedKey // per goroutine, sorted by key
	byKey   map[string]*ownedKey
	hotKeys [][]byte
	stables []okv // sorted
	ids     map[string]int
	// hotPct is the share of operations on the hot keys, in percent;
	// hotOnly makes every operation a hot-key operation. With hotEvery
	// set, only every hotEvery-th goroutine operates on the hot keys. A
	// goroutine has one operation under way at a time, so the goroutines
	// that use the hot keys bound how many operations on a key overlap,
	// and porcupine's search grows exponentially with that: with 256
	// goroutines on 8 hot keys, 20 to 30 overlapped and the check timed
	// out (30 s) in most runs.
	hotPct   int
	hotOnly  bool
	hotEvery int
	// plain runs every goroutine of the workload as a plain goroutine
	// instead of with Pool.Go, as a user who never calls Pool.Go would.
	plain bool
	// digest hashes the final full scan (set by finalCheck).
	digest uint64
	// crashFrac, if positive, injects crashes (Pool.InjectCrashes) while
	// the workload runs, at a rate meant to stop about that share of the
	// operations (see rateFor). An operation that returns an error
	// wrapping remote.ErrCrashed then has an unknown outcome, like one that
	// fails with ErrContention, and the final check runs Recover on every
	// compute node first (RunCrashRandom).
	crashFrac float64
	// crashPool and crashCap stop the injection once crashCap clients of
	// crashPool crashed (0: no cap; checked before each operation, so a
	// run may exceed it by the operations then under way). The rate is an
	// estimate from an uncontended preload and, on a few hot keys, stopped
	// about three times crashFrac; porcupine's search grows fast with the
	// operations that never return, and histories of 120 operations with
	// more than about 24 of them timed out (30 s) and proved nothing.
	crashPool *remote.Pool
	crashCap  uint64
	// stallFrac, if positive, pauses clients for stallPause
	// (Pool.InjectStalls) while the workload runs, at a rate meant to
	// pause about that share of the operations, and no more than
	// faultCapFactor times that many. A stall changes no outcome: every
	// operation is still checked exactly.
	stallFrac  float64
	stallPause time.Duration
}

// wlResult is what one goroutine of the workload found.
type wlResult struct {
	problems   []string
	ops        int
	contention int
	crashed    int // operations that returned remote.ErrCrashed
	history    []porcupine.Operation
}

func (r *wlResult) failf(format string, args ...any) {
	if len(r.problems) < 20 {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	}
}

// ownPrefix returns the prefix of goroutine g's keys: "o" and g in two
// bytes, so that the goroutines' first keys fan out under one node.
func ownPrefix(g int) []byte { return []byte{'o', byte(g >> 8), byte(g)} }

// build generates the key sets. It must be called before run.
func (w *workload) build() {
	tg := w.tg
	r := newRand(w.seed)
	w.byKey = make(map[string]*ownedKey)
	w.ids = make(map[string]int)
	id := 1
	n := len(w.idxs) * w.perCN
	w.owned = make([][]*ownedKey, n)
	for g := range n {
		seen := make(map[string]bool)
		var ks []*ownedKey
		for try := 0; len(ks) < w.ownKeys && try < 20*w.ownKeys; try++ {
			suffix := alphaKey(r, r.IntN(min(6, tg.MaxKeyLen-3)+1))
			k := tg.fitKey(append(ownPrefix(g), suffix...))
			if seen[string(k)] {
				continue
			}
			seen[string(k)] = true
			ok := &ownedKey{key: k, id: id, poss: []ver{{}}}
			id++
			ks = append(ks, ok)
			w.byKey[string(k)] = ok
			w.ids[string(k)] = ok.id
		}
		slices.SortFunc(ks, func(a, b *ownedKey) int { return bytes.Compare(a.key, b.key) })
		w.owned[g] = ks
	}
	hot := tg.dedupe([][]byte{[]byte("h"), []byte("h\x00"), []byte("hot"), []byte("hot1"), []byte("hot\xff"),
		[]byte("hot1\x00"), []byte("hx"), []byte("h\xff\xff"), []byte("hot2"), []byte("hot22")})
	w.hotKeys = hot[:min(w.hot, len(hot))]
	for _, k := range w.hotKeys {
		w.ids[string(k)] = id
		id++
	}
	seen := make(map[string]bool)
	for i := 0; len(w.stables) < w.stable && i < 4*w.stable; i++ {
		k := tg.fitKey(append([]byte{'s', byte(i >> 8), byte(i)}, alphaKey(r, r.IntN(3))...))
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		w.ids[string(k)] = id
		w.stables = append(w.stables, okv{string(k), string(makeValue(packTag(id, 0, 0), tg.randValueLen(r, 8)))})
		id++
	}
	slices.SortFunc(w.stables, func(a, b okv) int { return strings.Compare(a.k, b.k) })
}

// preload writes the stable keys through idx.
func (w *workload) preload(ctx context.Context, idx index.Index) error {
	for _, kv := range w.stables {
		if err := idx.Put(ctx, []byte(kv.k), []byte(kv.v)); err != nil {
			return fmt.Errorf("preload Put(%s): %w", fmtKey([]byte(kv.k)), err)
		}
	}
	return nil
}

// start starts every goroutine of the workload with w.spawn; results are
// valid after w.wait.
func (w *workload) start(ctx context.Context, pool *remote.Pool, wg *sync.WaitGroup) []*wlResult {
	n := len(w.idxs) * w.perCN
	res := make([]*wlResult, n)
	for g := range n {
		res[g] = &wlResult{}
		idx := w.idxs[g/w.perCN]
		w.spawn(pool, wg, func() { w.worker(ctx, g, idx, res[g]) })
	}
	return res
}

// spawn starts fn with pool.Go, or as a plain goroutine counted in wg if
// w.plain is set.
func (w *workload) spawn(pool *remote.Pool, wg *sync.WaitGroup, fn func()) {
	if w.plain {
		wg.Go(fn)
		return
	}
	pool.Go(fn)
}

// wait waits for the goroutines started by spawn.
func (w *workload) wait(pool *remote.Pool, wg *sync.WaitGroup) error {
	if w.plain {
		wg.Wait()
		return nil
	}
	return pool.Wait()
}

// worker is goroutine g of the workload.
func (w *workload) worker(ctx context.Context, g int, idx index.Index, res *wlResult) {
	tg := w.tg
	r := newRand(w.seed ^ mix64(uint64(g)+1))
	own := w.owned[g]
	seq := 0
	nextVal := func(id int) []byte {
		seq++
		return makeValue(packTag(id, g+1, seq), tg.randValueLen(r, 8))
	}
	for range w.ops {
		res.ops++
		if w.crashCap > 0 && w.crashPool.Crashes() >= w.crashCap {
			w.crashPool.InjectCrashes(0, 0)
		}
		if c, ok := idx.(index.Compacter); ok && r.IntN(40) == 0 {
			// Lay out the hot keys, the stable range or the goroutine's own
			// keys again while the others use them.
			lo := [][]byte{[]byte("h"), []byte("s"), ownPrefix(g)}[r.IntN(3)]
			hi := append(bytes.Clone(lo[:len(lo)-1]), lo[len(lo)-1]+1)
			if _, err := c.Compact(ctx, lo, hi); !w.tolerate(res, err, "Compact", lo) {
				return
			}
			continue
		}
		// x < 85 picks a non-hot operation by its share; hotPct of the
		// operations go to the hot keys.
		x := r.IntN(85)
		if w.hotOnly || (w.hot > 0 && (w.hotEvery == 0 || g%w.hotEvery == 0) && r.IntN(100) < w.hotPct) {
			x = 100
		}
		switch {
		case x < 30: // Put an own key
			k := own[r.IntN(len(own))]
			v := nextVal(k.id)
			err := idx.Put(ctx, k.key, v)
			if !w.tolerate(res, err, "Put", k.key) {
				return
			}
			k.set(ver{true, string(v)}, err == nil)
		case x < 47: // Get an own key
			k := own[r.IntN(len(own))]
			v, found, err := idx.Get(ctx, k.key)
			if !w.tolerate(res, err, "Get", k.key) {
				return
			}
			if err == nil {
				if p := k.observe(found, v); p != "" {
					res.failf("goroutine %d: Get: %s", g, p)
					return
				}
			}
		case x < 60: // Delete an own key
			k := own[r.IntN(len(own))]
			found, err := idx.Delete(ctx, k.key)
			if !w.tolerate(res, err, "Delete", k.key) {
				return
			}
			if err == nil && !slices.ContainsFunc(k.poss, func(v ver) bool { return v.present == found }) {
				res.failf("goroutine %d: Delete(%s) found=%v, but the key can only be %s", g, fmtKey(k.key), found, k.describe())
				return
			}
			if err == nil && !found {
				// An observation, not a write: it replaced nothing, so a
				// write of unknown outcome may still take effect after it
				// (SMART with LockedInternal: a Delete that finds no key
				// takes no lock, and a crashed insert's slot beyond its
				// node's type shows once another insert raises the type;
				// TestCrash/locked-internal/random/mixed-inorder -short
				// -seed=1030).
				k.observe(false, nil)
			} else {
				k.set(ver{}, err == nil)
			}
		case x < 66: // Scan the own range
			limit := -1
			if r.IntN(2) == 0 {
				limit = 1 + r.IntN(len(own))
			}
			if p := w.scanOwn(ctx, idx, g, limit, res); p != "" {
				res.failf("goroutine %d: scan of its own range, limit %d: %s", g, limit, p)
				return
			}
		case x < 74: // Get another goroutine's key
			og := r.IntN(len(w.owned))
			k := w.owned[og][r.IntN(len(w.owned[og]))]
			v, found, err := idx.Get(ctx, k.key)
			if !w.tolerate(res, err, "Get", k.key) {
				return
			}
			if err == nil && found {
				if tag, ok := checkValue(v); !ok || tagKey(tag) != k.id {
					res.failf("goroutine %d: Get(%s) of goroutine %d's key returned %s, which was never written to it", g, fmtKey(k.key), og, fmtVal(v))
					return
				}
			}
		case x < 85: // Read the stable range
			if len(w.stables) == 0 {
				break
			}
			if r.IntN(2) == 0 {
				kv := w.stables[r.IntN(len(w.stables))]
				v, found, err := idx.Get(ctx, []byte(kv.k))
				if !w.tolerate(res, err, "Get", []byte(kv.k)) {
					return
				}
				if err == nil && (!found || string(v) != kv.v) {
					res.failf("goroutine %d: Get(%s) of a stable key = %s, %v; want %s", g, fmtKey([]byte(kv.k)), fmtVal(v), found, fmtVal([]byte(kv.v)))
					return
				}
				break
			}
			lo := []byte(w.stables[r.IntN(len(w.stables))].k)
			limit := 1 + r.IntN(32)
			s := scanN(ctx, idx, lo, []byte("t"), limit)
			if limit%2 == 0 { // half of them told their length
				s = scanLimit(ctx, idx, lo, []byte("t"), limit)
			}
			if s.err != nil && (isContention(s.err) || w.crashFrac > 0 && isCrash(s.err)) {
				w.tolerate(res, s.err, "Scan", lo)
				break
			}
			i := sort.Search(len(w.stables), func(i int) bool { return w.stables[i].k >= string(lo) })
			want := w.stables[i:min(len(w.stables), i+limit)]
			if p := s.problem(want); p != "" {
				res.failf("goroutine %d: Scan(%s, \"t\") limit %d of the stable range: %s", g, fmtKey(lo), limit, p)
				return
			}
		default: // A hot key
			w.hotOp(ctx, g, idx, r, res, nextVal)
		}
	}
}

// tolerate reports whether the workload goes on after err: nil and
// ErrContention (counted) do, anything else is a failure.
func (w *workload) tolerate(res *wlResult, err error, call string, key []byte) bool {
	switch {
	case err == nil:
		return true
	case isContention(err):
		res.contention++
		return true
	case w.crashFrac > 0 && isCrash(err):
		res.crashed++
		return true
	}
	res.failf("%s(%s): %v", call, fmtKey(key), err)
	return false
}

// scanOwn scans goroutine g's range and checks it against its knowledge. A
// scan that fails with a tolerated error (see tolerate) is counted in res
// and checks nothing.
func (w *workload) scanOwn(ctx context.Context, idx index.Index, g, limit int, res *wlResult) string {
	own := w.owned[g]
	lo, hi := ownPrefix(g), ownPrefix(g+1)
	if w.tg.FixedKeyLen > 0 {
		lo = w.tg.fitKey(lo)
	}
	var s scanOut
	if limit > 0 && limit%2 == 0 { // half of the bounded scans told their length
		s = scanLimit(ctx, idx, lo, hi, limit)
	} else {
		s = scanN(ctx, idx, lo, hi, limit)
	}
	if len(s.proto) > 0 {
		return "iterator protocol: " + strings.Join(s.proto, "; ")
	}
	if s.err != nil {
		if isContention(s.err) || w.crashFrac > 0 && isCrash(s.err) {
			w.tolerate(res, s.err, "Scan", lo)
			return ""
		}
		return s.err.Error()
	}
	complete := limit < 0 || len(s.kvs) < limit
	j := 0
	for i, kv := range s.kvs {
		if i > 0 && bytes.Compare(kv.Key, s.kvs[i-1].Key) <= 0 {
			return fmt.Sprintf("key %s after %s", fmtKey(kv.Key), fmtKey(s.kvs[i-1].Key))
		}
		for j < len(own) && bytes.Compare(own[j].key, kv.Key) < 0 {
			if p := own[j].observe(false, nil); p != "" {
				return "missing: " + p
			}
			j++
		}
		if j == len(own) || !bytes.Equal(own[j].key, kv.Key) {
			return fmt.Sprintf("yielded key %s, which was never written in this range", fmtKey(kv.Key))
		}
		if p := own[j].observe(true, kv.Value); p != "" {
			return p
		}
		j++
	}
	if complete {
		for ; j < len(own); j++ {
			if p := own[j].observe(false, nil); p != "" {
				return "missing at the end: " + p
			}
		}
	}
	return ""
}

// Hot-key operations for the linearizability checker.
type linKind uint8

const (
	linGet linKind = iota
	linPut
	linDelete
)

type linInput struct {
	kind linKind
	key  string
	val  string
}

type linOutput struct {
	val     string
	found   bool
	unknown bool // the call failed: it may or may not have been applied
}

// hotOp runs one operation on a random hot key and records it.
func (w *workload) hotOp(ctx context.Context, g int, idx index.Index, r *rand.Rand, res *wlResult, nextVal func(int) []byte) {
	k := w.hotKeys[r.IntN(len(w.hotKeys))]
	in := linInput{key: string(k)}
	var out linOutput
	var err error
	call := w.clock()
	switch x := r.IntN(10); {
	case x < 4:
		in.kind = linGet
		var v []byte
		v, out.found, err = idx.Get(ctx, k)
		out.val = string(v)
	case x < 8:
		in.kind = linPut
		v := nextVal(w.ids[string(k)])
		in.val = string(v)
		err = idx.Put(ctx, k, v)
	default:
		in.kind = linDelete
		out.found, err = idx.Delete(ctx, k)
	}
	ret := w.clock()
	if err != nil {
		switch {
		case isContention(err):
			res.contention++
		case w.crashFrac > 0 && isCrash(err):
			res.crashed++
		default:
			res.failf("goroutine %d: hot key %s: %v", g, fmtKey(k), err)
		}
		if in.kind == linGet {
			return
		}
		out, ret = linOutput{unknown: true}, math.MaxInt64
	}
	res.history = append(res.history, porcupine.Operation{ClientId: g, Input: in, Call: call, Output: out, Return: ret})
}

// finalCheck runs after the workload, alone: it reads every hot key once
// (appended to history), then checks a full scan of idx against the
// goroutines' knowledge, the stable keys and the final hot values.
func (w *workload) finalCheck(ctx context.Context, idx index.Index, history *[]porcupine.Operation) []string {
	var problems []string
	failf := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	hotVals := make(map[string]ver)
	for _, k := range w.hotKeys {
		call := w.clock()
		v, found, err := idx.Get(ctx, k)
		if err != nil {
			failf("final Get(%s): %v", fmtKey(k), err)
			continue
		}
		hotVals[string(k)] = ver{found, string(v)}
		*history = append(*history, porcupine.Operation{ClientId: len(w.owned), Input: linInput{kind: linGet, key: string(k)},
			Call: call, Output: linOutput{val: string(v), found: found}, Return: w.clock()})
	}
	s := scanN(ctx, idx, nil, nil, -1)
	if len(s.proto) > 0 || s.err != nil {
		failf("final full scan: protocol %v, error %v", s.proto, s.err)
		return problems
	}
	seen := make(map[string]bool, len(s.kvs))
	for i, kv := range s.kvs {
		k := string(kv.Key)
		w.digest = mix64(w.digest ^ hashString(k) ^ hashString(string(kv.Value))*7)
		if i > 0 && k <= string(s.kvs[i-1].Key) {
			failf("final full scan: key %s after %s", fmtKey(kv.Key), fmtKey(s.kvs[i-1].Key))
		}
		seen[k] = true
		if ok := w.byKey[k]; ok != nil {
			if p := ok.observe(true, kv.Value); p != "" {
				failf("final full scan: %s", p)
			}
			continue
		}
		if hv, ok := hotVals[k]; ok {
			if !hv.present || hv.val != string(kv.Value) {
				failf("final full scan: hot key %s = %s, but Get returned %s", fmtKey(kv.Key), fmtVal(kv.Value), fmtState(hv.present, []byte(hv.val)))
			}
			continue
		}
		i := sort.Search(len(w.stables), func(i int) bool { return w.stables[i].k >= k })
		if i < len(w.stables) && w.stables[i].k == k {
			if w.stables[i].v != string(kv.Value) {
				failf("final full scan: stable key %s = %s, want %s", fmtKey(kv.Key), fmtVal(kv.Value), fmtVal([]byte(w.stables[i].v)))
			}
			continue
		}
		failf("final full scan: key %s was never written", fmtKey(kv.Key))
	}
	for _, own := range w.owned {
		for _, k := range own {
			if !seen[string(k.key)] {
				if p := k.observe(false, nil); p != "" {
					failf("final full scan: missing %s", p)
				}
			}
		}
	}
	for _, kv := range w.stables {
		if !seen[kv.k] {
			failf("final full scan: stable key %s is missing", fmtKey([]byte(kv.k)))
		}
	}
	for k, hv := range hotVals {
		if hv.present && !seen[k] {
			failf("final full scan: hot key %s is missing, but Get found it", fmtKey([]byte(k)))
		}
	}
	return problems
}

// summarize gathers the goroutines' problems, operation and contention
// counts and histories. Contention on more than 5% of the operations is a
// problem too.
func summarize(res []*wlResult) (problems []string, history []porcupine.Operation, ops, contention int) {
	for _, r := range res {
		problems = append(problems, r.problems...)
		history = append(history, r.history...)
		ops += r.ops
		contention += r.contention
	}
	if contention*20 > ops {
		problems = append(problems, fmt.Sprintf("%d of %d operations failed with ErrContention (more than 5%%)", contention, ops))
	}
	return problems, history, ops, contention
}

// mixedRun is the outcome of runMixed.
type mixedRun struct {
	problems   []string
	history    []porcupine.Operation
	ops        int
	contention int
	crashed    int          // operations that returned remote.ErrCrashed
	crashes    uint64       // crashes injected (remote.Pool.Crashes)
	stalls     uint64       // stalls injected (remote.Pool.Stalls)
	recovered  int          // locks that the final Recover calls recovered
	idxStats   index.Stats  // the indexes' Stats summed, at the end (crash runs)
	now        int64        // pool.Now() at the end
	stats      remote.Stats // pool.Stats() at the end
	digest     uint64       // hash of the final full scan and of the history
}

// faultCapFactor sets the caps of crash and stall injection in multiples of
// the faults workload.crashFrac and stallFrac ask for.
const faultCapFactor = 1.5

// runMixed opens the index called name on cns new compute nodes of pool
// (concurrently),
// preloads the stable keys, runs the workload, checks the final state and
// runs Verify. Every step runs in goroutines started by pool.Go (plain
// goroutines if w.plain is set), so it works the same in local mode and in
// the simulator.
func runMixed(ctx context.Context, tg Target, pool *remote.Pool, name string, w *workload, cns int) (out mixedRun) {
	fail := func(format string, args ...any) { out.problems = append(out.problems, fmt.Sprintf(format, args...)) }
	var wg sync.WaitGroup
	phase := func(name string, fns ...func()) bool {
		for _, fn := range fns {
			w.spawn(pool, &wg, fn)
		}
		if err := w.wait(pool, &wg); err != nil {
			fail("%s: pool.Wait: %v", name, err)
			return false
		}
		return len(out.problems) == 0
	}
	w.idxs = make([]index.Index, cns)
	errs := make([]error, cns)
	var opens []func()
	for c := range cns {
		cn := pool.NewComputeNode()
		opens = append(opens, func() {
			idx, err := tg.Open(cn, name)
			if err == nil && idx == nil {
				err = fmt.Errorf("Open returned a nil index")
			}
			w.idxs[c], errs[c] = idx, err
		})
	}
	phase("open", opens...)
	for c, err := range errs {
		if err != nil {
			fail("Open on compute node %d: %v", c, err)
		}
	}
	if len(out.problems) > 0 {
		return out
	}
	defer func() {
		var closes []func()
		for _, idx := range w.idxs {
			closes = append(closes, func() { idx.Close() })
		}
		phase("close", closes...)
	}()
	w.build()
	start := pool.Now()
	if !phase("preload", func() {
		if err := w.preload(ctx, w.idxs[0]); err != nil {
			fail("%v", err)
		}
	}) {
		return out
	}
	total := float64(len(w.idxs) * w.perCN * w.ops)
	if w.crashFrac > 0 {
		w.crashPool, w.crashCap = pool, uint64(math.Ceil(faultCapFactor*w.crashFrac*total))
		pool.InjectCrashes(w.rateFor(w.crashFrac, pool.Now()-start), w.seed)
	}
	if w.stallFrac > 0 {
		pool.InjectStalls(remote.Stalls{Rate: w.rateFor(w.stallFrac, pool.Now()-start), Pause: w.stallPause,
			Max: uint64(math.Ceil(faultCapFactor * w.stallFrac * total)), Seed: w.seed})
	}
	res := w.start(ctx, pool, &wg)
	if !phase("workload") {
		return out
	}
	if w.crashFrac > 0 {
		out.crashes = pool.InjectCrashes(0, 0)
	}
	if w.stallFrac > 0 {
		out.stalls = pool.InjectStalls(remote.Stalls{})
	}
	problems, history, ops, contention := summarize(res)
	out.problems = append(out.problems, problems...)
	out.ops, out.contention = ops, contention
	for _, r := range res {
		out.crashed += r.crashed
	}
	phase("final check", func() {
		if w.crashFrac > 0 {
			out.problems = append(out.problems, w.recoverAll(ctx, &out)...)
		}
		out.problems = append(out.problems, w.finalCheck(ctx, w.idxs[len(w.idxs)-1], &history)...)
		if err := tg.verifyErr(ctx, w.idxs[0]); err != nil {
			fail("Verify after the workload: %v", err)
		}
	})
	out.history = history
	out.now = int64(pool.Now())
	out.stats = pool.Stats()
	out.digest = w.digest ^ mix64(uint64(len(history)))
	for _, op := range history {
		in, o := op.Input.(linInput), op.Output.(linOutput)
		out.digest = mix64(out.digest ^ uint64(op.Call)*31 ^ uint64(op.Return) ^ hashString(in.key+in.val+o.val))
	}
	return out
}

// hashString is FNV-1a.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}
