package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
)

// The test binary doubles as a compute-node process: started with childEnv
// set, it runs runChild instead of the tests.
const (
	childEnv      = "DMINDEX_MEMNODE_TEST_CHILD" // role: "write" or "churn"
	childAddrs    = "DMINDEX_MEMNODE_TEST_ADDRS"
	childIndex    = "DMINDEX_MEMNODE_TEST_INDEX" // "smart" or "sherman"
	childRange    = "DMINDEX_MEMNODE_TEST_RANGE" // "lo,n,workers"
	childTreeName = "shared"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// key and value are the deterministic contents of the trees these tests
// build: key k holds value(k), whichever process wrote it.
func key(k uint64) []byte { return binary.BigEndian.AppendUint64(nil, k) }
func value(k uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, k*0x9E3779B97F4A7C15|1)
}

// tcpConfig is a pool on the memnode servers at addrs.
func tcpConfig(addrs []string, timeout time.Duration) remote.Config {
	return remote.Config{TCP: &remote.TCPConfig{MemoryNodes: addrs, Token: memnodetest.Token,
		DialTimeout: 5 * time.Second, Timeout: timeout}}
}

// openIndex opens the shared tree of the given kind on cn; retry is
// Sherman's RetryBudget (0: the default).
func openIndex(kind string, cn *remote.ComputeNode, retry int) (smart.Index, func(context.Context) error, error) {
	switch kind {
	case "smart":
		t, err := smart.Open(cn, smart.Options{Name: childTreeName})
		if err != nil {
			return nil, nil, err
		}
		return t, t.Verify, nil
	case "sherman":
		t, err := sherman.Open(cn, sherman.Options{Name: childTreeName, RetryBudget: retry})
		if err != nil {
			return nil, nil, err
		}
		return t, t.Verify, nil
	}
	return nil, nil, fmt.Errorf("unknown index %q", kind)
}

// runChild is a compute-node process: it inserts the keys lo..lo+n-1 of
// the shared tree with several workers, printing "ack K" once key K's Put
// returned nil. Role "churn" then prints "churn" and, until killed,
// rewrites random keys of its range (same values: every leaf lock is taken
// and released over and over) and inserts new keys above it, acking them.
func runChild(role string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	var lo, n, workers uint64
	if _, err := fmt.Sscanf(os.Getenv(childRange), "%d,%d,%d", &lo, &n, &workers); err != nil {
		return fail(err)
	}
	p, err := remote.NewPool(tcpConfig(strings.Split(os.Getenv(childAddrs), ","), 10*time.Second))
	if err != nil {
		return fail(err)
	}
	defer p.Close()
	idx, _, err := openIndex(os.Getenv(childIndex), p.NewComputeNode(), 0)
	if err != nil {
		return fail(err)
	}
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	ctx := context.Background()
	var next atomic.Uint64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := lo + next.Add(1) - 1; k < lo+n && !failed.Load(); k = lo + next.Add(1) - 1 {
				if err := idx.Put(ctx, key(k), value(k)); err != nil {
					fmt.Fprintf(os.Stderr, "child: put %d: %v\n", k, err)
					failed.Store(true)
					return
				}
				say("ack %d", k)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return 1
	}
	if role != "churn" {
		return 0
	}
	say("churn")
	var fresh atomic.Uint64
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(w, lo))
			for i := 0; ; i++ {
				k := lo + rng.Uint64N(n)
				if i%4 == 3 {
					k = lo + n + fresh.Add(1) - 1
				}
				if err := idx.Put(ctx, key(k), value(k)); err != nil {
					fmt.Fprintf(os.Stderr, "child: churn put %d: %v\n", k, err)
					os.Exit(1)
				}
				if k >= lo+n {
					say("ack %d", k)
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// child is a compute-node process running runChild.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process exited and its output was read
	stderr memnodetest.LockedBuffer

	mu    sync.Mutex
	acks  []uint64
	churn bool
}

// startChild starts a compute-node process on the servers at addrs; it is
// killed (by pid) when the test ends if it is still running.
func startChild(t *testing.T, role, kind string, addrs []string, lo, n, workers int) *child {
	t.Helper()
	c := &child{t: t, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"="+role, childAddrs+"="+strings.Join(addrs, ","),
		childIndex+"="+kind, fmt.Sprintf("%s=%d,%d,%d", childRange, lo, n, workers))
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			if k, ok := strings.CutPrefix(line, "ack "); ok {
				v, err := strconv.ParseUint(k, 10, 64)
				if err == nil {
					c.acks = append(c.acks, v)
				}
			} else if line == "churn" {
				c.churn = true
			}
			c.mu.Unlock()
		}
		c.cmd.Wait()
		close(c.done)
	}()
	return c
}

