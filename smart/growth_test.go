package smart_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/btree"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// The tests of docs/smart-node-growth.md: internal nodes allocated by size
// class (NODE_4 … NODE_256) that grow by moving to a node of the next type
// (freeze the slots, forward the header, publish, fix the children's
// reverse pointers), Options.PaperNodes (the paper's 256-slot nodes), and
// the repair of a move whose client stopped.
//
// Keys: the tree stores an order-preserving encoding of each key in which
// every byte but 0x00 and 0x01 stands for itself (docs/layouts.md), so keys
// that share a prefix p and differ in the byte after it are the children of
// one internal node: p+b for many b make that node fill through every
// class, and p+x+y for many x and y make a node and its children grow at
// once.

// growthLease is the lease of the trees of the crash tests: a mover that
// stood still that long (virtual time) is repaired by whoever waits on it.
const growthLease = time.Millisecond

// growthSeed derives the seed of a subtest from the base seed and the
// subtest's name.
func growthSeed(base uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := base ^ h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// growthKeyHash is the key's hash carried by its values.
func growthKeyHash(k []byte) uint64 {
	h := fnv.New64a()
	h.Write(k)
	return h.Sum64()
}

// gval returns a value of n bytes (at least 16) for key: the key's hash, a
// sequence number, and filler derived from both, so that a value read back
// names the write it came from and cannot pass for another key's value or
// for a torn mix.
func gval(key []byte, seq uint64, n int) []byte {
	n = max(n, 16)
	v := make([]byte, n)
	h := growthKeyHash(key)
	binary.BigEndian.PutUint64(v, h)
	binary.BigEndian.PutUint64(v[8:], seq)
	x := h ^ seq*0x9e3779b97f4a7c15
	for i := 16; i < n; i++ {
		v[i] = byte(x>>(8*(i%8))) ^ byte(i)
	}
	return v
}

// gvalOK reports whether v is a value gval made for key.
func gvalOK(key, v []byte) bool {
	return len(v) >= 16 && bytes.Equal(v, gval(key, binary.BigEndian.Uint64(v[8:]), len(v)))
}

// fmtV names a value made by gval.
func fmtV(v string) string {
	if len(v) < 16 {
		return fmt.Sprintf("garbage %x", v)
	}
	seq := binary.BigEndian.Uint64([]byte(v[8:]))
	return fmt.Sprintf("w%d#%d(%dB)", seq>>40, seq&(1<<40-1), len(v))
}

// gstate is a key's state: absent, or present with a value.
type gstate struct {
	present bool
	val     string
}

func (s gstate) String() string {
	if !s.present {
		return "absent"
	}
	return fmtV(s.val)
}

// gkey is a key of the oracle with the states it may be in: one once every
// write of it returned, more after a write whose outcome is unknown (it
// failed with ErrContention, or its client crashed).
type gkey struct {
	k      []byte
	states []gstate
}

func newGkey(k []byte) *gkey { return &gkey{k: k, states: []gstate{{}}} }

func (g *gkey) set(s gstate) { g.states = append(g.states[:0], s) }

func (g *gkey) maybe(s gstate) {
	if !slices.Contains(g.states, s) {
		g.states = append(g.states, s)
	}
}

func (g *gkey) allows(s gstate) bool { return slices.Contains(g.states, s) }

func (g *gkey) allowsPresence(present bool) bool {
	return slices.ContainsFunc(g.states, func(s gstate) bool { return s.present == present })
}

func (g *gkey) String() string {
	parts := make([]string, len(g.states))
	for i, s := range g.states {
		parts[i] = s.String()
	}
	return strings.Join(parts, " or ")
}

// growthOracle is the ordered model of the tree.
type growthOracle struct{ bt *btree.BTreeG[*gkey] }

func newGrowthOracle() *growthOracle {
	return &growthOracle{bt: btree.NewG(16, func(a, b *gkey) bool { return bytes.Compare(a.k, b.k) < 0 })}
}

func (o *growthOracle) add(k *gkey) {
	if _, dup := o.bt.ReplaceOrInsert(k); dup {
		panic(fmt.Sprintf("key %x added twice to the oracle", k.k))
	}
}

// growthPool returns a pool of two memory nodes, in the simulator if sim is
// set, closed when the test ends.
func growthPool(t testing.TB, sim *remote.SimConfig, nodeBytes int64) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: nodeBytes, ChunkBytes: 64 << 10, Sim: sim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// openGrowth opens the tree on cn, failing the test on error.
func openGrowth(t testing.TB, cn *remote.ComputeNode, opts smart.Options) *smart.Tree {
	t.Helper()
	tr, err := smart.Open(cn, opts)
	if err != nil {
		t.Fatalf("Open(%+v) on compute node %d: %v", opts, cn.ID(), err)
	}
	return tr
}

// growthPrefixEnd returns the smallest key above every key with prefix p,
// or nil if there is none.
func growthPrefixEnd(p []byte) []byte {
	q := slices.Clone(p)
	for i := len(q) - 1; i >= 0; i-- {
		if q[i]++; q[i] != 0 {
			return q[:i+1]
		}
	}
	return nil
}

func growthInRange(k, lo, hi []byte) bool {
	return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
}

// growthCheck compares the whole tree with the oracle: a full scan and a
// reverse scan from scanner, and a Get of every key from each tree of
// getters (compute nodes whose caches hold nodes that have moved since).
// It returns the problems found.
func growthCheck(ctx context.Context, o *growthOracle, scanner *smart.Tree, getters []*smart.Tree) []string {
	var problems []string
	failf := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, reverse := range []bool{false, true} {
		var got []smart.KV
		seq := scanner.Scan(ctx, nil, nil)
		if reverse {
			seq = scanner.ReverseScan(ctx, nil, nil)
		}
		for kv, err := range seq {
			if err != nil {
				failf("full scan (reverse %v): %v", reverse, err)
				return problems
			}
			got = append(got, kv)
		}
		if reverse {
			slices.Reverse(got)
		}
		i := 0
		o.bt.Ascend(func(g *gkey) bool {
			for i < len(got) && bytes.Compare(got[i].Key, g.k) < 0 {
				failf("full scan (reverse %v) yields %x = %s, which the oracle does not know", reverse, got[i].Key, fmtV(string(got[i].Value)))
				i++
			}
			s := gstate{}
			if i < len(got) && bytes.Equal(got[i].Key, g.k) {
				s = gstate{true, string(got[i].Value)}
				i++
			}
			if !g.allows(s) {
				failf("full scan (reverse %v): %x is %s, want %s", reverse, g.k, s, g)
			}
			return len(problems) < 20
		})
		for ; i < len(got) && len(problems) < 20; i++ {
			failf("full scan (reverse %v) yields %x = %s, which the oracle does not know (or out of order)", reverse, got[i].Key, fmtV(string(got[i].Value)))
		}
	}
	for ti, tr := range getters {
		o.bt.Ascend(func(g *gkey) bool {
			v, ok, err := tr.Get(ctx, g.k)
			switch {
			case err != nil:
				failf("Get(%x) from tree %d: %v", g.k, ti, err)
			case !g.allows(gstate{ok, string(v)}):
				failf("Get(%x) from tree %d = %s, want %s", g.k, ti, gstate{ok, string(v)}, g)
			}
			return len(problems) < 20
		})
	}
	return problems
}

// ---------------------------------------------------------------------------
// TestNodeGrowthOracle

// growthCfg sizes TestNodeGrowthOracle.
type growthCfg struct {
	trials   int   // runs, each on a pool of its own
	cns, per int   // compute nodes, goroutines per compute node
	rounds   int   // prefixes, each with a node that grows through every class
	nx       int   // children of each round's node (> 128: it reaches NODE_256)
	big      []int // children of some of its children, which grow at the same time
	hotOps   int   // hot-key operations per goroutine in the linearizability phase
	fill     int   // filler keys of the linearizability phase's node
}

func growthSize() growthCfg {
	if testing.Short() {
		return growthCfg{trials: 1, cns: 2, per: 4, rounds: 2, nx: 140, big: []int{12, 40}, hotOps: 40, fill: 140}
	}
	return growthCfg{trials: 4, cns: 3, per: 6, rounds: 5, nx: 150, big: []int{20, 70, 140}, hotOps: 100, fill: 150}
}

// growthPrefixLen is the length of a round's prefix: three bytes common to
// every round, a byte of the round (so that the rounds' nodes are the
// children of one node, which moves too when there are more than four),
// two random bytes.
const growthPrefixLen = 6

// growthRoundKeys returns the keys of one round under prefix p: p+x+y for
// cfg.nx distinct x, one or two y for most x and len(cfg.big) children
// with cfg.big[i] y each; p+x+y+z for some of them (the leaf of p+x+y
// splits into a node when both are in); and three families
// p+x+y+h+z, p+x+y+h[:j]+q that share a compressed path, so that whichever
// arrives later splits a header.
func growthRoundKeys(r *rand.Rand, p []byte, cfg growthCfg) [][]byte {
	seen := make(map[string]bool)
	var keys [][]byte
	add := func(parts ...byte) {
		k := append(slices.Clone(p), parts...)
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	xs := r.Perm(256)[:cfg.nx]
	for i, x := range xs {
		ny := 1 + r.IntN(2)
		if i < len(cfg.big) {
			ny = cfg.big[i]
		}
		for _, y := range r.Perm(256)[:ny] {
			add(byte(x), byte(y))
			if r.IntN(100) < 15 {
				add(byte(x), byte(y), byte(r.IntN(256)))
			}
		}
	}
	for range 3 {
		x, y := byte(xs[r.IntN(len(xs))]), byte(r.IntN(256))
		h := []byte{byte(2 + r.IntN(254)), byte(2 + r.IntN(254)), byte(2 + r.IntN(254)), byte(2 + r.IntN(254))}
		for range 3 {
			add(slices.Concat([]byte{x, y}, h, []byte{byte(r.IntN(256))})...)
		}
		for j := 1; j < len(h); j++ {
			add(slices.Concat([]byte{x, y}, h[:j], []byte{h[j] ^ byte(1+r.IntN(255))})...)
		}
	}
	return keys
}

// growthWorker is one goroutine of the oracle phase. It owns its keys: only
// it writes them, so their states are determined by its own calls.
type growthWorker struct {
	g      int
	tr     *smart.Tree
	r      *rand.Rand
	rounds [][]*gkey // own keys per round, in the order of their first insert
	all    []*gkey   // own keys inserted so far
	every  [][]byte  // every key of the phase, anyone's
	seq    uint64

	ops, contention, scans int
	problems               []string
}

func (w *growthWorker) failf(format string, args ...any) {
	if len(w.problems) < 10 {
		w.problems = append(w.problems, fmt.Sprintf("goroutine %d: ", w.g)+fmt.Sprintf(format, args...))
	}
}

// value returns a new value for k: small (an in-place update if the leaf
// has it), or, one time in five, large enough to outgrow its leaf.
func (w *growthWorker) value(k []byte) []byte {
	w.seq++
	n := 16 + w.r.IntN(9)
	if w.r.IntN(5) == 0 {
		n = 100 + w.r.IntN(300)
	}
	return gval(k, uint64(w.g)<<40|w.seq, n)
}

// pick returns an own key: mostly a recent one (its node is likely the one
// growing now), else any.
func (w *growthWorker) pick() *gkey {
	if w.r.IntN(10) < 7 {
		return w.all[len(w.all)-1-w.r.IntN(min(64, len(w.all)))]
	}
	return w.all[w.r.IntN(len(w.all))]
}

func (w *growthWorker) put(ctx context.Context, k *gkey) {
	v := w.value(k.k)
	w.ops++
	switch err := w.tr.Put(ctx, k.k, v); {
	case err == nil:
		k.set(gstate{true, string(v)})
	case errors.Is(err, smart.ErrContention):
		w.contention++
		k.maybe(gstate{true, string(v)})
	default:
		w.failf("Put(%x, %d bytes): %v", k.k, len(v), err)
	}
}

func (w *growthWorker) del(ctx context.Context, k *gkey) {
	w.ops++
	found, err := w.tr.Delete(ctx, k.k)
	switch {
	case err == nil:
		if !k.allowsPresence(found) {
			w.failf("Delete(%x) = %v, but the key is %s", k.k, found, k)
		}
		k.set(gstate{})
	case errors.Is(err, smart.ErrContention):
		w.contention++
		k.maybe(gstate{})
	default:
		w.failf("Delete(%x): %v", k.k, err)
	}
}

func (w *growthWorker) get(ctx context.Context, k *gkey) {
	w.ops++
	v, ok, err := w.tr.Get(ctx, k.k)
	switch {
	case err == nil:
		if s := (gstate{ok, string(v)}); !k.allows(s) {
			w.failf("Get(%x) = %s, want %s (its only writer is this goroutine)", k.k, s, k)
		}
	case errors.Is(err, smart.ErrContention):
		w.contention++
	default:
		w.failf("Get(%x): %v", k.k, err)
	}
}

// getOther reads a key anyone may be writing: absent, or a value made for
// that key.
func (w *growthWorker) getOther(ctx context.Context) {
	k := w.every[w.r.IntN(len(w.every))]
	w.ops++
	v, ok, err := w.tr.Get(ctx, k)
	switch {
	case err == nil:
		if ok && !gvalOK(k, v) {
			w.failf("Get(%x) = %x: not a value written for that key", k, v)
		}
	case errors.Is(err, smart.ErrContention):
		w.contention++
	default:
		w.failf("Get(%x): %v", k, err)
	}
}

// scan scans the range of a round's node or of one of its children,
// forward or backward: pairs in range, in order, once each, with values
// written for their keys; and every key of this goroutine in range (which
// nobody else writes, so present or absent for the whole scan) yielded
// exactly as the goroutine left it.
func (w *growthWorker) scan(ctx context.Context) {
	k := w.pick()
	lo := slices.Clone(k.k[:growthPrefixLen+w.r.IntN(2)])
	hi := growthPrefixEnd(lo)
	reverse := w.r.IntN(3) == 0
	seq := w.tr.Scan(ctx, lo, hi)
	if reverse {
		seq = w.tr.ReverseScan(ctx, lo, hi)
	}
	w.ops++
	w.scans++
	got := make(map[string]string)
	var prev []byte
	for kv, err := range seq {
		if errors.Is(err, smart.ErrContention) {
			w.contention++
			return
		}
		if err != nil {
			w.failf("Scan(%x, %x, reverse %v): %v", lo, hi, reverse, err)
			return
		}
		switch {
		case !growthInRange(kv.Key, lo, hi):
			w.failf("Scan(%x, %x, reverse %v) yields %x, out of range", lo, hi, reverse, kv.Key)
		case prev != nil && (bytes.Compare(prev, kv.Key) >= 0) != reverse || prev != nil && bytes.Equal(prev, kv.Key):
			w.failf("Scan(%x, %x, reverse %v) yields %x after %x", lo, hi, reverse, kv.Key, prev)
		case !gvalOK(kv.Key, kv.Value):
			w.failf("Scan(%x, %x, reverse %v) yields %x = %x, not a value written for that key", lo, hi, reverse, kv.Key, kv.Value)
		}
		prev = kv.Key
		got[string(kv.Key)] = string(kv.Value)
	}
	for _, own := range w.all {
		if !growthInRange(own.k, lo, hi) {
			continue
		}
		v, ok := got[string(own.k)]
		if s := (gstate{ok, v}); !own.allows(s) {
			w.failf("Scan(%x, %x, reverse %v): own key %x is %s, want %s", lo, hi, reverse, own.k, s, own)
		}
	}
}

// run inserts the goroutine's keys round after round, in its own order,
// mixed with updates (in place and outgrowing the leaf), deletes,
// re-inserts, reads and scans of the keys it inserted so far: most of them
// on recent keys, whose nodes are the ones moving.
func (w *growthWorker) run(ctx context.Context) {
	for _, pending := range w.rounds {
		for len(pending) > 0 && len(w.problems) == 0 && ctx.Err() == nil {
			if len(w.all) == 0 || w.r.IntN(100) < 55 {
				k := pending[0]
				pending = pending[1:]
				w.put(ctx, k)
				w.all = append(w.all, k)
				continue
			}
			switch x := w.r.IntN(100); {
			case x < 35:
				w.put(ctx, w.pick()) // an update, or a re-insert of a deleted key
			case x < 55:
				w.del(ctx, w.pick())
			case x < 75:
				w.get(ctx, w.pick())
			case x < 95:
				w.getOther(ctx)
			default:
				w.scan(ctx)
			}
		}
	}
}

// TestNodeGrowthOracle runs, in real time and in the simulator in InOrder,
// Strict and Skew modes, with the size classes and with PaperNodes, goroutines
// on several compute nodes that insert keys designed to make internal nodes
// move through every class while their children grow, split their leaves
// and split their headers, mixed with updates (some outgrowing the leaf),
// deletes, re-inserts, reads and scans. Every key has one writer, so its
// state is known: every read and scan is checked against it, and at the
// end a full scan and a Get of every key from every compute node (whose
// caches hold nodes that moved since) against an ordered oracle, after
// Verify. A second phase runs hot keys that every goroutine reads, writes
// and deletes, inside a node and a child that move meanwhile, and checks
// the history with porcupine.
func TestNodeGrowthOracle(t *testing.T) {
	base := testseed.Seed(t)
	transports := []struct {
		name string
		sim  *remote.SimConfig
	}{
		{"local", nil},
		{"sim-inorder", &remote.SimConfig{Ordering: remote.InOrder}},
		{"sim-strict", &remote.SimConfig{Ordering: remote.Strict}},
		// Verbs of one batch to different memory nodes land in either
		// order: N' or the new leaf on another memory node than N (M3), a
		// leaf split's reverse-pointer CAS and its publishing CAS (I3).
		{"sim-skew", &remote.SimConfig{Ordering: remote.Strict, Skew: 10 * time.Microsecond}},
	}
	for _, tp := range transports {
		for _, paper := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paper=%v", tp.name, paper), func(t *testing.T) {
				cfg := growthSize()
				for trial := range cfg.trials {
					seed := growthSeed(base, fmt.Sprintf("%s/%d", t.Name(), trial))
					t.Logf("trial %d: derived seed %#x (rerun with -seed=%d)", trial, seed, base)
					var sim *remote.SimConfig
					if tp.sim != nil {
						s := *tp.sim
						s.Seed = seed
						sim = &s
					}
					p := growthPool(t, sim, 512<<20)
					opts := smart.Options{PaperNodes: paper}
					trees := make([]*smart.Tree, cfg.cns)
					for i := range trees {
						trees[i] = openGrowth(t, p.NewComputeNode(), opts)
					}
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
					r := rand.New(rand.NewPCG(seed, 1))
					o := growthOraclePhase(t, ctx, p, trees, opts, cfg, r)
					if !t.Failed() {
						growthLinearizablePhase(t, ctx, p, trees, opts, cfg, r, o)
					}
					cancel()
					st := p.Stats()
					t.Logf("trial %d: %d keys; pool: %v; %.0f memory-node bytes per key", trial, o.bt.Len(), st,
						float64(st.AllocBytes-st.FreedBytes)/float64(o.bt.Len()))
					p.Close()
					if t.Failed() {
						return
					}
				}
			})
		}
	}
}

