//go:build unix

package remote

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/childtest"
	"github.com/dmindex/dmindex/internal/testseed"
)

// The geometry of the memory-node files of these tests.
const (
	shmNodeBytes   = 1 << 20
	shmOnChipBytes = 4096
)

// shmConfig returns the configuration of a pool of n memory nodes of the
// tests' geometry in dir.
func shmConfig(dir string, n int) Config {
	return Config{MemoryNodes: n, NodeBytes: shmNodeBytes, OnChipBytes: shmOnChipBytes, Shm: &ShmConfig{Dir: dir}}
}

// openShm opens a pool of cfg, closed when the test ends. Unlike
// newTestPool it keeps a zero NodeBytes, which adopts the files' size.
func openShm(t *testing.T, cfg Config) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// shmNodeImages returns the files of a fresh pool of n memory nodes whose
// first node holds a named region with data, as they are after Close.
func shmNodeImages(t *testing.T, n int) [][]byte {
	t.Helper()
	dir := t.TempDir()
	p := newTestPool(t, shmConfig(dir, n))
	c := p.NewComputeNode().NewClient()
	a, err := c.Named(context.Background(), "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(context.Background(), a, []byte("some data")); err != nil {
		t.Fatal(err)
	}
	p.Close()
	out := make([][]byte, n)
	for i := range out {
		if out[i], err = os.ReadFile(shmFile(dir, i)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// withWord returns a copy of img with its i-th 8-byte word set to v.
func withWord(img []byte, i int, v uint64) []byte {
	out := bytes.Clone(img)
	binary.LittleEndian.PutUint64(out[8*i:], v)
	return out
}

// dirState is everything about a directory that refusing a memory node
// must leave unchanged: its entries, modification time, and each entry's
// kind, size, modification time and bytes.
type dirState struct {
	mtime   time.Time
	entries map[string]entryState
}

type entryState struct {
	dir   bool
	size  int64
	mtime time.Time
	data  []byte
}

// aLongTimeAgo is the modification time the tests give to the files they
// plant, so that any later write would show in it.
var aLongTimeAgo = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// snapshotDir records the state of dir.
func snapshotDir(t *testing.T, dir string) dirState {
	t.Helper()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := dirState{mtime: st.ModTime(), entries: map[string]entryState{}}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		es := entryState{dir: fi.IsDir(), size: fi.Size(), mtime: fi.ModTime()}
		if !es.dir {
			if es.data, err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		s.entries[e.Name()] = es
	}
	return s
}

// diff describes how s2 differs from s.
func (s dirState) diff(s2 dirState) []string {
	var out []string
	if !s.mtime.Equal(s2.mtime) {
		out = append(out, fmt.Sprintf("directory modified at %v (was %v)", s2.mtime, s.mtime))
	}
	for name, e := range s.entries {
		e2, ok := s2.entries[name]
		switch {
		case !ok:
			out = append(out, name+" removed")
		case e.dir != e2.dir || e.size != e2.size:
			out = append(out, fmt.Sprintf("%s: size %d → %d, directory %v → %v", name, e.size, e2.size, e.dir, e2.dir))
		case !e.mtime.Equal(e2.mtime):
			out = append(out, fmt.Sprintf("%s: modified at %v (was %v)", name, e2.mtime, e.mtime))
		case !bytes.Equal(e.data, e2.data):
			out = append(out, name+": contents changed")
		}
	}
	for name := range s2.entries {
		if _, ok := s.entries[name]; !ok {
			out = append(out, name+" created")
		}
	}
	slices.Sort(out)
	return out
}

// TestShmBadFiles plants files that are not memory nodes of this pool where
// a pool's memory nodes should be: opening the pool must fail with an error
// wrapping ErrBadNode (a directory too) and leave
// the directory byte-for-byte and timestamp-for-timestamp as it was. The
// untouched images are a control: they open.
func TestShmBadFiles(t *testing.T) {
	img := shmNodeImages(t, 1)[0] // the node of a pool of one
	imgs := shmNodeImages(t, 2)
	other := shmNodeImages(t, 2) // another pool's nodes
	r := rand.New(rand.NewPCG(testseed.Seed(t), 0))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	geomOK := Config{NodeBytes: shmNodeBytes, OnChipBytes: shmOnChipBytes}
	adopt := Config{} // NodeBytes and OnChipBytes of the existing node
	cases := []struct {
		name  string
		files []any // per node: []byte contents, or nil for a directory
		cfg   Config
		ok    bool // the control cases: the pool opens
	}{
		{"control", []any{img}, geomOK, true},
		{"control-adopt", []any{img}, adopt, true},
		{"control-two-nodes", []any{imgs[0], imgs[1]}, adopt, true},
		{"empty", []any{[]byte{}}, adopt, false},
		{"one-byte", []any{[]byte{0}}, adopt, false},
		{"random-short", []any{random(100)}, adopt, false},
		{"random-node-size", []any{random(len(img))}, geomOK, false},
		{"zeros-node-size", []any{make([]byte, len(img))}, geomOK, false},
		{"truncated-below-header", []any{img[:reservedBytes-8]}, adopt, false},
		{"truncated-to-header", []any{img[:reservedBytes]}, adopt, false},
		{"truncated-to-half", []any{img[:len(img)/2]}, adopt, false},
		{"truncated-by-a-word", []any{img[:len(img)-8]}, adopt, false},
		{"truncated-on-chip", []any{img[:shmNodeBytes]}, adopt, false},
		{"extended", []any{append(bytes.Clone(img), make([]byte, 4096)...)}, adopt, false},
		{"wrong-magic", []any{withWord(img, hdrMagic, nodeMagic^1)}, adopt, false},
		{"magic-zero", []any{withWord(img, hdrMagic, 0)}, adopt, false},
		{"wrong-version", []any{withWord(img, hdrVersion, nodeVersion+1)}, adopt, false},
		{"version-zero", []any{withWord(img, hdrVersion, 0)}, adopt, false},
		{"header-main-mismatch", []any{withWord(img, hdrMain, shmNodeBytes/2)}, adopt, false},
		{"header-main-tiny", []any{withWord(img, hdrMain, 8)}, adopt, false},
		{"header-on-chip-mismatch", []any{withWord(img, hdrOnChip, 2*shmOnChipBytes)}, adopt, false},
		{"cursor-beyond-node", []any{withWord(img, hdrNext, shmNodeBytes+8)}, adopt, false},
		{"cursor-in-header", []any{withWord(img, hdrNext, 8)}, adopt, false},
		{"place-past-pool-size", []any{withWord(img, hdrIndex, placeWord(2, 2))}, adopt, false},
		{"place-index-zero-word", []any{withWord(img, hdrIndex, 1<<32)}, adopt, false},
		{"place-pool-too-large", []any{withWord(img, hdrIndex, placeWord(0, MaxMemoryNodes+1))}, adopt, false},
		{"node-bytes-larger", []any{img}, Config{NodeBytes: 2 * shmNodeBytes}, false},
		{"node-bytes-smaller", []any{img}, Config{NodeBytes: shmNodeBytes / 2}, false},
		{"on-chip-larger", []any{img}, Config{OnChipBytes: 2 * shmOnChipBytes}, false},
		{"on-chip-smaller", []any{img}, Config{OnChipBytes: shmOnChipBytes / 2}, false},
		{"on-chip-disabled", []any{img}, Config{OnChipBytes: -1}, false},
		{"directory", []any{nil}, adopt, false},
		{"second-node-directory", []any{imgs[0], nil}, adopt, false},
		{"second-node-truncated", []any{imgs[0], imgs[1][:len(imgs[1])/2]}, adopt, false},
		{"second-node-of-another-pool", []any{imgs[0], other[1]}, adopt, false},
		{"nodes-swapped", []any{imgs[1], imgs[0]}, adopt, false},
		{"first-node-twice", []any{imgs[0], imgs[0]}, adopt, false},
		{"first-node-of-two-alone", []any{imgs[0]}, adopt, false},
		{"first-node-of-two-alone-geometry", []any{imgs[0]}, geomOK, false},
		{"second-node-of-two-alone", []any{imgs[1]}, adopt, false},
		{"node-of-one-with-another", []any{img, imgs[1]}, adopt, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, f := range tc.files {
				path := shmFile(dir, i)
				if b, ok := f.([]byte); ok {
					if err := os.WriteFile(path, b, 0o644); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(path, aLongTimeAgo, aLongTimeAgo); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chtimes(dir, aLongTimeAgo, aLongTimeAgo); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			cfg := tc.cfg
			cfg.MemoryNodes = len(tc.files)
			cfg.Shm = &ShmConfig{Dir: dir}
			p, err := NewPool(cfg)
			if tc.ok {
				if err != nil {
					t.Fatalf("NewPool of an intact memory node: %v", err)
				}
				checkImageData(t, p)
				p.Close()
				return
			}
			if err == nil {
				p.Close()
				t.Fatalf("NewPool accepted it")
			}
			t.Logf("NewPool: %v", err)
			if !errors.Is(err, ErrBadNode) {
				t.Errorf("error %v does not wrap ErrBadNode", err)
			}
			if bad := shmFile(dir, len(tc.files)-1); !strings.Contains(err.Error(), bad) && !strings.Contains(err.Error(), shmFile(dir, 0)) {
				t.Errorf("error %q names no memory-node file", err)
			}
			for _, d := range before.diff(snapshotDir(t, dir)) {
				t.Errorf("refused node modified: %s", d)
			}
		})
	}
}

// checkImageData checks that p holds the named region of shmNodeImages.
func checkImageData(t *testing.T, p *Pool) {
	t.Helper()
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	a, err := c.Named(ctx, "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 9)
	if err := c.Read(ctx, a, got); err != nil || string(got) != "some data" {
		t.Fatalf("named region holds %q, %v", got, err)
	}
}

// shmRange is a region a worker of the concurrent-open tests allocated or
// named, filled with its pattern (see fillPattern).
type shmRange struct {
	Owner, Index int
	Addr         Addr
	Bytes        int
}

// shmOpenResult is what one worker of the concurrent-open tests reports.
type shmOpenResult struct {
	Shared Addr // the region every worker named "shmtest/shared"
	Ranges []shmRange
}

// Shapes of the concurrent-open workload.
const (
	shmOwnNames   = 24 // named regions per worker: with 16 workers, several directory blocks
	shmSharedSize = 8 * 64
)

// shmAllocSizes are the sizes each worker allocates on each memory node:
// small ones from its chunks, large ones (more than a quarter chunk) by
// their own request to the node.
var shmAllocSizes = []int{8, 24, 64, 1000, 4096, 20 << 10, 40 << 10}

// patternWord is word w of the pattern of range index of owner.
func patternWord(owner, index, w int) uint64 {
	return uint64(owner)<<44 | uint64(index)<<28 | uint64(w)<<4 | 0xa
}

// pattern returns the bytes of range r's pattern.
func (r shmRange) pattern() []byte {
	b := make([]byte, r.Bytes)
	for w := 0; 8*w < r.Bytes; w++ {
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], patternWord(r.Owner, r.Index, w))
		copy(b[8*w:], word[:])
	}
	return b
}

// shmOpenWorker opens a pool on dir once start returns, as worker owner,
// and through it names and allocates regions, fills them with its
// pattern, and counts itself in the shared region: word 0 by FAA, word
// 1+owner by CAS from 0.
func shmOpenWorker(dir string, owner int, start func() error) (res shmOpenResult, err error) {
	if err := start(); err != nil {
		return res, err
	}
	cfg := shmConfig(dir, 2)
	cfg.NodeBytes = 16 << 20
	p, err := NewPool(cfg)
	if err != nil {
		return res, err
	}
	defer p.Close()
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	if res.Shared, err = c.Named(ctx, "shmtest/shared", shmSharedSize); err != nil {
		return res, err
	}
	add := func(a Addr, n int) error {
		r := shmRange{Owner: owner, Index: len(res.Ranges), Addr: a, Bytes: n}
		res.Ranges = append(res.Ranges, r)
		return c.Write(ctx, a, r.pattern())
	}
	for i := range shmOwnNames {
		n := 8 + 8*i
		a, err := c.Named(ctx, fmt.Sprintf("shmtest/own-%d-%d", owner, i), n)
		if err != nil {
			return res, err
		}
		if err := add(a, n); err != nil {
			return res, err
		}
	}
	for _, n := range shmAllocSizes {
		for mn := range 2 {
			a, err := c.AllocOn(ctx, mn, n, 8)
			if err != nil {
				return res, err
			}
			if err := add(a, n); err != nil {
				return res, err
			}
		}
	}
	if _, err := c.FAA(ctx, res.Shared, 1); err != nil {
		return res, err
	}
	if old, err := c.CAS(ctx, res.Shared.Add(8*uint64(1+owner)), 0, uint64(owner)+1); err != nil || old != 0 {
		return res, fmt.Errorf("claiming slot %d of the shared region: old %#x, %v", owner, old, err)
	}
	return res, nil
}

// checkOpenResults checks the reports of workers that opened one fresh
// directory concurrently, and the directory's contents: one shared region
// for all, pairwise disjoint ranges inside the nodes, every range still
// holding its owner's pattern, every worker counted once, and no file left
// but the memory nodes.
func checkOpenResults(t *testing.T, dir string, results []shmOpenResult) {
	t.Helper()
	ctx := context.Background()
	p := openShm(t, Config{Shm: &ShmConfig{Dir: dir}})
	if p.MemoryNodes() != 2 {
		t.Fatalf("the directory holds %d memory nodes, want 2", p.MemoryNodes())
	}
	c := p.NewComputeNode().NewClient()
	shared := results[0].Shared
	var all []shmRange
	for i, res := range results {
		if res.Shared != shared {
			t.Errorf("worker %d found the shared region at %v, worker 0 at %v: the node was initialised twice", i, res.Shared, shared)
		}
		all = append(all, res.Ranges...)
	}
	all = append(all, shmRange{Owner: -1, Addr: shared, Bytes: shmSharedSize})
	slices.SortFunc(all, func(a, b shmRange) int { return cmp.Compare(a.Addr, b.Addr) })
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.Addr.MN() == b.Addr.MN() && a.Addr.Add(uint64(a.Bytes)) > b.Addr {
			t.Errorf("overlap: worker %d's range %d [%v, +%d) and worker %d's range %d [%v, +%d)",
				a.Owner, a.Index, a.Addr, a.Bytes, b.Owner, b.Index, b.Addr, b.Bytes)
		}
	}
	for _, r := range all {
		if r.Owner < 0 {
			continue
		}
		if r.Addr.Offset() < reservedBytes || r.Addr.Offset()+uint64(r.Bytes) > uint64(p.Config().NodeBytes) {
			t.Errorf("worker %d's range %d [%v, +%d) is outside the allocatable memory", r.Owner, r.Index, r.Addr, r.Bytes)
			continue
		}
		got := make([]byte, r.Bytes)
		if err := c.Read(ctx, r.Addr, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, r.pattern()) {
			t.Errorf("worker %d's range %d at %v lost its pattern", r.Owner, r.Index, r.Addr)
		}
	}
	words := make([]byte, shmSharedSize)
	if err := c.Read(ctx, shared, words); err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(words); n != uint64(len(results)) {
		t.Errorf("shared counter %d, want %d workers", n, len(results))
	}
	for i := range results {
		if v := binary.LittleEndian.Uint64(words[8*(1+i):]); v != uint64(i)+1 {
			t.Errorf("slot of worker %d holds %d", i, v)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"mn-0", "mn-1"}) {
		t.Errorf("directory holds %q, want only the two memory nodes", names)
	}
}

// TestShmConcurrentOpenGoroutines opens one fresh directory from many
// pools at once in this process: the first openers race to create and
// initialise each node, and allocation and named regions race through the
// headers of the shared files.
func TestShmConcurrentOpenGoroutines(t *testing.T) {
	const workers = 16
	dir := t.TempDir()
	gate := make(chan struct{})
	results := make([]shmOpenResult, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			results[i], errs[i] = shmOpenWorker(dir, i, func() error { <-gate; return nil })
		})
	}
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checkOpenResults(t, dir, results)
}

