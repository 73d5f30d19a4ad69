package indextest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestReference runs the whole battery against the reference index: the
// battery must pass a correct index.
func TestReference(t *testing.T) {
	Run(t, refTarget(""))
}

// TestReferenceCrash runs the crash-recovery batteries against the
// reference index, which a crash cannot leave half-written: they must pass
// it.
func TestReferenceCrash(t *testing.T) {
	tg := refTarget("")
	t.Run("crashpoints", func(t *testing.T) { RunCrashPoints(t, tg) })
	t.Run("crashrandom", func(t *testing.T) { RunCrashRandom(t, tg) })
	t.Run("silent", func(t *testing.T) { RunSilentNode(t, tg) })
	t.Run("stalls", func(t *testing.T) { RunStalls(t, tg) })
}

// TestReferenceFixedLengths runs the single-threaded batteries with fixed
// key and value lengths, as a Sherman-like index declares them.
func TestReferenceFixedLengths(t *testing.T) {
	tg := refTarget("")
	tg.Name = "ref-fixed"
	tg.MaxKeyLen, tg.FixedKeyLen = 16, 16
	tg.MaxValueLen, tg.FixedValueLen = 8, 8
	open := tg.Open
	tg.Open = func(cn *remote.ComputeNode, name string) (index.Index, error) {
		idx, err := open(cn, name)
		if err == nil {
			r := idx.(*refIndex)
			r.maxKey, r.maxVal = 16, 8
			idx = fixedChecker{r}
		}
		return idx, err
	}
	tg.Verify = func(ctx context.Context, idx index.Index) error { return idx.(fixedChecker).verify(ctx) }
	t.Run("basic", func(t *testing.T) { RunBasic(t, tg) })
	t.Run("errors", func(t *testing.T) { RunErrors(t, tg) })
	t.Run("keys", func(t *testing.T) { RunKeys(t, tg) })
	t.Run("oracle", func(t *testing.T) { RunOracle(t, tg) })
	t.Run("concurrent", func(t *testing.T) { RunConcurrent(t, tg) })
}

// fixedChecker fails any call whose key or value does not have the fixed
// length, so that TestReferenceFixedLengths shows the battery keeps to it.
type fixedChecker struct{ *refIndex }

var errBadLength = errors.New("fixedChecker: key or value of a length other than the fixed one")

func (f fixedChecker) fixed(key []byte, value []byte, isPut bool) error {
	if len(key) != 0 && len(key) <= 16 && len(key) != 16 {
		return errBadLength
	}
	if isPut && len(value) <= 8 && len(value) != 8 {
		return errBadLength
	}
	return nil
}

func (f fixedChecker) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := f.fixed(key, nil, false); err != nil {
		return nil, false, err
	}
	return f.refIndex.Get(ctx, key)
}

func (f fixedChecker) Put(ctx context.Context, key, value []byte) error {
	if err := f.fixed(key, value, true); err != nil {
		return err
	}
	return f.refIndex.Put(ctx, key, value)
}

func (f fixedChecker) Delete(ctx context.Context, key []byte) (bool, error) {
	if err := f.fixed(key, nil, false); err != nil {
		return false, err
	}
	return f.refIndex.Delete(ctx, key)
}