// growthOraclePhase runs the oracle phase and returns the oracle.
func growthOraclePhase(t *testing.T, ctx context.Context, p *remote.Pool, trees []*smart.Tree, opts smart.Options, cfg growthCfg, r *rand.Rand) *growthOracle {
	t.Helper()
	common := []byte{byte(2 + r.IntN(126)), byte(r.IntN(256)), byte(r.IntN(256))}
	roundBytes := r.Perm(256)[:cfg.rounds]
	n := cfg.cns * cfg.per
	workers := make([]*growthWorker, n)
	for g := range workers {
		workers[g] = &growthWorker{g: g, tr: trees[g%cfg.cns], r: rand.New(rand.NewPCG(r.Uint64(), uint64(g))),
			rounds: make([][]*gkey, cfg.rounds)}
	}
	var every [][]byte
	for round := range cfg.rounds {
		prefix := append(slices.Clone(common), byte(roundBytes[round]), byte(r.IntN(256)), byte(r.IntN(256)))
		keys := growthRoundKeys(r, prefix, cfg)
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for i, k := range keys {
			w := workers[i%n]
			w.rounds[round] = append(w.rounds[round], newGkey(k))
		}
		every = append(every, keys...)
	}
	for _, w := range workers {
		w.every = every
		p.Go(func() { w.run(ctx) })
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("pool.Wait: %v", err)
	}
	o := newGrowthOracle()
	ops, contention, scans := 0, 0, 0
	for _, w := range workers {
		for _, msg := range w.problems {
			t.Error(msg)
		}
		for _, k := range w.all {
			o.add(k)
		}
		ops, contention, scans = ops+w.ops, contention+w.contention, scans+w.scans
	}
	t.Logf("oracle phase: %d keys under %d prefixes, %d operations (%d scans) by %d goroutines on %d compute nodes, %d failed with ErrContention",
		len(every), cfg.rounds, ops, scans, n, cfg.cns, contention)
	if t.Failed() {
		return o
	}
	if err := trees[0].Verify(ctx); err != nil {
		t.Fatalf("Verify after the oracle phase: %v", err)
	}
	fresh := openGrowth(t, p.NewComputeNode(), opts)
	for _, msg := range growthCheck(ctx, o, fresh, append(slices.Clone(trees), fresh)) {
		t.Error("after the oracle phase: " + msg)
	}
	return o
}