// shmChildArg is the argument of TestShmChild.
type shmChildArg struct {
	Kind     string // "open" or "atomics"
	Dir      string // the pool's directory
	Ctl      string // the directory of the flag files
	Child    int    // the child's number
	Workers  []int  // open: the worker numbers of the child
	Counters Addr   // atomics: the region of the counters
	Rounds   int    // atomics: increments per counter
}

// startShmChild starts TestShmChild with a.
func startShmChild(t *testing.T, a shmChildArg) *childtest.Child {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return childtest.Start(t, childtest.Options{Test: "TestShmChild", Arg: string(b), Timeout: time.Minute})
}

// TestShmChild is the child process of the multi-process tests.
func TestShmChild(t *testing.T) {
	arg, ok := childtest.Arg()
	if !ok {
		t.Skip("run by the multi-process tests")
	}
	var a shmChildArg
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Signal(filepath.Join(a.Ctl, fmt.Sprintf("ready-%d", a.Child))); err != nil {
		t.Fatal(err)
	}
	start := func() error { return childtest.Await(30*time.Second, filepath.Join(a.Ctl, "go")) }
	switch a.Kind {
	case "open":
		results := make([]shmOpenResult, len(a.Workers))
		errs := make([]error, len(a.Workers))
		var wg sync.WaitGroup
		for i, w := range a.Workers {
			wg.Go(func() { results[i], errs[i] = shmOpenWorker(a.Dir, w, start) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(results)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RESULTS %s\n", b)
	case "atomics":
		if err := start(); err != nil {
			t.Fatal(err)
		}
		if err := shmAtomics(a.Dir, a.Counters, a.Rounds); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown child kind %q", a.Kind)
	}
}

// runShmChildren starts children of args, waits until each is ready, lets
// them go together with the parent's own work, and waits for all.
func runShmChildren(t *testing.T, ctl string, args []shmChildArg, own func() error) []*childtest.Child {
	t.Helper()
	children := make([]*childtest.Child, len(args))
	var ready []string
	for i, a := range args {
		a.Ctl, a.Child = ctl, i
		children[i] = startShmChild(t, a)
		ready = append(ready, filepath.Join(ctl, fmt.Sprintf("ready-%d", i)))
	}
	if err := childtest.Await(30*time.Second, ready...); err != nil {
		t.Fatal(err)
	}
	if err := childtest.Signal(filepath.Join(ctl, "go")); err != nil {
		t.Fatal(err)
	}
	ownErr := own()
	for _, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if ownErr != nil {
		t.Fatal(ownErr)
	}
	return children
}

// TestShmConcurrentOpenProcesses opens one fresh directory from several
// processes at once, each with several pools, and checks what they
// allocated and named as TestShmConcurrentOpenGoroutines does.
func TestShmConcurrentOpenProcesses(t *testing.T) {
	const procs, perProc = 3, 4 // the parent is one more process
	dir, ctl := t.TempDir(), t.TempDir()
	var args []shmChildArg
	for i := range procs {
		a := shmChildArg{Kind: "open", Dir: dir}
		for w := range perProc {
			a.Workers = append(a.Workers, (i+1)*perProc+w)
		}
		args = append(args, a)
	}
	results := make([]shmOpenResult, (procs+1)*perProc)
	children := runShmChildren(t, ctl, args, func() error {
		errs := make([]error, perProc)
		var wg sync.WaitGroup
		for w := range perProc {
			wg.Go(func() { results[w], errs[w] = shmOpenWorker(dir, w, func() error { return nil }) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	for i, c := range children {
		lines := c.Lines("RESULTS ")
		if len(lines) != 1 {
			t.Fatalf("child %d reported %d result lines:\n%s", i, len(lines), c.Output())
		}
		var rs []shmOpenResult
		if err := json.Unmarshal([]byte(lines[0]), &rs); err != nil {
			t.Fatal(err)
		}
		copy(results[(i+1)*perProc:], rs)
	}
	checkOpenResults(t, dir, results)
}

// shmAtomics increments the counters of the region at a in the pool of dir
// rounds times each: word 0 by FAA, word 1 by a READ and a CAS that retries
// until it succeeds, and word 2 by a batch of a CAS and an FAA.
func shmAtomics(dir string, a Addr, rounds int) error {
	p, err := NewPool(Config{Shm: &ShmConfig{Dir: dir}})
	if err != nil {
		return err
	}
	defer p.Close()
	ctx := context.Background()
	c := p.NewComputeNode().NewClient()
	buf := make([]byte, 8)
	for range rounds {
		if _, err := c.FAA(ctx, a, 1); err != nil {
			return err
		}
		for {
			if err := c.Read(ctx, a.Add(8), buf); err != nil {
				return err
			}
			v := binary.LittleEndian.Uint64(buf)
			old, err := c.CAS(ctx, a.Add(8), v, v+1)
			if err != nil {
				return err
			}
			if old == v {
				break
			}
		}
		ops := []Op{CAS(a.Add(24), 0, 0), FAA(a.Add(16), 1)}
		if err := c.Do(ctx, ops); err != nil {
			return err
		}
	}
	return nil
}

// TestShmAtomicsAcrossProcesses checks that FAA and CAS are atomic across
// processes that map one memory node: no increment of several processes
// racing on the same words is lost.
func TestShmAtomicsAcrossProcesses(t *testing.T) {
	const procs, rounds = 2, 20000
	dir, ctl := t.TempDir(), t.TempDir()
	p := newTestPool(t, shmConfig(dir, 1))
	c := p.NewComputeNode().NewClient()
	ctx := context.Background()
	a, err := c.Named(ctx, "counters", 64)
	if err != nil {
		t.Fatal(err)
	}
	args := make([]shmChildArg, procs)
	for i := range args {
		args[i] = shmChildArg{Kind: "atomics", Dir: dir, Counters: a, Rounds: rounds}
	}
	runShmChildren(t, ctl, args, func() error { return shmAtomics(dir, a, rounds) })
	got := make([]byte, 24)
	if err := c.Read(ctx, a, got); err != nil {
		t.Fatal(err)
	}
	for w, what := range []string{"FAA", "READ+CAS", "batched FAA"} {
		if v := binary.LittleEndian.Uint64(got[8*w:]); v != (procs+1)*rounds {
			t.Errorf("%s counter = %d, want %d", what, v, (procs+1)*rounds)
		}
	}
}

// TestShmReopen closes a pool and reopens its directory, with the geometry
// given and with every size left to the files, one pool after the other:
// the named regions, the data and the allocation cursors are found again,
// and new allocations do not overlap old ones.
func TestShmReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	p := newTestPool(t, shmConfig(dir, 3))
	c := p.NewComputeNode().NewClient()
	root, err := c.Named(ctx, "root", 256)
	if err != nil {
		t.Fatal(err)
	}
	var objs []shmRange
	for i := range 30 {
		a, err := c.AllocOn(ctx, i%3, 100+i, 8)
		if err != nil {
			t.Fatal(err)
		}
		r := shmRange{Owner: 1, Index: i, Addr: a, Bytes: 100 + i}
		if err := c.Write(ctx, a, r.pattern()); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, r)
	}
	if err := c.Write(ctx, root, []byte("the root")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FAA(ctx, OnChip(2, 64), 7); err != nil {
		t.Fatal(err)
	}
	used, err := p.MemoryUsed()
	if err != nil {
		t.Fatal(err)
	}
	p.Close()

	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"same-config", shmConfig(dir, 3)},
		{"adopt-everything", Config{Shm: &ShmConfig{Dir: dir}}},
		{"adopt-count", Config{NodeBytes: shmNodeBytes, Shm: &ShmConfig{Dir: dir}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openShm(t, tc.cfg)
			if n := p.MemoryNodes(); n != 3 {
				t.Fatalf("reopened pool has %d memory nodes, want 3", n)
			}
			cfg := p.Config()
			if cfg.MemoryNodes != 3 || cfg.NodeBytes != shmNodeBytes || cfg.OnChipBytes != shmOnChipBytes {
				t.Errorf("reopened pool's Config = %d nodes of %d + %d bytes, want 3 of %d + %d",
					cfg.MemoryNodes, cfg.NodeBytes, cfg.OnChipBytes, shmNodeBytes, shmOnChipBytes)
			}
			u, err := p.MemoryUsed()
			if err != nil {
				t.Fatal(err)
			}
			for mn := range u {
				if u[mn] < used[mn] {
					t.Errorf("MemoryUsed = %v after reopening, %v before Close", u, used)
				}
			}
			c := p.NewComputeNode().NewClient()
			r2, err := c.Named(ctx, "root", 256)
			if err != nil || r2 != root {
				t.Fatalf("Named(root) = %v, %v; before Close %v", r2, err, root)
			}
			got := make([]byte, 8)
			if err := c.Read(ctx, r2, got); err != nil || string(got) != "the root" {
				t.Errorf("root holds %q, %v", got, err)
			}
			if _, err := c.Named(ctx, "root", 512); !errors.Is(err, ErrBadRequest) {
				t.Errorf("Named(root) asking for more than it holds: %v, want ErrBadRequest", err)
			}
			for _, r := range objs {
				got := make([]byte, r.Bytes)
				if err := c.Read(ctx, r.Addr, got); err != nil || !bytes.Equal(got, r.pattern()) {
					t.Errorf("object %d at %v lost its data (%v)", r.Index, r.Addr, err)
				}
			}
			if v, err := c.FAA(ctx, OnChip(2, 64), 0); err != nil || v != 7 {
				t.Errorf("on-chip word of node 2 = %d, %v, want 7", v, err)
			}
			for mn := range 3 {
				a, err := c.AllocOn(ctx, mn, 100, 8)
				if err != nil {
					t.Fatal(err)
				}
				if a.Offset() < used[mn] {
					t.Errorf("new allocation %v on node %d below the cursor %d before Close", a, mn, used[mn])
				}
			}
		})
	}
}

// TestShmAdoptCount checks MemoryNodes 0: a pool adopts the number of nodes
// in the directory, or creates one in an empty directory.
func TestShmAdoptCount(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			newTestPool(t, shmConfig(dir, n)).Close()
			p := openShm(t, Config{Shm: &ShmConfig{Dir: dir}})
			if got := p.MemoryNodes(); got != n {
				t.Errorf("MemoryNodes() = %d, want %d", got, n)
			}
			if got := p.Config().MemoryNodes; got != n {
				t.Errorf("Config().MemoryNodes = %d, want %d", got, n)
			}
		})
	}
	t.Run("empty-directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new", "nested")
		p := newTestPool(t, Config{NodeBytes: shmNodeBytes, Shm: &ShmConfig{Dir: dir}})
		if got := p.MemoryNodes(); got != 1 {
			t.Errorf("MemoryNodes() = %d in an empty directory, want 1", got)
		}
		if _, err := os.Stat(shmFile(dir, 0)); err != nil {
			t.Errorf("memory node 0: %v", err)
		}
	})
}