// mutantCases lists the broken variants of the reference index, the battery
// that must reject each, and a piece of the expected failure message.
var mutantCases = []struct {
	mutant, battery, want string
}{
	{"drop-put", "oracle", "FAIL"},
	{"drop-put", "concurrent", "FAIL"},
	{"stale-get", "oracle", "value"},
	{"delete-lies", "oracle", "Delete"},
	{"scan-skip", "scan", "random-bounds"},
	{"scan-eager", "scan", "does not fetch incrementally"},
	{"scan-alias", "basic", "yielded by Scan"},
	{"alias-key", "basic", "passed to Put"},
	{"no-key-limit", "errors", "key too long"},
	{"no-value-limit", "errors", "value too large"},
	{"no-closed", "errors", "index: closed"},
	{"ignore-ctx", "errors", "context canceled"},
	{"stale-cache", "oracle", "compute node"},
	{"stale-cache", "linearizable", "not linearizable"},
	{"stale-cache", "sim", "FAIL"},
	{"racy-delete", "linearizable", "not linearizable"},
	{"scan-by-rank", "concurrent", "scan-with-writers"},
	{"verify-fails", "keys", "mutant verify-fails"},
	{"zero-pad", "keys", "zero-chain"},
	{"zero-pad", "keys", "extreme-bytes"},
	{"scan-hi-inclusive", "scan", "edge-bounds"},
	{"scan-reads-bounds", "scan", "mutated-bounds"},
	{"limit-overrun", "scan", "ScanLimit"},
	{"limit-readahead", "scan", "does not bound the read-ahead"},
	{"torn-put", "concurrent", "same-key-contention"},
	{"torn-put", "linearizable", "not linearizable"},
	{"racy-open", "concurrent", "empty-start"},
	{"racy-open", "sim", "empty-start"},
	{"verify-fails", "concurrent", "mutant verify-fails"},
	{"crash-publish-first", "crashpoints", "neither the old value"},
	{"crash-publish-first", "crashrandom", "FAIL"},
	{"crash-wrong-repair", "crashpoints", "after the crash: Get"},
	{"crash-wrong-repair", "crashrandom", "FAIL"},
	{"crash-stuck", "crashpoints", "retry budget exhausted"},
	{"crash-stuck", "crashpoints", "Stats().Recovered is 0"},
	{"crash-stuck", "silent", "still fails after"},
	{"crash-keep-client", "crashpoints", "client crashed"},
	{"crash-keep-client", "crashrandom", "Stats().Crashed"},
}

// runBattery runs the battery called name.
func runBattery(t *testing.T, name string, tg Target) {
	switch name {
	case "basic":
		RunBasic(t, tg)
	case "errors":
		RunErrors(t, tg)
	case "keys":
		RunKeys(t, tg)
	case "oracle":
		RunOracle(t, tg)
	case "scan":
		RunScan(t, tg)
	case "concurrent":
		RunConcurrent(t, tg)
	case "linearizable":
		RunLinearizable(t, tg)
	case "sim":
		RunSim(t, tg)
	case "crashpoints":
		RunCrashPoints(t, tg)
	case "crashrandom":
		RunCrashRandom(t, tg)
	case "silent":
		RunSilentNode(t, tg)
	default:
		t.Fatalf("unknown battery %q", name)
	}
}

// TestMutants runs each battery against the mutants it must reject, each in
// a child process (TestMutantChild), and checks that the child fails with
// the expected message and does not crash.
func TestMutants(t *testing.T) {
	if os.Getenv("INDEXTEST_MUTANT") != "" {
		t.Skip("in a child process")
	}
	for _, c := range mutantCases {
		t.Run(c.mutant+"/"+c.battery, func(t *testing.T) {
			t.Parallel()
			args := []string{"-test.run=^TestMutantChild$", "-test.count=1", "-test.timeout=5m",
				fmt.Sprintf("-seed=%d", testseed.Base())}
			if testing.Short() {
				args = append(args, "-test.short")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], args...)
			// TMPDIR: the child's linearizability visualizations go away.
			cmd.Env = append(os.Environ(), "INDEXTEST_MUTANT="+c.mutant, "INDEXTEST_BATTERY="+c.battery, "TMPDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case err == nil:
				t.Fatalf("battery %s passed mutant %s; it must fail it. Output:\n%s", c.battery, c.mutant, tail(out))
			case !errors.As(err, &exit):
				t.Fatalf("running the child: %v", err)
			case strings.Contains(string(out), "panic:") || strings.Contains(string(out), "DATA RACE"):
				t.Fatalf("battery %s crashed on mutant %s instead of failing it:\n%s", c.battery, c.mutant, tail(out))
			case !strings.Contains(string(out), "--- FAIL"):
				t.Fatalf("battery %s on mutant %s: no test failure reported:\n%s", c.battery, c.mutant, tail(out))
			case !strings.Contains(string(out), c.want):
				t.Fatalf("battery %s failed mutant %s, but not with %q:\n%s", c.battery, c.mutant, c.want, tail(out))
			}
		})
	}
}