// The linearizability model: one key's state (histories are partitioned by
// key).

type growthLinIn struct {
	kind byte // 'g', 'p', 'd'
	key  string
	val  string
}

type growthLinOut struct {
	found   bool
	val     string
	unknown bool // the call failed: it may or may not have taken effect
}

var growthLinModel = porcupine.Model{
	Partition: indextest.PartitionByKey(func(in any) string { return in.(growthLinIn).key }),
	Init:      func() any { return gstate{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(gstate), input.(growthLinIn), output.(growthLinOut)
		switch in.kind {
		case 'g':
			return out.found == st.present && (!out.found || out.val == st.val), st
		case 'p':
			return true, gstate{true, in.val}
		default:
			return out.unknown || out.found == st.present, gstate{}
		}
	},
	Equal: func(a, b any) bool { return a.(gstate) == b.(gstate) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(growthLinIn), output.(growthLinOut)
		switch {
		case in.kind == 'g':
			return fmt.Sprintf("get(%x) -> %s", in.key, gstate{out.found, out.val})
		case in.kind == 'p' && out.unknown:
			return fmt.Sprintf("put(%x, %s) -> failed (maybe applied)", in.key, fmtV(in.val))
		case in.kind == 'p':
			return fmt.Sprintf("put(%x, %s)", in.key, fmtV(in.val))
		case out.unknown:
			return fmt.Sprintf("delete(%x) -> failed (maybe applied)", in.key)
		default:
			return fmt.Sprintf("delete(%x) -> %v", in.key, out.found)
		}
	},
	DescribeState: func(state any) string { return state.(gstate).String() },
}

// checkGrowthLinearizable checks history with porcupine, writing the
// visualization of a violation to a temporary file.
func checkGrowthLinearizable(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(growthLinModel, history, 60*time.Second)
	t.Logf("porcupine: %d operations checked in %v: %v", len(history), time.Since(start).Round(time.Millisecond), res)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Logf("the linearizability check timed out; result unknown")
	default:
		path := "(not written)"
		if f, err := os.CreateTemp("", "growth-linearizability-*.html"); err == nil {
			if err := porcupine.Visualize(growthLinModel, info, f); err == nil {
				path = f.Name()
			}
			f.Close()
		}
		t.Errorf("the history of %d hot-key operations is not linearizable; visualization: %s", len(history), path)
	}
}

