package indextest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// Target describes an index under test.
type Target struct {
	// Name identifies the index in messages.
	Name string
	// Open opens (or creates) the index called name on cn. Opening the same
	// name on several compute nodes of one pool must give one shared index.
	// In the simulator Open is called from a goroutine started by Pool.Go.
	Open func(cn *remote.ComputeNode, name string) (index.Index, error)
	// Verify checks the remote structure of the index (nil: skipped). It is
	// called after every randomized test and at intervals during the long
	// ones, never concurrently with operations of the battery.
	Verify func(ctx context.Context, idx index.Index) error
	// MaxKeyLen is the longest key accepted, 8..255. The battery needs keys
	// of at least 8 bytes to build its workloads.
	MaxKeyLen int
	// MaxValueLen is the largest value accepted, at least 8.
	MaxValueLen int
	// FixedKeyLen, if > 0, narrows the contract: the index accepts only keys
	// of exactly this length (it must equal MaxKeyLen). The battery then
	// generates only such keys (shorter ones are padded with 0x00 bytes) and
	// still expects ErrEmptyKey and ErrKeyTooLong.
	FixedKeyLen int
	// FixedValueLen, if > 0, narrows the contract: the index accepts only
	// values of exactly this length (it must equal MaxValueLen, at least 8).
	// The battery then writes only such values and still expects
	// ErrValueTooLarge for longer ones.
	FixedValueLen int

	// Lease is the lease the indexes opened by Open use to judge a silent
	// compute node dead (the time after which its locks are taken over;
	// set the index's option for it in Open). RunSilentNode skips when it
	// is zero. A millisecond or less keeps it fast.
	Lease time.Duration

	// Config, if set, is the pool configuration of the tests that run in
	// real time (default: two local memory nodes): e.g. remote.Config.Shm
	// or remote.Config.TCP, to run the battery over another transport. The
	// simulated tests keep their own pools.
	Config *remote.Config

	// pool, if set, is the local pool the subtests of one battery share:
	// each opens its index under its own name on new compute nodes, which
	// is much cheaper than zeroing a pool per subtest.
	pool *remote.Pool
}

// withPool returns tg with a real-time pool shared by the subtests of t.
func (tg Target) withPool(t testing.TB) Target {
	tg.pool = newPool(t, tg.realConfig())
	return tg
}

// realConfig is the pool configuration of the tests that run in real time.
func (tg Target) realConfig() remote.Config {
	if tg.Config != nil {
		return *tg.Config
	}
	return localConfig()
}

// Run runs every battery of the package against tg as subtests. The long
// parts shrink or skip under testing.Short().
func Run(t *testing.T, tg Target) {
	RunRealTime(t, tg)
	t.Run("sim", func(t *testing.T) { RunSim(t, tg) })
}

// RunRealTime runs the batteries that run in real time (all but RunSim),
// on pools of tg.Config if set.
func RunRealTime(t *testing.T, tg Target) {
	checkTarget(t, tg)
	t.Run("keys", func(t *testing.T) { RunKeys(t, tg) })
	RunTransport(t, tg)
}

// RunTransport runs the batteries that exercise a transport, on pools of
// tg.Config (see TCPConfig and ShmConfig): every real-time battery but
// RunKeys, whose key shapes test the tree's structure rather than the
// memory under it, and which the local transport covers.
func RunTransport(t *testing.T, tg Target) {
	checkTarget(t, tg)
	t.Run("basic", func(t *testing.T) { RunBasic(t, tg) })
	t.Run("errors", func(t *testing.T) { RunErrors(t, tg) })
	t.Run("oracle", func(t *testing.T) { RunOracle(t, tg) })
	t.Run("scan", func(t *testing.T) { RunScan(t, tg) })
	t.Run("concurrent", func(t *testing.T) { RunConcurrent(t, tg) })
	t.Run("linearizable", func(t *testing.T) { RunLinearizable(t, tg) })
}

// checkTarget stops the test if tg is not usable.
func checkTarget(t testing.TB, tg Target) {
	t.Helper()
	var errs []error
	if tg.Open == nil {
		errs = append(errs, errors.New("Open is nil"))
	}
	if tg.MaxKeyLen < 8 || tg.MaxKeyLen > 255 {
		errs = append(errs, fmt.Errorf("MaxKeyLen %d not in 8..255", tg.MaxKeyLen))
	}
	if tg.MaxValueLen < 8 {
		errs = append(errs, fmt.Errorf("MaxValueLen %d < 8", tg.MaxValueLen))
	}
	if tg.FixedKeyLen != 0 && tg.FixedKeyLen != tg.MaxKeyLen {
		errs = append(errs, fmt.Errorf("FixedKeyLen %d != MaxKeyLen %d", tg.FixedKeyLen, tg.MaxKeyLen))
	}
	if tg.FixedValueLen != 0 && tg.FixedValueLen != tg.MaxValueLen {
		errs = append(errs, fmt.Errorf("FixedValueLen %d != MaxValueLen %d", tg.FixedValueLen, tg.MaxValueLen))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("indextest: invalid Target %q: %v", tg.Name, err)
	}
}