// tail returns the end of a child's output.
func tail(out []byte) string {
	const max = 6000
	if len(out) > max {
		return "…" + string(out[len(out)-max:])
	}
	return string(out)
}

// TestMutantChild runs one battery against one mutant; TestMutants starts
// it in a child process.
func TestMutantChild(t *testing.T) {
	mutant, battery := os.Getenv("INDEXTEST_MUTANT"), os.Getenv("INDEXTEST_BATTERY")
	if mutant == "" {
		t.Skip("run by TestMutants")
	}
	runBattery(t, battery, refTarget(mutant))
}

// TestValues checks the self-checking values.
func TestValues(t *testing.T) {
	for _, n := range []int{8, 9, 64, 1000} {
		v := makeValue(packTag(5, 6, 7), n)
		tag, ok := checkValue(v)
		if !ok || tagKey(tag) != 5 || len(v) != n {
			t.Fatalf("makeValue(%d): tag %#x ok %v", n, tag, ok)
		}
		for _, bad := range [][]byte{v[:n-1], append(v[:n:n], 0), func() []byte {
			w := []byte(string(v))
			w[n-1] ^= 1
			return w
		}()} {
			if _, ok := checkValue(bad); ok && len(bad) != 8 { // an 8-byte prefix is a valid value
				t.Errorf("checkValue accepted a damaged value of %d bytes", len(bad))
			}
		}
	}
	if string(makeValue(1, 40)) == string(makeValue(2, 40)) || string(makeValue(1, 3)) == string(makeValue(2, 3)) {
		t.Errorf("makeValue does not depend on the tag")
	}
}

// badScan is an index whose Scan breaks the iterator protocol.
type badScan struct {
	index.Index
	mode string
}

func (b badScan) Scan(ctx context.Context, lo, hi []byte) iter.Seq2[index.KV, error] {
	return func(yield func(index.KV, error) bool) {
		switch b.mode {
		case "ignore-stop":
			yield(index.KV{Key: []byte("a")}, nil)
			yield(index.KV{Key: []byte("b")}, nil)
		case "continue-after-error":
			if yield(index.KV{}, errors.New("boom")) {
				yield(index.KV{Key: []byte("a")}, nil)
			}
		case "error-with-kv":
			yield(index.KV{Key: []byte("a")}, errors.New("boom"))
		}
	}
}

// TestScanProtocol checks that scanN catches iterator protocol violations.
func TestScanProtocol(t *testing.T) {
	for _, mode := range []string{"ignore-stop", "continue-after-error", "error-with-kv"} {
		s := scanN(context.Background(), badScan{mode: mode}, nil, nil, 1)
		if len(s.proto) == 0 {
			t.Errorf("%s: no protocol violation reported", mode)
		}
		if s.problem(nil) == "" {
			t.Errorf("%s: no problem reported", mode)
		}
	}
	got := []index.KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("a"), Value: []byte("1")}}
	if p := diffKVs(got, []okv{{"a", "1"}, {"b", "2"}}); !strings.Contains(p, "duplicate") {
		t.Errorf("diffKVs missed a duplicate: %q", p)
	}
	if p := diffKVs(got[:1], []okv{{"a", "2"}}); !strings.Contains(p, "value") {
		t.Errorf("diffKVs missed a wrong value: %q", p)
	}
}