// growthLinearizablePhase runs hot keys under a fresh prefix q: q+x1
// (whose slot becomes a node with the fillers q+x1+y, which grows through
// the classes meanwhile), q+x1+y1 in that node, q+x2 and q+x2+z (a leaf
// split whenever both are in), and q+x3, a leaf of q's node, which grows
// through every class with the filler keys q+x+y that the goroutines insert
// in between. Every goroutine reads, writes (small and large values) and
// deletes hot keys; the history, with a final read of each hot key, must be
// linearizable. The fillers, one writer each, join the oracle, and the
// whole tree is checked again.
func growthLinearizablePhase(t *testing.T, ctx context.Context, p *remote.Pool, trees []*smart.Tree, opts smart.Options, cfg growthCfg, r *rand.Rand, o *growthOracle) {
	t.Helper()
	q := []byte{byte(130 + r.IntN(126)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
	xs := r.Perm(256)
	x1, x2, x3 := byte(xs[0]), byte(xs[1]), byte(xs[2])
	ys := r.Perm(256)
	cat := func(b ...byte) []byte { return append(slices.Clone(q), b...) }
	hot := [][]byte{cat(x1), cat(x1, byte(ys[0])), cat(x2), cat(x2, byte(r.IntN(256))), cat(x3)}
	var fillers [][]byte
	for _, y := range ys[1:41] {
		fillers = append(fillers, cat(x1, byte(y)))
	}
	for _, x := range xs[3 : 3+cfg.fill] {
		fillers = append(fillers, cat(byte(x), byte(r.IntN(256))))
	}
	r.Shuffle(len(fillers), func(i, j int) { fillers[i], fillers[j] = fillers[j], fillers[i] })

	var clock func() int64
	if p.Config().Sim != nil {
		clock = func() int64 { return int64(p.Now()) }
	} else {
		var c atomic.Int64
		clock = func() int64 { return c.Add(1) }
	}
	n := cfg.cns * cfg.per
	workers := make([]*growthWorker, n)
	histories := make([][]porcupine.Operation, n)
	for g := range workers {
		w := &growthWorker{g: g, tr: trees[g%cfg.cns], r: rand.New(rand.NewPCG(r.Uint64(), uint64(g)))}
		workers[g] = w
		var own []*gkey
		for i := g; i < len(fillers); i += n {
			own = append(own, newGkey(fillers[i]))
		}
		p.Go(func() {
			hotLeft := cfg.hotOps
			for (len(own) > 0 || hotLeft > 0) && len(w.problems) == 0 && ctx.Err() == nil {
				if len(own) > 0 && w.r.IntN(len(own)+hotLeft) < len(own) {
					w.put(ctx, own[0])
					w.all = append(w.all, own[0])
					own = own[1:]
					continue
				}
				hotLeft--
				k := hot[w.r.IntN(len(hot))]
				in := growthLinIn{key: string(k)}
				var out growthLinOut
				var err error
				call := clock()
				switch x := w.r.IntN(10); {
				case x < 4:
					in.kind = 'g'
					var v []byte
					v, out.found, err = w.tr.Get(ctx, k)
					out.val = string(v)
				case x < 8:
					in.kind = 'p'
					v := w.value(k)
					in.val = string(v)
					err = w.tr.Put(ctx, k, v)
				default:
					in.kind = 'd'
					out.found, err = w.tr.Delete(ctx, k)
				}
				ret := clock()
				w.ops++
				if err != nil {
					if !errors.Is(err, smart.ErrContention) {
						w.failf("hot key %x (%c): %v", k, in.kind, err)
						return
					}
					w.contention++
					if in.kind == 'g' {
						continue
					}
					out, ret = growthLinOut{unknown: true}, math.MaxInt64
				}
				histories[g] = append(histories[g], porcupine.Operation{ClientId: g, Input: in, Call: call, Output: out, Return: ret})
			}
		})
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("pool.Wait: %v", err)
	}
	var history []porcupine.Operation
	contention := 0
	for g, w := range workers {
		for _, msg := range w.problems {
			t.Error(msg)
		}
		history = append(history, histories[g]...)
		contention += w.contention
		for _, k := range w.all {
			o.add(k)
		}
	}
	if t.Failed() {
		return
	}
	// The final reads, from a compute node with a cold cache and from every
	// other: each must agree with the history.
	fresh := openGrowth(t, p.NewComputeNode(), opts)
	for i, k := range hot {
		for ti, tr := range append(slices.Clone(trees), fresh) {
			call := clock()
			v, ok, err := tr.Get(ctx, k)
			ret := clock()
			if err != nil {
				t.Fatalf("final Get(%x) from tree %d: %v", k, ti, err)
			}
			history = append(history, porcupine.Operation{ClientId: n + ti, Input: growthLinIn{kind: 'g', key: string(k)},
				Call: call, Output: growthLinOut{found: ok, val: string(v)}, Return: ret})
			if ti == len(trees) {
				g := newGkey(hot[i])
				g.set(gstate{ok, string(v)})
				o.add(g)
			}
		}
	}
	t.Logf("linearizability phase: %d hot keys, %d fillers, %d operations, %d failed with ErrContention", len(hot), len(fillers), len(history), contention)
	checkGrowthLinearizable(t, history)
	if err := fresh.Verify(ctx); err != nil {
		t.Fatalf("Verify after the linearizability phase: %v", err)
	}
	for _, msg := range growthCheck(ctx, o, fresh, append(slices.Clone(trees), fresh)) {
		t.Error("after the linearizability phase: " + msg)
	}
}

// ---------------------------------------------------------------------------
// TestNodeGrowthFootprint

// TestNodeGrowthFootprint loads the same random 8-byte keys with 8-byte
// values into a tree with the size classes and into one with PaperNodes,
// each in a pool of its own: the size classes must use at most 40% of the
// memory-node bytes of the paper's nodes (AllocBytes - FreedBytes of the
// pool's clients: the objects the tree allocated, moved-out nodes
// included).
func TestNodeGrowthFootprint(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	seen := make(map[uint64]bool, n)
	keys := make([][]byte, 0, n)
	for len(keys) < n {
		x := r.Uint64()
		if !seen[x] {
			seen[x] = true
			keys = append(keys, binary.BigEndian.AppendUint64(nil, x))
		}
	}
	ctx := t.Context()
	load := func(paper bool) (used uint64) {
		p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30, ChunkBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		tr := openGrowth(t, p.NewComputeNode(), smart.Options{PaperNodes: paper})
		const workers = 4
		errs := make([]error, workers)
		for w := range workers {
			p.Go(func() {
				for i := w; i < n; i += workers {
					if err := tr.Put(ctx, keys[i], binary.BigEndian.AppendUint64(nil, uint64(i))); err != nil {
						errs[w] = fmt.Errorf("Put(%x): %w", keys[i], err)
						return
					}
				}
			})
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("PaperNodes=%v: %v", paper, err)
		}
		st := p.Stats()
		used = st.AllocBytes - st.FreedBytes
		mem, err := p.MemoryUsed()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PaperNodes=%v: %d keys, %d bytes allocated (%.1f per key), memory nodes' allocators %v",
			paper, n, used, float64(used)/float64(n), mem)
		for i := 0; i < n; i += 97 {
			v, ok, err := tr.Get(ctx, keys[i])
			if err != nil || !ok || binary.BigEndian.Uint64(v) != uint64(i) {
				t.Fatalf("PaperNodes=%v: Get(%x) = %x, %v, %v", paper, keys[i], v, ok, err)
			}
		}
		if err := tr.Verify(ctx); err != nil {
			t.Fatalf("PaperNodes=%v: Verify: %v", paper, err)
		}
		return used
	}
	classes, paper := load(false), load(true)
	ratio := float64(classes) / float64(paper)
	t.Logf("size classes: %.1f bytes/key; paper nodes: %.1f bytes/key; ratio %.3f", float64(classes)/float64(n), float64(paper)/float64(n), ratio)
	if ratio > 0.40 {
		t.Errorf("the size classes use %d bytes, %.1f%% of the paper nodes' %d: want at most 40%%", classes, 100*ratio, paper)
	}
	// An 8-byte key and an 8-byte value take a 40-byte leaf (format
	// SMARTv4, docs/layouts.md): the tree cannot take less than its leaves.
	if classes < uint64(40*n) {
		t.Errorf("the size classes use %d bytes for %d keys: less than their 40-byte leaves", classes, n)
	}
}

// ---------------------------------------------------------------------------
// TestNodeGrowthOptions

// growthOpts names the options that decide the node layout.
func growthOpts(o smart.Options) string {
	return fmt.Sprintf("{LockedInternal: %v, PaperNodes: %v}", o.LockedInternal, o.PaperNodes)
}

// TestNodeGrowthOptions: the node layout is recorded in the tree. A tree
// created with the size classes refuses an Open with PaperNodes, and the
// other way round (ErrOptionsMismatch), before and after it holds keys,
// and stays usable by openers that agree. LockedInternal implies the
// paper's nodes: with or without PaperNodes it opens a tree created by the
// other spelling, works, and allocates exactly what LockedInternal with
// PaperNodes allocates (more than the size classes).
func TestNodeGrowthOptions(t *testing.T) {
	classes, paper := smart.Options{}, smart.Options{PaperNodes: true}
	locked, lockedPaper := smart.Options{LockedInternal: true}, smart.Options{LockedInternal: true, PaperNodes: true}
	tests := []struct {
		name          string
		first, second smart.Options
		want          error
	}{
		{"classes-then-paper", classes, paper, smart.ErrOptionsMismatch},
		{"paper-then-classes", paper, classes, smart.ErrOptionsMismatch},
		{"classes-twice", classes, classes, nil},
		{"paper-twice", paper, paper, nil},
		{"locked-twice", locked, locked, nil},
		{"locked-then-locked-paper", locked, lockedPaper, nil},
		{"locked-paper-then-locked", lockedPaper, locked, nil},
		{"locked-then-paper", locked, paper, smart.ErrOptionsMismatch},
		{"paper-then-locked", paper, locked, smart.ErrOptionsMismatch},
		{"locked-then-classes", locked, classes, smart.ErrOptionsMismatch},
		{"classes-then-locked", classes, locked, smart.ErrOptionsMismatch},
	}
	prefix := []byte("growth!")
	var keys [][]byte
	for b := range 40 {
		keys = append(keys, append(slices.Clone(prefix), byte(3*b+2)))
		if b%3 == 0 {
			keys = append(keys, append(slices.Clone(prefix), byte(3*b+2), 'z'))
		}
	}
	for _, tc := range tests {
		for _, written := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/written=%v", tc.name, written), func(t *testing.T) {
				ctx := t.Context()
				p := growthPool(t, nil, 64<<20)
				first := openGrowth(t, p.NewComputeNode(), tc.first)
				want := make(map[string]string)
				put := func(tr *smart.Tree, who string, ks [][]byte, seq uint64) {
					t.Helper()
					for _, k := range ks {
						v := gval(k, seq, 16)
						if err := tr.Put(ctx, k, v); err != nil {
							t.Fatalf("Put(%x) from %s: %v", k, who, err)
						}
						want[string(k)] = string(v)
					}
				}
				check := func(tr *smart.Tree, who string) {
					t.Helper()
					for k, v := range want {
						got, ok, err := tr.Get(ctx, []byte(k))
						if err != nil || !ok || string(got) != v {
							t.Fatalf("Get(%x) from %s = %s, %v, %v; want %s", k, who, fmtV(string(got)), ok, err, fmtV(v))
						}
					}
					if err := tr.Verify(ctx); err != nil {
						t.Fatalf("Verify from %s: %v", who, err)
					}
				}
				if written {
					put(first, "the first opener", keys[:len(keys)/2], 1)
				}
				second, err := smart.Open(p.NewComputeNode(), tc.second)
				if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
					t.Fatalf("Open(%s) of a tree created with %s: %v, want %v", growthOpts(tc.second), growthOpts(tc.first), err, tc.want)
				}
				if tc.want != nil {
					// Refused: the tree is intact and usable by openers that agree.
					put(first, "the first opener", keys, 2)
					check(first, "the first opener")
					third := openGrowth(t, p.NewComputeNode(), tc.first)
					check(third, "a third opener with the first's options")
					if _, err := smart.Open(p.NewComputeNode(), tc.second); !errors.Is(err, tc.want) {
						t.Fatalf("Open(%s) again, once the tree holds keys: %v, want %v", growthOpts(tc.second), err, tc.want)
					}
					return
				}
				put(second, "the second opener", keys[len(keys)/2:], 3)
				put(first, "the first opener", keys[:len(keys)/4], 4)
				check(first, "the first opener")
				check(second, "the second opener")
			})
		}
	}
	t.Run("locked-implies-paper", func(t *testing.T) {
		ctx := t.Context()
		alloc := func(opts smart.Options) uint64 {
			p := growthPool(t, nil, 64<<20)
			tr := openGrowth(t, p.NewComputeNode(), opts)
			for i, k := range keys {
				if err := tr.Put(ctx, k, gval(k, uint64(i), 16)); err != nil {
					t.Fatalf("%s: Put(%x): %v", growthOpts(opts), k, err)
				}
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatalf("%s: Verify: %v", growthOpts(opts), err)
			}
			st := p.Stats()
			return st.AllocBytes - st.FreedBytes
		}
		l, lp, c := alloc(locked), alloc(lockedPaper), alloc(classes)
		t.Logf("%d keys: LockedInternal %d bytes, LockedInternal+PaperNodes %d, size classes %d", len(keys), l, lp, c)
		if l != lp {
			t.Errorf("LockedInternal allocates %d bytes, LockedInternal with PaperNodes %d: LockedInternal must imply PaperNodes", l, lp)
		}
		if c >= l {
			t.Errorf("the size classes allocate %d bytes, LockedInternal %d: want fewer", c, l)
		}
	})
}