// TestShmPoolRoom: the memory-node files are sparse, so a pool whose nodes
// each fit the file system's free space but not all together is refused
// with ErrOutOfMemory before it creates any file (each node's own check
// sees the same free space: a 64 MiB tmpfs accepted 2 nodes of 48 MB, and
// writes died of SIGBUS); a pool whose nodes fit together is accepted, and
// a file that exists already needs no room. Node sizes are fractions of
// the free space measured in the test's directory: creating sparse files
// costs nothing, on any file system.
func TestShmPoolRoom(t *testing.T) {
	dir := t.TempDir()
	free, ok := fsFree(dir)
	if !ok {
		t.Skip("the file system of the test directory does not tell its free space")
	}
	// With on-chip regions of 4 KiB: 3/4 of the free space per node is
	// over it for two, and 1/4 fits twice, both with a quarter of margin
	// for what other processes write meanwhile.
	size := func(frac float64) int64 { return int64(float64(free)*frac) &^ 4095 }
	if size(0.25) < 2*shmNodeBytes || size(0.75) >= 1<<46 {
		t.Skipf("%d bytes free in the test directory", free)
	}
	cfg := func(dir string, frac float64) Config {
		return Config{MemoryNodes: 2, NodeBytes: size(frac), OnChipBytes: shmOnChipBytes, Shm: &ShmConfig{Dir: dir}}
	}

	over := filepath.Join(dir, "over")
	p, err := NewPool(cfg(over, 0.75))
	if err == nil {
		p.Close()
		t.Fatalf("a pool of 2 memory nodes of %d bytes accepted with %d bytes free", size(0.75), free)
	}
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("a pool of 2 memory nodes of %d bytes with %d bytes free: %v, want ErrOutOfMemory", size(0.75), free, err)
	}
	if ents, _ := os.ReadDir(over); len(ents) != 0 {
		t.Errorf("the refused pool left %d files", len(ents))
	}

	openShm(t, cfg(filepath.Join(dir, "fits"), 0.25))

	// Node 0 created by a process that died before it created node 1: only
	// node 1 needs room.
	half := filepath.Join(dir, "half")
	if err := os.MkdirAll(half, 0o755); err != nil {
		t.Fatal(err)
	}
	_, unmap, err := openNodeFile(shmFile(half, 0), cfg(half, 0.75))
	if err != nil {
		t.Fatal(err)
	}
	unmap()
	openShm(t, cfg(half, 0.75))
}