// TestOracle checks the oracle's scan bounds.
func TestOracle(t *testing.T) {
	o := newOracle()
	for _, k := range []string{"a", "ab", "b", "\x00", "\xff"} {
		o.put([]byte(k), []byte("v"+k))
	}
	for _, c := range []struct {
		lo, hi []byte
		limit  int
		want   string
	}{
		{nil, nil, -1, "\x00 a ab b \xff"},
		{[]byte("a"), []byte("b"), -1, "a ab"},
		{[]byte("b"), []byte("a"), -1, ""},
		{[]byte("a"), []byte("a"), -1, ""},
		{nil, []byte{}, -1, ""},
		{[]byte("a"), nil, 2, "a ab"},
		{[]byte("a"), nil, 0, ""},
		{[]byte("aa"), nil, 1, "ab"},
	} {
		var ks []string
		for _, kv := range o.scan(c.lo, c.hi, c.limit) {
			ks = append(ks, kv.k)
		}
		if got := strings.Join(ks, " "); got != c.want {
			t.Errorf("scan(%q, %q, %d) = %q, want %q", c.lo, c.hi, c.limit, got, c.want)
		}
	}
}

// TestOwnedKey checks the per-key knowledge of the workload.
func TestOwnedKey(t *testing.T) {
	k := &ownedKey{key: []byte("k"), poss: []ver{{}}}
	if p := k.observe(true, []byte("x")); p == "" {
		t.Errorf("an absent key seen present was accepted")
	}
	k.set(ver{true, "a"}, false) // failed Put: absent or "a"
	if p := k.observe(false, nil); p != "" {
		t.Errorf("%s", p)
	}
	if p := k.observe(true, []byte("a")); p != "" {
		t.Errorf("a failed Put that took effect after the key was seen absent: %s", p)
	}
	if p := k.observe(false, nil); p == "" {
		t.Errorf("after observing \"a\", absent was accepted")
	}
	k.set(ver{true, "b"}, true)
	if p := k.observe(true, []byte("a")); p == "" {
		t.Errorf("a stale value was accepted")
	}
}

// TestLinearizabilityModel checks the porcupine model on small histories.
func TestLinearizabilityModel(t *testing.T) {
	op := func(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	put := func(v string) linInput { return linInput{kind: linPut, key: "k", val: v} }
	get := linInput{kind: linGet, key: "k"}
	del := linInput{kind: linDelete, key: "k"}
	for _, c := range []struct {
		name string
		ok   bool
		h    []porcupine.Operation
	}{
		{"sequential", true, []porcupine.Operation{
			op(0, 1, 2, put("a"), linOutput{}), op(1, 3, 4, get, linOutput{val: "a", found: true}),
			op(0, 5, 6, del, linOutput{found: true}), op(1, 7, 8, get, linOutput{}),
		}},
		{"stale read", false, []porcupine.Operation{
			op(0, 1, 2, put("a"), linOutput{}), op(0, 3, 4, put("b"), linOutput{}),
			op(1, 5, 6, get, linOutput{val: "a", found: true}),
		}},
		{"concurrent read", true, []porcupine.Operation{
			op(0, 1, 2, put("a"), linOutput{}), op(0, 3, 6, put("b"), linOutput{}),
			op(1, 4, 5, get, linOutput{val: "a", found: true}),
		}},
		{"double delete", false, []porcupine.Operation{
			op(0, 1, 2, put("a"), linOutput{}), op(0, 3, 6, del, linOutput{found: true}),
			op(1, 4, 5, del, linOutput{found: true}),
		}},
		{"failed put may apply", true, []porcupine.Operation{
			op(0, 1, 1<<62, put("a"), linOutput{unknown: true}), op(1, 3, 4, get, linOutput{val: "a", found: true}),
		}},
		{"failed put may not apply", true, []porcupine.Operation{
			op(0, 1, 1<<62, put("a"), linOutput{unknown: true}), op(1, 3, 4, get, linOutput{}),
		}},
		{"value never written", false, []porcupine.Operation{
			op(0, 1, 2, put("a"), linOutput{}), op(1, 3, 4, get, linOutput{val: "z", found: true}),
		}},
	} {
		if got := porcupine.CheckOperations(linModel, c.h); got != c.ok {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.ok)
		}
	}
}