// ---------------------------------------------------------------------------
// TestNodeGrowthCrash

// growthCrash is one scenario of TestNodeGrowthCrash: a node with c
// children (full with the size classes: c is 4, 16 or 64, or 8 under a
// dense root; NODE_32 is full at 32), half of them internal nodes, and the
// insert of a (c+1)-th child, which makes it move.
type growthCrash struct {
	ord    remote.Ordering
	paper  bool
	c      int
	seed   uint64
	prefix []byte // 7 bytes: the node discriminates the 8th
	bs     []byte // child bytes: c preloaded, the insert's, then the later ones
	// dense preloads the root with more than 64 other children first, so
	// that the leaf split that creates the node makes it a NODE_8
	// (Tree.splitType), which moves to a NODE_32 (c is 8); otherwise the
	// node starts as a NODE_2 under a sparse root and grows NODE_4 →
	// NODE_16 → …
	dense bool
	// parentMoves preloads two siblings of the node (keys that leave the
	// prefix at its 7th byte), so that the node's parent is a NODE_4 of
	// three children, and has the stalled mover's peer fill that parent
	// and move it first (stallPoint).
	parentMoves bool
}

// sibling is the j-th key that leaves the node's prefix at its 7th byte:
// a child of the node's parent.
func (sc *growthCrash) sibling(j int) []byte {
	return append(slices.Clone(sc.prefix[:6]), sc.prefix[6]^byte(0x80+j), 0x50)
}

func newGrowthCrash(ord remote.Ordering, paper bool, c int, seed uint64) *growthCrash {
	r := rand.New(rand.NewPCG(seed, 3))
	sc := &growthCrash{ord: ord, paper: paper, c: c, seed: seed}
	for range 7 {
		sc.prefix = append(sc.prefix, byte(2+r.IntN(254)))
	}
	for _, b := range r.Perm(254)[:2*c+4] {
		sc.bs = append(sc.bs, byte(b+2))
	}
	return sc
}

func (sc *growthCrash) opts() smart.Options {
	return smart.Options{Lease: growthLease, PaperNodes: sc.paper}
}

// key is the key of the node's i-th child; sub(i, z) a key below it.
func (sc *growthCrash) key(i int) []byte         { return append(slices.Clone(sc.prefix), sc.bs[i]) }
func (sc *growthCrash) sub(i int, z byte) []byte { return append(sc.key(i), z) }

// preload is the node's c children; the odd ones are nodes (a leaf split of
// key(i) and sub(i, 0x40)).
func (sc *growthCrash) preload() [][]byte {
	var ks [][]byte
	if sc.dense {
		for b := range 80 {
			if k := byte(0x80 + b); k != sc.prefix[0] {
				ks = append(ks, []byte{k})
			}
		}
	}
	for i := range sc.c {
		ks = append(ks, sc.key(i))
	}
	for i := 1; i < sc.c; i += 2 {
		ks = append(ks, sc.sub(i, 0x40))
	}
	if sc.parentMoves {
		ks = append(ks, sc.sibling(0), sc.sibling(1))
	}
	return ks
}