// TestShmRemove checks RemoveShm: it deletes the memory-node files and
// nothing else, removes the directory only if that leaves it empty, a pool
// that still maps the files keeps its memory, and a pool opened afterwards
// starts from fresh nodes.
func TestShmRemove(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pool")
	p := newTestPool(t, shmConfig(dir, 2))
	c := p.NewComputeNode().NewClient()
	a, err := c.Named(ctx, "root", 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, a, []byte("kept while mapped")); err != nil {
		t.Fatal(err)
	}
	others := []string{"notes.txt", "mn-x", "mn-", "xmn-0"}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveShm(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := os.Stat(shmFile(dir, i)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("memory node %d after RemoveShm: %v", i, err)
		}
	}
	for _, name := range others {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != name {
			t.Errorf("RemoveShm touched %s: %q, %v", name, b, err)
		}
	}
	got := make([]byte, 17)
	if err := c.Read(ctx, a, got); err != nil || string(got) != "kept while mapped" {
		t.Errorf("a pool mapping removed files reads %q, %v", got, err)
	}
	p.Close()

	p2 := newTestPool(t, shmConfig(dir, 2))
	c2 := p2.NewComputeNode().NewClient()
	a2, err := c2.Named(ctx, "root", 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Read(ctx, a2, got); err != nil || !bytes.Equal(got, make([]byte, len(got))) {
		t.Errorf("the root of a pool created after RemoveShm holds %q, %v", got, err)
	}
	p2.Close()
	for _, name := range others {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveShm(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory after RemoveShm left it empty: %v", err)
	}
}

// shmMappings returns the lines of /proc/self/maps that map files of dir.
func shmMappings(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, dir+"/") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestShmClose checks that Close unmaps the files, that every verb,
// request and allocation RPC after it fails with ErrClosed, and that
// clients racing with Close see each verb either done or ErrClosed, never
// a fault on unmapped memory.
func TestShmClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p, err := NewPool(shmConfig(dir, 2))
	if err != nil {
		t.Fatal(err)
	}
	c := p.NewComputeNode().NewClient()
	a, err := c.AllocOn(ctx, 1, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	if m := shmMappings(t, dir); len(m) != 2 {
		t.Fatalf("an open pool of 2 nodes has %d mappings of its directory: %q", len(m), m)
	}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for g := range 4 {
		rc := p.NewComputeNode().NewClient()
		wg.Go(func() {
			buf := make([]byte, 64)
			<-gate
			for i := 0; ; i++ {
				var err error
				switch i % 4 {
				case 0:
					err = rc.Read(ctx, a, buf)
				case 1:
					err = rc.Write(ctx, a, buf)
				case 2:
					_, err = rc.CAS(ctx, a, 0, 0)
				case 3:
					_, err = rc.FAA(ctx, a.Add(8*uint64(g)), 1)
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("verb racing with Close: %v", err)
					return
				}
			}
		})
	}
	close(gate)
	time.Sleep(20 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if m := shmMappings(t, dir); len(m) != 0 {
		t.Errorf("mappings left after Close: %q", m)
	}
	fresh := p.NewComputeNode().NewClient()
	buf := make([]byte, 8)
	calls := []struct {
		name string
		err  error
	}{
		{"Read", c.Read(ctx, a, buf)},
		{"Write", c.Write(ctx, a, buf)},
		{"CAS", second(c.CAS(ctx, a, 0, 1))},
		{"FAA", second(c.FAA(ctx, a, 1))},
		{"Do", c.Do(ctx, []Op{Read(a, buf), FAA(a, 1)})},
		{"Post", c.Post(ctx, []Op{Write(a, buf)})},
		{"on-chip FAA", second(c.FAA(ctx, OnChip(0, 0), 1))},
		{"Named", second(fresh.Named(ctx, "root", 64))},
		{"Alloc by RPC", second(fresh.AllocOn(ctx, 0, 64, 8))},
		{"MemoryUsed", second(p.MemoryUsed())},
	}
	for _, call := range calls {
		if !errors.Is(call.err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", call.name, call.err)
		}
	}
	// The files keep their contents.
	p2 := openShm(t, Config{Shm: &ShmConfig{Dir: dir}})
	if u, err := p2.MemoryUsed(); err != nil || u[1] <= reservedBytes {
		t.Errorf("reopened after Close: MemoryUsed %v, %v", u, err)
	}
}

// second returns the error of a call with two results.
func second[T any](_ T, err error) error { return err }

// TestShmDirIsAFile gives a regular file as ShmConfig.Dir: NewPool fails
// with ErrBadRequest and leaves the file as it was.
func TestShmDirIsAFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "not-a-directory")
	if err := os.WriteFile(path, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, aLongTimeAgo, aLongTimeAgo); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, dir)
	if p, err := NewPool(Config{Shm: &ShmConfig{Dir: path}}); err == nil {
		p.Close()
		t.Fatal("NewPool accepted a regular file as its directory")
	} else if !strings.Contains(err.Error(), path) || !errors.Is(err, ErrBadRequest) {
		t.Errorf("error %q does not name the path or does not wrap ErrBadRequest", err)
	}
	for _, d := range before.diff(snapshotDir(t, dir)) {
		t.Errorf("NewPool modified the file: %s", d)
	}
	for _, cfg := range []Config{{Shm: &ShmConfig{}}, {Shm: &ShmConfig{Dir: path}, Sim: &SimConfig{}}} {
		if p, err := NewPool(cfg); !errors.Is(err, ErrBadRequest) {
			if err == nil {
				p.Close()
			}
			t.Errorf("NewPool(%+v): %v, want ErrBadRequest", cfg, err)
		}
	}
}