// seedFor returns the seed of the running (sub)test, derived from the base
// seed and the test's name, and logs how to reproduce it.
func seedFor(t testing.TB) uint64 {
	t.Helper()
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	s := mix64(testseed.Base() ^ h.Sum64())
	t.Logf("seed: rerun with -seed=%d (derived seed %#x)", testseed.Base(), s)
	return s
}

// newRand returns a deterministic generator for seed.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, mix64(seed^0x9e3779b97f4a7c15)))
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Pool sizes. Memory pages are touched only when written, so the node sizes
// are generous; chunks are small because the concurrent tests run hundreds
// of clients, each with a chunk per memory node.
const (
	poolNodeBytes  = 512 << 20
	poolChunkBytes = 64 << 10
)

// localConfig is the pool configuration of local-mode tests.
func localConfig() remote.Config {
	return remote.Config{MemoryNodes: 2, NodeBytes: poolNodeBytes, ChunkBytes: poolChunkBytes}
}

// simMode is one configuration of the simulator the battery runs in.
type simMode struct {
	name     string
	ordering remote.Ordering
	skew     time.Duration // remote.SimConfig.Skew
}

// simModes are both byte orderings, and Strict in Skew mode, where verbs of
// one batch to different memory nodes land in either order.
var simModes = []simMode{
	{"inorder", remote.InOrder, 0},
	{"strict", remote.Strict, 0},
	{"skew", remote.Strict, 10 * time.Microsecond},
}

// config is the pool configuration of simulated tests in mode m.
func (m simMode) config(seed uint64) remote.Config {
	c := localConfig()
	c.Sim = &remote.SimConfig{Ordering: m.ordering, Skew: m.skew, Seed: seed}
	return c
}

// newPool creates a pool that is closed when the test ends.
func newPool(t testing.TB, cfg remote.Config) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatalf("remote.NewPool: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// open opens the index called name on cn, failing the test on error; the
// index is closed when the test ends. It must run on the test goroutine in
// local mode.
func (tg Target) open(t testing.TB, cn *remote.ComputeNode, name string) index.Index {
	t.Helper()
	idx, err := tg.Open(cn, name)
	if err != nil {
		t.Fatalf("%s: Open(cn %d, %q): %v", tg.Name, cn.ID(), name, err)
	}
	if idx == nil {
		t.Fatalf("%s: Open(cn %d, %q) returned a nil index", tg.Name, cn.ID(), name)
	}
	t.Cleanup(func() { idx.Close() })
	return idx
}

// localIndex opens the index named after the running test (see idxName)
// on n new compute nodes of the battery's pool (a new local pool if there
// is none).
func (tg Target) localIndex(t testing.TB, n int) (*remote.Pool, []index.Index) {
	t.Helper()
	p := tg.pool
	if p == nil {
		p = newPool(t, tg.realConfig())
	}
	idxs := make([]index.Index, n)
	for i := range idxs {
		idxs[i] = tg.open(t, p.NewComputeNode(), idxName(t))
	}
	return p, idxs
}

// idxName is the name of the index of the running test: every subtest of a
// shared pool gets an index of its own.
func idxName(t testing.TB) string { return "indextest/" + t.Name() }

// verify runs tg.Verify, if set, and reports an error.
func (tg Target) verify(t testing.TB, ctx context.Context, idx index.Index, when string) bool {
	t.Helper()
	if err := tg.verifyErr(ctx, idx); err != nil {
		t.Errorf("Verify %s: %v", when, err)
		return false
	}
	return true
}

// verifyErr runs tg.Verify, if set.
func (tg Target) verifyErr(ctx context.Context, idx index.Index) error {
	if tg.Verify == nil {
		return nil
	}
	if err := tg.Verify(ctx, idx); err != nil {
		return fmt.Errorf("%s: %w", tg.Name, err)
	}
	return nil
}

// fitKey returns k adjusted to the keys the target accepts: padded with
// 0x00 or truncated to FixedKeyLen, or truncated to MaxKeyLen. k must not
// be empty.
func (tg Target) fitKey(k []byte) []byte {
	if tg.FixedKeyLen > 0 {
		if len(k) < tg.FixedKeyLen {
			return append(append([]byte(nil), k...), make([]byte, tg.FixedKeyLen-len(k))...)
		}
		return k[:tg.FixedKeyLen:tg.FixedKeyLen]
	}
	if len(k) > tg.MaxKeyLen {
		return k[:tg.MaxKeyLen:tg.MaxKeyLen]
	}
	return k
}

// keyOK reports whether the target accepts k.
func (tg Target) keyOK(k []byte) bool {
	if tg.FixedKeyLen > 0 {
		return len(k) == tg.FixedKeyLen
	}
	return len(k) >= 1 && len(k) <= tg.MaxKeyLen
}

// valueSizes returns the value lengths the target accepts among a list of
// interesting sizes (size-class boundaries, 0 and MaxValueLen).
func (tg Target) valueSizes() []int {
	if tg.FixedValueLen > 0 {
		return []int{tg.FixedValueLen}
	}
	var out []int
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
		511, 512, 1000, 1024, 2048, 4095, 4096, 4097, 8192, 16384, 32768} {
		if n < tg.MaxValueLen {
			out = append(out, n)
		}
	}
	return append(out, tg.MaxValueLen-1, tg.MaxValueLen)
}