// later is what the other compute node inserts after the crash: c more
// children of the node (with 16 children it moves again, to a NODE_64; the
// other sizes' successors hold them), a key below each of the first four
// children (two leaf splits, two inserts into child nodes).
func (sc *growthCrash) later() [][]byte {
	var ks [][]byte
	for i := sc.c + 1; i <= 2*sc.c; i++ {
		ks = append(ks, sc.key(i))
	}
	for i := range 4 {
		ks = append(ks, sc.sub(i, 0x41))
	}
	return ks
}

// growthPoint is what one fault or stall point did.
type growthPoint struct {
	done       bool   // the insert completed and no fault struck
	crashed    bool   // a fault stopped the client
	present    bool   // the insert's key is in the tree afterwards
	writeBytes uint64 // bytes carried by the insert's WRITEs
	verbs      uint64 // verbs the insert posted
	contention int    // calls that failed with ErrContention while the lease ran
	aDur, bDur time.Duration
	problems   []string
}

func (res *growthPoint) failf(format string, args ...any) {
	if len(res.problems) < 8 {
		res.problems = append(res.problems, fmt.Sprintf(format, args...))
	}
}

// growthModel is the expected content of a crash point's tree, in a fixed
// order (map order would make the simulated runs differ).
type growthModel struct {
	order []string
	val   map[string]string // absent: deleted
}

func (m *growthModel) put(k []byte, v []byte) {
	if m.val == nil {
		m.val = make(map[string]string)
	}
	if _, ok := m.val[string(k)]; !ok && !slices.Contains(m.order, string(k)) {
		m.order = append(m.order, string(k))
	}
	m.val[string(k)] = string(v)
}

func (m *growthModel) del(k []byte) { delete(m.val, string(k)) }

// check reads every key of m from tr with Get, and the whole tree with a
// scan.
func (m *growthModel) check(ctx context.Context, tr *smart.Tree, who string, res *growthPoint) {
	for _, k := range m.order {
		want, present := m.val[k]
		v, ok, err := tr.Get(ctx, []byte(k))
		if err != nil || ok != present || string(v) != want {
			res.failf("Get(%x) from %s = %s, %v; want %s", k, who, gstate{ok, string(v)}, err, gstate{present, want})
		}
	}
	var got []string
	for kv, err := range tr.Scan(ctx, nil, nil) {
		if err != nil {
			res.failf("Scan from %s: %v", who, err)
			return
		}
		if want, ok := m.val[string(kv.Key)]; !ok || want != string(kv.Value) {
			res.failf("Scan from %s yields %x = %s, want %s", who, kv.Key, fmtV(string(kv.Value)), gstate{ok, want})
		}
		got = append(got, string(kv.Key))
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) || len(got) != len(m.val) {
		res.failf("Scan from %s yields %d keys (sorted: %v), want the %d of the model", who, len(got), slices.IsSorted(got), len(m.val))
	}
}

// growthRetry calls fn until it returns anything but ErrContention, letting
// virtual time pass between calls with clk, until deadline (pool time).
func growthRetry(ctx context.Context, p *remote.Pool, clk *remote.Client, clkAddr remote.Addr, deadline time.Duration, res *growthPoint, what string, fn func() error) bool {
	buf := make([]byte, 8)
	for attempt := 1; ; attempt++ {
		err := fn()
		switch {
		case err == nil:
			return true
		case !errors.Is(err, smart.ErrContention):
			res.failf("%s: %v", what, err)
			return false
		case p.Now() > deadline:
			res.failf("%s still fails at %v after %d attempts: %v", what, p.Now(), attempt, err)
			return false
		}
		res.contention++
		clk.Compute(growthLease / 10)
		if err := clk.Read(ctx, clkAddr, buf); err != nil {
			res.failf("the test's clock: %v", err)
			return false
		}
	}
}

// newGrowthClock returns a client of a compute node of its own (no fault,
// no tree) with which a simulated goroutine lets virtual time pass.
func newGrowthClock(ctx context.Context, p *remote.Pool) (*remote.Client, remote.Addr, error) {
	c := p.NewComputeNode().NewClient()
	a, err := c.Named(ctx, "growth/clock", 8)
	return c, a, err
}

// afterMove checks a tree after an insert whose mover was stopped (crashed
// or stalled), from another compute node B; m holds every key but the
// insert's. The insert's key must be present with its value if acked, and
// is otherwise present or absent, the same for every reader ever after.
// Then B and A write more children of the moving node and below its
// children (retried while ErrContention lasts, until 20 leases after t0:
// waiters judge a mover that stood still for a lease and repair), Recover
// and Verify pass, a new compute node C and the others write at once, and
// every compute node reads the model.
func (sc *growthCrash) afterMove(ctx context.Context, p *remote.Pool, a, b *smart.Tree, m *growthModel, acked bool, t0 time.Duration, res *growthPoint) {
	key, val := sc.key(sc.c), gval(sc.key(sc.c), 2, 16)
	clk, clkAddr, err := newGrowthClock(ctx, p)
	if err != nil {
		res.failf("the test's clock: %v", err)
		return
	}
	deadline := t0 + 20*growthLease
	retry := func(what string, fn func() error) bool {
		return growthRetry(ctx, p, clk, clkAddr, deadline, res, what, fn)
	}
	for _, k := range m.order {
		want := m.val[k]
		retry(fmt.Sprintf("Get(%x) from B", k), func() error {
			v, ok, err := b.Get(ctx, []byte(k))
			if err == nil && (!ok || string(v) != want) {
				res.failf("Get(%x) from B = %s; want %s (written before the move)", k, gstate{ok, string(v)}, fmtV(want))
			}
			return err
		})
	}
	var seen *gstate
	retry(fmt.Sprintf("Get(%x) (the moving insert's key) from B", key), func() error {
		v, ok, err := b.Get(ctx, key)
		if err == nil {
			seen = &gstate{ok, string(v)}
		}
		return err
	})
	if seen == nil {
		return
	}
	switch {
	case seen.present && seen.val != string(val):
		res.failf("the moving insert's key %x = %s, want %s or absent", key, seen, fmtV(string(val)))
	case !seen.present && acked:
		res.failf("the moving insert's key %x is absent, but its Put returned nil", key)
	}
	res.present = seen.present
	if seen.present {
		m.put(key, val)
	}
	for i, k := range sc.later() {
		v := gval(k, 3, 16+8*(i%3))
		if retry(fmt.Sprintf("Put(%x) from B", k), func() error { return b.Put(ctx, k, v) }) {
			m.put(k, v)
		}
	}
	ka := sc.key(2*sc.c + 1)
	va := gval(ka, 4, 16)
	if retry(fmt.Sprintf("Put(%x) from A", ka), func() error { return a.Put(ctx, ka, va) }) {
		m.put(ka, va)
	}
	for _, reader := range []struct {
		name string
		tr   *smart.Tree
	}{{"A", a}, {"B", b}} {
		retry(fmt.Sprintf("Get(%x) (the moving insert's key) from %s", key, reader.name), func() error {
			v, ok, err := reader.tr.Get(ctx, key)
			switch got := (gstate{ok, string(v)}); {
			case err != nil || got == *seen:
			case sc.paper && !seen.present && got == (gstate{true, string(val)}):
				// The paper's type switch: the slot CAS landed, the header's
				// type did not, and an insert into the node raised it (I6):
				// the crashed insert took effect late, which the crash
				// contract allows (never the other way round). A move takes
				// effect if and only if its forward landed: no such case.
				*seen = got
				m.put(key, val)
			default:
				res.failf("Get(%x) (the moving insert's key) from %s = %s after more inserts into its node, but B read %s before them", key, reader.name, got, seen)
			}
			return err
		})
	}
	if len(res.problems) > 0 {
		return
	}
	if _, err := b.Recover(ctx); err != nil {
		res.failf("Recover on B: %v", err)
		return
	}
	if err := b.Verify(ctx); err != nil {
		res.failf("Verify after Recover: %v", err)
		return
	}
	// Everything is repaired: writes go through at once, from every
	// compute node.
	c, err := smart.Open(p.NewComputeNode(), sc.opts())
	if err != nil {
		res.failf("Open on C: %v", err)
		return
	}
	kc := sc.key(2*sc.c + 2)
	vc := gval(kc, 5, 16)
	if err := c.Put(ctx, kc, vc); err != nil {
		res.failf("Put(%x) from C after Recover: %v", kc, err)
	}
	m.put(kc, vc)
	nv := gval(key, 6, 200)
	if err := b.Put(ctx, key, nv); err != nil {
		res.failf("Put(%x) (the moving insert's key, a larger value) from B after Recover: %v", key, err)
	}
	m.put(key, nv)
	k0 := sc.key(0)
	if found, err := a.Delete(ctx, k0); err != nil || !found {
		res.failf("Delete(%x) from A after Recover: %v, %v; want true, nil", k0, found, err)
	}
	m.del(k0)
	if err := c.Verify(ctx); err != nil {
		res.failf("Verify at the end: %v", err)
	}
	m.check(ctx, c, "C", res)
	m.check(ctx, b, "B", res)
	m.check(ctx, a, "A", res)
}