// TestShmNodeCountMismatch opens a directory of two memory nodes as a pool
// of one. Such a pool cannot follow any pointer into the second node (the
// trees of the directory lose about half their keys to ErrUnknownNode), so
// it must be refused with ErrBadNode, like a node at another position of its
// pool, and the files left untouched.
func TestShmNodeCountMismatch(t *testing.T) {
	dir := t.TempDir()
	p := newTestPool(t, shmConfig(dir, 2))
	c := p.NewComputeNode().NewClient()
	if _, err := c.AllocOn(context.Background(), 1, 64, 8); err != nil {
		t.Fatal(err)
	}
	p.Close()
	for _, name := range []string{"mn-0", "mn-1", "."} {
		if err := os.Chtimes(filepath.Join(dir, name), aLongTimeAgo, aLongTimeAgo); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotDir(t, dir)
	p1, err := NewPool(shmConfig(dir, 1))
	if err == nil {
		t.Errorf("a directory of 2 memory nodes opened as a pool of %d", p1.MemoryNodes())
		p1.Close()
	} else if !errors.Is(err, ErrBadNode) {
		t.Errorf("error %v does not wrap ErrBadNode", err)
	}
	for _, d := range before.diff(snapshotDir(t, dir)) {
		t.Errorf("refused directory modified: %s", d)
	}
}

// TestShmNodeCountFixed: the first pool on a directory fixes its number of
// memory nodes. A pool asking for more (which would create files the first
// pool never maps, and place data it cannot follow pointers into) or fewer
// is refused with ErrBadNode naming both counts, whether the first pool is
// still open or closed, and creates, removes or modifies nothing; the
// first pool keeps reading what it wrote, and a pool that leaves the count
// to the directory (MemoryNodes 0) gets the fixed one.
func TestShmNodeCountFixed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		have, ask int
		open      bool // the first pool is still open
	}{
		{"grow-2-to-3-open", 2, 3, true},
		{"grow-2-to-3-closed", 2, 3, false},
		{"grow-1-to-2-open", 1, 2, true},
		{"grow-1-to-4-closed", 1, 4, false},
		{"shrink-3-to-2-open", 3, 2, true},
		{"shrink-3-to-2-closed", 3, 2, false},
		{"shrink-2-to-1-closed", 2, 1, false},
		{"shrink-3-to-1-open", 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := newTestPool(t, shmConfig(dir, tc.have))
			c := p.NewComputeNode().NewClient()
			var written []Addr
			for mn := range tc.have {
				a, err := c.AllocOn(ctx, mn, 64, 8)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Write(ctx, a, fmt.Appendf(nil, "node %d!", mn)); err != nil {
					t.Fatal(err)
				}
				written = append(written, a)
			}
			if !tc.open {
				p.Close()
			}
			names := []string{"."}
			for i := range tc.have {
				names = append(names, filepath.Base(shmFile(dir, i)))
			}
			for _, name := range names {
				if err := os.Chtimes(filepath.Join(dir, name), aLongTimeAgo, aLongTimeAgo); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshotDir(t, dir)
			cfg := shmConfig(dir, tc.ask)
			cfg.NodeBytes = 0 // the files' size
			p2, err := NewPool(cfg)
			if err == nil {
				p2.Close()
				t.Fatalf("a directory of %d memory nodes opened as a pool of %d", tc.have, tc.ask)
			}
			if !errors.Is(err, ErrBadNode) {
				t.Fatalf("NewPool: %v, want ErrBadNode", err)
			}
			want := []string{fmt.Sprintf("%d memory node(s)", tc.have), fmt.Sprintf("lists %d", tc.ask)}
			if msg := err.Error(); !strings.Contains(msg, want[0]) || !strings.Contains(msg, want[1]) {
				t.Errorf("error %q does not name both counts (%q, %q)", msg, want[0], want[1])
			}
			for _, d := range before.diff(snapshotDir(t, dir)) {
				t.Errorf("refused pool modified the directory: %s", d)
			}
			check := func(who string, c *Client) {
				t.Helper()
				for mn, a := range written {
					got := make([]byte, 7)
					if err := c.Read(ctx, a, got); err != nil || string(got) != fmt.Sprintf("node %d!", mn) {
						t.Errorf("%s: node %d holds %q, %v", who, mn, got, err)
					}
				}
			}
			if tc.open {
				check("the first pool", c)
			}
			p3 := openShm(t, Config{Shm: &ShmConfig{Dir: dir}})
			if n := p3.MemoryNodes(); n != tc.have {
				t.Fatalf("a pool adopting the directory's count has %d memory nodes, want %d", n, tc.have)
			}
			check("a pool adopting the count", p3.NewComputeNode().NewClient())
		})
	}
}