// acked returns the keys acknowledged so far and whether churn started.
func (c *child) acked() ([]uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.acks...), c.churn
}

// wait waits for the process to exit by itself and fails unless it
// exited 0.
func (c *child) wait(timeout time.Duration) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.t.Fatalf("compute-node process still running after %v: %s", timeout, c.stderr.String())
	}
	if !c.cmd.ProcessState.Success() {
		c.t.Fatalf("compute-node process: %v: %s", c.cmd.ProcessState, c.stderr.String())
	}
}

// kill kills the process with SIGKILL and waits until its output is read.
func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// proc is a memnode process started directly (not through memnodetest),
// for tests of its flags, output, signals and exit status.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	done   chan struct{}
	stderr memnodetest.LockedBuffer
	lines  chan string
	addr   string
	ready  string
}

var readyLine = regexp.MustCompile(`^memnode: ready on (127\.0\.0\.1:\d+) \(main (\d+) bytes, on-chip (\d+) bytes, (anonymous|file .+)\)$`)

// startProc starts the memnode binary with args and env (added to an
// environment without DMINDEX_TOKEN); it is killed by pid when the test ends
// if it is still running.
func startProc(t *testing.T, args []string, env ...string) *proc {
	t.Helper()
	p := &proc{t: t, done: make(chan struct{}), lines: make(chan string, 16)}
	p.cmd = exec.Command(memnodetest.Binary(t, ""), args...)
	p.cmd.Env = append(environWithout("DMINDEX_TOKEN"), env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// waitReady waits for the ready line, which must be the first line of
// standard output, and returns it.
func (p *proc) waitReady() string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.done
			p.t.Fatalf("memnode exited (%v) before its ready line: %s", p.cmd.ProcessState, p.stderr.String())
		}
		m := readyLine.FindStringSubmatch(line)
		if m == nil {
			p.t.Fatalf("first line %q is not a ready line", line)
		}
		p.addr, p.ready = m[1], line
		return line
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no ready line after 30 s: %s", p.stderr.String())
	}
	return ""
}

// exit waits for the process to exit and returns its exit code (-1 if a
// signal killed it).
func (p *proc) exit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("memnode still running %v later: %s", timeout, p.stderr.String())
	}
	return 0
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

func environWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// newPool opens a pool closed at the end of the test.
func newPool(t *testing.T, cfg remote.Config) *remote.Pool {
	t.Helper()
	p, err := remote.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// readAll checks that every key of keys holds its value in idx.
func readAll(ctx context.Context, t *testing.T, idx smart.Index, keys []uint64) {
	t.Helper()
	for _, k := range keys {
		v, found, err := idx.Get(ctx, key(k))
		if err != nil {
			t.Fatalf("get of acknowledged key %d: %v", k, err)
		}
		if !found || string(v) != string(value(k)) {
			t.Fatalf("acknowledged key %d: found=%v value %x, want %x", k, found, v, value(k))
		}
	}
}

// errIs reports whether err wraps one of targets.
func errIs(err error, targets ...error) bool {
	for _, e := range targets {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