// pool returns a simulated pool of the scenario's ordering and seed,
// closed when the test ends.
func (sc *growthCrash) pool(t *testing.T) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20, ChunkBytes: 64 << 10,
		Sim: &remote.SimConfig{Ordering: sc.ord, Seed: sc.seed}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// point runs the scenario with fault f armed on compute node A before the
// insert, on a pool of its own.
func (sc *growthCrash) point(t *testing.T, f remote.Fault) (res growthPoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := sc.pool(t)
	p.Go(func() {
		cnA := p.NewComputeNode()
		a, err := smart.Open(cnA, sc.opts())
		if err != nil {
			res.failf("Open on A: %v", err)
			return
		}
		var m growthModel
		for _, k := range sc.preload() {
			v := gval(k, 1, 16)
			if err := a.Put(ctx, k, v); err != nil {
				res.failf("preload Put(%x): %v", k, err)
				return
			}
			m.put(k, v)
		}
		key, val := sc.key(sc.c), gval(sc.key(sc.c), 2, 16)
		crashes, before := p.Crashes(), cnA.Stats()
		cnA.Crash(f)
		err = a.Put(ctx, key, val)
		d := cnA.Stats().Sub(before)
		res.writeBytes, res.verbs = d.WriteBytes, d.Verbs()
		res.crashed = p.Crashes() > crashes
		switch {
		case !res.crashed && err != nil:
			res.failf("Put(%x) with no fault striking: %v", key, err)
			return
		case !res.crashed:
			res.done = true
			cnA.Disarm()
		case err != nil && !errors.Is(err, remote.ErrCrashed):
			res.failf("Put(%x) stopped by fault %+v: %v; want nil or an error wrapping remote.ErrCrashed", key, f, err)
			return
		}
		acked, t0 := err == nil, p.Now()
		b, err := smart.Open(p.NewComputeNode(), sc.opts())
		if err != nil {
			res.failf("Open on B: %v", err)
			return
		}
		sc.afterMove(ctx, p, a, b, &m, acked, t0, &res)
	})
	if err := p.Wait(); err != nil {
		res.failf("pool.Wait: %v", err)
	}
	return res
}

// sweep runs the scenario at every fault point: After = 0, 1, … until the
// insert completes with no fault striking; every verb that is a WRITE is
// also cut inside.
func (sc *growthCrash) sweep(t *testing.T) {
	const maxAfter = 400
	points, failed, crashes, present, absent, contention := 0, 0, 0, 0, 0, 0
	var more []string
	run := func(f remote.Fault) growthPoint {
		res := sc.point(t, f)
		points++
		if res.crashed {
			crashes++
			if res.present {
				present++
			} else {
				absent++
			}
		}
		contention += res.contention
		if len(res.problems) > 0 {
			if failed++; failed <= 3 {
				t.Errorf("fault {After: %d, Words: %d} (crashed %v): \n\t%s", f.After, f.Words, res.crashed, strings.Join(res.problems, "\n\t"))
			} else {
				more = append(more, fmt.Sprintf("{%d,%d}", f.After, f.Words))
			}
		}
		return res
	}
	for k := 0; ; k++ {
		if k > maxAfter {
			t.Errorf("the insert still crashes with the fault After=%d", maxAfter)
			break
		}
		r0 := run(remote.Fault{After: k})
		if r0.done {
			t.Logf("the insert completed with no fault striking at After=%d: %d verbs, %d bytes written", k, r0.verbs, r0.writeBytes)
			if !sc.paper && r0.verbs < uint64(2*sc.c+4) {
				// M1, a freezing CAS per slot, M3's CAS, the publishing
				// CAS, a reverse-pointer CAS per child, M6.
				t.Errorf("the insert that moves a node of %d children posted %d verbs: fewer than a move (docs/smart-node-growth.md, M1–M6) needs (%d)", sc.c, r0.verbs, 2*sc.c+4)
			}
			break
		}
		rmax := run(remote.Fault{After: k, Words: 1 << 20})
		if rmax.writeBytes <= r0.writeBytes {
			continue // not a WRITE, or one word
		}
		// The WRITE lands cuts words at most when cut: try cuts inside it
		// (N' is written in one WRITE of 16 + 8·2c bytes, M3).
		cuts := int((rmax.writeBytes - r0.writeBytes) / 8)
		n := 4
		if testing.Short() {
			n = 1
		}
		var ws []int
		for j := 1; j <= n; j++ {
			ws = append(ws, j*(cuts-1)/n)
		}
		ws = append(ws, 1)
		slices.Sort(ws)
		for _, w := range slices.Compact(ws) {
			if w >= 1 && w < cuts {
				run(remote.Fault{After: k, Words: w})
			}
		}
	}
	t.Logf("%d fault points, %d crashed (the insert took effect at %d, not at %d), %d calls waited with ErrContention, %d failed",
		points, crashes, present, absent, contention, failed)
	if len(more) > 0 {
		t.Errorf("%d more failing fault points: %s", len(more), strings.Join(more, " "))
	}
	if crashes == 0 {
		t.Errorf("no fault point stopped the insert: the test tests nothing")
	}
	if present == 0 || absent == 0 {
		t.Errorf("over every fault point the crashed insert took effect %d times and not %d times: the points before and after its publication should give both", present, absent)
	}
}