// TestShmNodeCountRace opens a fresh directory from pools of two node
// counts at once: the count of the first pool that comes up is fixed, every
// other pool either has it too or is refused with ErrBadNode, and pools
// opened afterwards find that count, also where a refused pool left a file
// past it.
func TestShmNodeCountRace(t *testing.T) {
	for round := range 10 {
		dir := t.TempDir()
		const workers = 8
		gate := make(chan struct{})
		pools := make([]*Pool, workers)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for i := range workers {
			wg.Go(func() {
				<-gate
				pools[i], errs[i] = NewPool(shmConfig(dir, 2+i%2))
			})
		}
		close(gate)
		wg.Wait()
		fixed := 0
		for i, p := range pools {
			if errs[i] != nil {
				if !errors.Is(errs[i], ErrBadNode) {
					t.Errorf("round %d: pool of %d: %v, want ErrBadNode", round, 2+i%2, errs[i])
				}
				continue
			}
			if fixed == 0 {
				fixed = p.MemoryNodes()
			} else if p.MemoryNodes() != fixed {
				t.Errorf("round %d: pools of %d and %d memory nodes both opened one directory", round, fixed, p.MemoryNodes())
			}
			p.Close()
		}
		if fixed == 0 {
			t.Fatalf("round %d: every pool refused: %v", round, errors.Join(errs...))
		}
		t.Logf("round %d: pools of %d opened, %d refused", round, fixed, len(slices.DeleteFunc(errs, func(e error) bool { return e == nil })))
		openShm(t, shmConfig(dir, fixed)).Close()
		if p := openShm(t, Config{Shm: &ShmConfig{Dir: dir}}); p.MemoryNodes() != fixed {
			t.Errorf("round %d: a pool adopting the count has %d memory nodes, want %d", round, p.MemoryNodes(), fixed)
		}
		if p, err := NewPool(shmConfig(dir, 5-fixed)); !errors.Is(err, ErrBadNode) {
			if err == nil {
				p.Close()
			}
			t.Errorf("round %d: a pool of %d on a directory of %d: %v, want ErrBadNode", round, 5-fixed, fixed, err)
		}
	}
}