// vlen returns n, or FixedValueLen if set, at most MaxValueLen.
func (tg Target) vlen(n int) int {
	if tg.FixedValueLen > 0 {
		return tg.FixedValueLen
	}
	return min(n, tg.MaxValueLen)
}

// randValueLen draws a value length: mostly small, sometimes a few KiB,
// rarely MaxValueLen. least is the smallest length wanted (0 or 8).
func (tg Target) randValueLen(r *rand.Rand, least int) int {
	if tg.FixedValueLen > 0 {
		return tg.FixedValueLen
	}
	var n int
	switch x := r.IntN(100); {
	case x < 30:
		n = r.IntN(9)
	case x < 70:
		n = 9 + r.IntN(56)
	case x < 90:
		n = 65 + r.IntN(448)
	case x < 99:
		n = 513 + r.IntN(3584)
	default:
		n = tg.MaxValueLen - r.IntN(2)
	}
	return max(least, min(n, tg.MaxValueLen))
}

// makeValue returns a value of n bytes that identifies tag. When n >= 8 the
// value is self-checking (see checkValue): its first 8 bytes are tag and the
// rest is a stream derived from tag and n, so a torn, truncated or
// misattributed value is detected.
func makeValue(tag uint64, n int) []byte {
	v := make([]byte, n)
	s := mix64(tag ^ uint64(n)*0x9e3779b97f4a7c15)
	i := 0
	if n >= 8 {
		binary.BigEndian.PutUint64(v, tag)
		i = 8
	}
	for ; i < n; i++ {
		if i%8 == 0 {
			s = mix64(s + 0x9e3779b97f4a7c15)
		}
		v[i] = byte(s >> (8 * (i % 8)))
	}
	return v
}

// checkValue decodes a value made by makeValue with n >= 8 and reports
// whether it is intact. Tags made by packTag carry a check byte, so even an
// 8-byte value is checked.
func checkValue(v []byte) (tag uint64, ok bool) {
	if len(v) < 8 {
		return 0, false
	}
	tag = binary.BigEndian.Uint64(v)
	if byte(mix64(tag>>8)) != byte(tag) {
		return tag, false
	}
	want := makeValue(tag, len(v))
	return tag, string(want) == string(v)
}

// packTag returns the tag of a value of the concurrent tests: key id (20
// bits), writer (16 bits), sequence number (20 bits) and a check byte.
func packTag(keyID, writer, seq int) uint64 {
	t := (uint64(keyID)&(1<<20-1)<<36 | uint64(writer)&(1<<16-1)<<20 | uint64(seq)&(1<<20-1)) << 8
	return t | uint64(byte(mix64(t>>8)))
}

// tagKey returns the key id of a tag.
func tagKey(tag uint64) int { return int(tag >> 44) }

// tagWriter returns the writer and sequence number of a tag.
func tagWriter(tag uint64) (writer, seq int) {
	return int(tag >> 28 & (1<<16 - 1)), int(tag >> 8 & (1<<20 - 1))
}

// isContention reports whether err is the one error concurrent tests
// tolerate: an exhausted retry budget, which leaves the index unchanged or
// fully applied.
func isContention(err error) bool { return errors.Is(err, index.ErrContention) }

// fmtKey formats a key for messages.
func fmtKey(k []byte) string {
	if k == nil {
		return "nil"
	}
	if len(k) > 48 {
		return fmt.Sprintf("%q…(%d bytes)", k[:48], len(k))
	}
	return fmt.Sprintf("%q", k)
}

// fmtVal formats a value for messages.
func fmtVal(v []byte) string {
	if len(v) > 24 {
		return fmt.Sprintf("%q…(%d bytes)", v[:24], len(v))
	}
	return fmt.Sprintf("%q", v)
}