// stallPoint runs the insert on compute node A while another goroutine,
// delta of virtual time after the insert began, charges every client of A
// five leases of CPU time (a paused process: its next verb, and its
// heartbeat, come five leases later) and then works from compute node B:
// reads every key, inserts more children into the node and below them
// (waiting, with ErrContention, until B judges the stalled mover and
// repairs), all while A is paused. A's insert must then complete: a mover
// whose forward was beaten by a repairer starts again; one past the forward
// finds its move done.
func (sc *growthCrash) stallPoint(t *testing.T, delta time.Duration) (res growthPoint) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := sc.pool(t)
	cnA := p.NewComputeNode()
	a := openGrowth(t, cnA, sc.opts())
	var m growthModel
	for _, k := range sc.preload() {
		v := gval(k, 1, 16)
		if err := a.Put(ctx, k, v); err != nil {
			t.Fatalf("preload Put(%x): %v", k, err)
		}
		m.put(k, v)
	}
	b := openGrowth(t, p.NewComputeNode(), sc.opts())
	clk, clkAddr, err := newGrowthClock(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	key, val := sc.key(sc.c), gval(sc.key(sc.c), 2, 16)
	var errA error
	t0 := p.Now()
	p.Go(func() {
		errA = a.Put(ctx, key, val)
		res.aDur = p.Now() - t0
	})
	p.Go(func() {
		clk.Compute(delta)
		if err := clk.Read(ctx, clkAddr, make([]byte, 8)); err != nil {
			res.failf("the test's clock: %v", err)
			return
		}
		// Clients are used by one goroutine at a time; this one only adds
		// CPU time to A's clients while the simulator runs this goroutine,
		// so A's goroutine is parked and spends it before its next verb.
		for _, c := range cnA.Clients() {
			c.Compute(5 * growthLease)
		}
		ts := p.Now()
		deadline := ts + 20*growthLease
		if sc.parentMoves {
			// The parent fills up and moves while the node's move is
			// stalled: the node's reverse pointer moves to the parent's
			// successor, and the repairer must move N''s along before it
			// publishes there.
			for j := 2; j < 4; j++ {
				k := sc.sibling(j)
				v := gval(k, 3, 16)
				if growthRetry(ctx, p, clk, clkAddr, deadline, &res, fmt.Sprintf("Put(%x) into the parent from B while A is paused", k), func() error { return b.Put(ctx, k, v) }) {
					m.put(k, v)
				}
			}
		}
		for _, k := range m.order {
			want := m.val[k]
			growthRetry(ctx, p, clk, clkAddr, deadline, &res, fmt.Sprintf("Get(%x) from B while A is paused", k), func() error {
				v, ok, err := b.Get(ctx, []byte(k))
				if err == nil && (!ok || string(v) != want) {
					res.failf("Get(%x) from B while A is paused = %s; want %s", k, gstate{ok, string(v)}, fmtV(want))
				}
				return err
			})
		}
		for i, k := range sc.later() {
			v := gval(k, 3, 16+8*(i%3))
			if growthRetry(ctx, p, clk, clkAddr, deadline, &res, fmt.Sprintf("Put(%x) from B while A is paused", k), func() error { return b.Put(ctx, k, v) }) {
				m.put(k, v)
			}
		}
		res.bDur = p.Now() - ts
	})
	if err := p.Wait(); err != nil {
		t.Fatalf("pool.Wait: %v", err)
	}
	if errA != nil {
		res.failf("the paused mover's Put(%x): %v; want nil (a mover replaced by a repairer starts again)", key, errA)
	}
	if len(res.problems) > 0 {
		return res
	}
	m.put(key, val)
	if _, err := b.Recover(ctx); err != nil {
		res.failf("Recover: %v", err)
	}
	if err := b.Verify(ctx); err != nil {
		res.failf("Verify: %v", err)
	}
	c := openGrowth(t, p.NewComputeNode(), sc.opts())
	ka := sc.key(2*sc.c + 1)
	va := gval(ka, 4, 16)
	if err := a.Put(ctx, ka, va); err != nil {
		res.failf("Put(%x) from A after its pause: %v", ka, err)
	}
	m.put(ka, va)
	m.check(ctx, c, "C", &res)
	m.check(ctx, a, "A", &res)
	m.check(ctx, b, "B", &res)
	return res
}

// stallSweep runs stallPoint at delays spread over the insert's duration,
// measured by a point whose stall comes after the insert.
func (sc *growthCrash) stallSweep(t *testing.T) {
	probe := sc.stallPoint(t, time.Second)
	if len(probe.problems) > 0 {
		t.Fatalf("the insert without a stall: \n\t%s", strings.Join(probe.problems, "\n\t"))
	}
	steps := 24
	if testing.Short() {
		steps = 8
	}
	hit, waited, failed := 0, 0, 0
	for i := 0; i <= steps; i++ {
		delta := probe.aDur * time.Duration(i) / time.Duration(steps)
		res := sc.stallPoint(t, delta)
		if res.aDur >= 5*growthLease {
			hit++
		}
		if res.bDur >= growthLease {
			waited++
		}
		if len(res.problems) > 0 {
			if failed++; failed <= 3 {
				t.Errorf("stall %v into the insert (the insert took %v, B's work %v): \n\t%s", delta, res.aDur, res.bDur, strings.Join(res.problems, "\n\t"))
			}
		}
	}
	t.Logf("the insert takes %v unstalled; %d stall points: %d stalled it, %d made B wait a lease or more; %d failed", probe.aDur, steps+1, hit, waited, failed)
	if hit == 0 || waited == 0 {
		t.Errorf("no stall point both paused the insert (%d did) and made B wait for it (%d did): the sweep missed the move", hit, waited)
	}
}

// TestNodeGrowthCrash stops the client of an insert that makes a full node
// (4, 16 or 64 children, half of them nodes; 4 and 16 with -short; and a
// NODE_8 of 8 children under a dense root, which moves to a NODE_32)
// move, at every verb and inside
// every WRITE, in the simulator in InOrder and Strict modes: the insert
// returns nil or remote.ErrCrashed; another compute node reads every key
// (present, with its value) and the insert's key (present with its value or
// absent, the same for every reader afterwards; present if the insert
// returned nil), inserts more children into the node and below its
// children, which must go through once waiters have judged the dead mover
// (lease 1 ms) and repaired; Recover and Verify pass; then writes go
// through at once from every compute node and the tree holds what it
// should. With PaperNodes the same insert switches the node's type in
// place: the control. Then the mover is paused past the lease instead
// (stall): the insert completes, and the others' work meanwhile too.
func TestNodeGrowthCrash(t *testing.T) {
	base := testseed.Seed(t)
	sizes := []int{4, 16, 64}
	if testing.Short() {
		sizes = []int{4, 16}
	}
	for _, ord := range []remote.Ordering{remote.InOrder, remote.Strict} {
		for _, paper := range []bool{false, true} {
			for _, c := range sizes {
				if paper && c != 4 {
					continue
				}
				t.Run(fmt.Sprintf("%v/paper=%v/children=%d", ord, paper, c), func(t *testing.T) {
					seed := growthSeed(base, t.Name())
					t.Logf("derived seed %#x (rerun with -seed=%d)", seed, base)
					newGrowthCrash(ord, paper, c, seed).sweep(t)
				})
			}
		}
		t.Run(fmt.Sprintf("%v/dense/children=8", ord), func(t *testing.T) {
			seed := growthSeed(base, t.Name())
			t.Logf("derived seed %#x (rerun with -seed=%d)", seed, base)
			sc := newGrowthCrash(ord, false, 8, seed)
			sc.dense = true
			sc.sweep(t)
			if !testing.Short() {
				sc.stallSweep(t)
			}
		})
		for _, c := range sizes {
			if testing.Short() && c != sizes[0] {
				continue
			}
			t.Run(fmt.Sprintf("%v/stall/children=%d", ord, c), func(t *testing.T) {
				seed := growthSeed(base, t.Name())
				t.Logf("derived seed %#x (rerun with -seed=%d)", seed, base)
				newGrowthCrash(ord, false, c, seed).stallSweep(t)
			})
			if c == sizes[0] {
				t.Run(fmt.Sprintf("%v/stall-parent-moves/children=%d", ord, c), func(t *testing.T) {
					seed := growthSeed(base, t.Name())
					t.Logf("derived seed %#x (rerun with -seed=%d)", seed, base)
					sc := newGrowthCrash(ord, false, c, seed)
					sc.parentMoves = true
					sc.stallSweep(t)
				})
			}
		}
	}
}

// TestMoveThroughCachedSlot: an insert that finds a full node through a
// cached parent slot moves it without reading that slot or the node again:
// one READ of the node and the move's five round trips
// (docs/smart-node-growth.md, the argument for not reading the slot), node, parent
// and leaf sharing the one memory node. Each insert starts from a cache
// refreshed by a search, and the move is the insert that allocates a
// NODE_16 and a leaf.
func TestMoveThroughCachedSlot(t *testing.T) {
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cn := p.NewComputeNode()
	tr := openGrowth(t, cn, smart.Options{})
	ctx := t.Context()
	key := func(x byte) []byte { return []byte{0xaa, 0xbb, x, 0, 0, 0, 0, 0} }
	const moveAlloc = 144 + 40 // a NODE_16 (16 + 16 × 8 bytes) and a 40-byte leaf
	moves := 0
	for x := range byte(8) {
		if _, _, err := tr.Get(ctx, key(0)); err != nil {
			t.Fatal(err)
		}
		before := cn.Stats()
		if err := tr.Put(ctx, key(x), []byte{x}); err != nil {
			t.Fatal(err)
		}
		d := cn.Stats().Sub(before)
		if d.AllocBytes != moveAlloc {
			continue
		}
		moves++
		if d.RoundTrips != 6 {
			t.Errorf("the insert of %x that moved its node took %d round trips (%v), want 6", key(x), d.RoundTrips, d)
		}
	}
	if moves != 1 {
		t.Fatalf("%d inserts allocated a NODE_16 and a leaf, want 1", moves)
	}
	for x := range byte(8) {
		if v, ok, err := tr.Get(ctx, key(x)); err != nil || !ok || !bytes.Equal(v, []byte{x}) {
			t.Fatalf("Get(%x) = %x, %v, %v", key(x), v, ok, err)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
