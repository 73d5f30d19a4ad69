// Package memnodetest starts cmd/memnode processes on 127.0.0.1 for tests:
// it builds the command once per test binary, starts bounded numbers of
// servers, and stops every process it started, by pid, when the test ends.
package memnodetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Token is the shared secret of the servers Start starts.
const Token = "memnodetest-token"

// MaxNodes bounds the servers one test may start.
const MaxNodes = 8

// Options configures the servers Start starts.
type Options struct {
	// Bytes is each node's main region (default 64 MiB).
	Bytes int64
	// OnChipBytes is each node's on-chip region (default the server's).
	OnChipBytes int64
	// Dir, if set, gives each node a memory-node file Dir/node-<i>, so a
	// restarted node keeps its contents.
	Dir string
	// Tags are extra build tags for the memnode binary (e.g. "fabric").
	Tags string
	// Args are extra memnode arguments.
	Args []string
}

// Node is one running memnode process.
type Node struct {
	Addr string // host:port it listens on
	File string // its memory-node file, if any

	t    testing.TB
	opts Options
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *LockedBuffer
}

var (
	buildMu  sync.Mutex
	binaries = map[string]string{}
)

// Binary builds cmd/memnode with the given build tags once per test binary
// and returns its path.
func Binary(t testing.TB, tags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := binaries[tags]; ok {
		return b
	}
	dir, err := os.MkdirTemp("", "memnodetest-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "memnode")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "github.com/dmindex/dmindex/cmd/memnode")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building memnode: %v\n%s", err, out)
	}
	binaries[tags] = bin
	return bin
}

// Start starts n memnode servers on 127.0.0.1 and returns them once each
// printed its ready line. They are stopped when the test ends.
func Start(t testing.TB, n int, opts Options) []*Node {
	t.Helper()
	if n < 1 || n > MaxNodes {
		t.Fatalf("memnodetest: %d nodes (1..%d)", n, MaxNodes)
	}
	if opts.Bytes == 0 {
		opts.Bytes = 64 << 20
	}
	nodes := make([]*Node, n)
	for i := range nodes {
		nd := &Node{t: t, opts: opts}
		nd.args = []string{"--listen", "127.0.0.1:0", "--bytes", fmt.Sprint(opts.Bytes), "--token", Token, "--log-level", "warn"}
		if opts.OnChipBytes != 0 {
			nd.args = append(nd.args, "--onchip-bytes", fmt.Sprint(opts.OnChipBytes))
		}
		if opts.Dir != "" {
			nd.File = filepath.Join(opts.Dir, fmt.Sprintf("node-%d", i))
			nd.args = append(nd.args, "--file", nd.File)
		}
		nd.args = append(nd.args, opts.Args...)
		nd.start("127.0.0.1:0")
		nodes[i] = nd
	}
	return nodes
}

// Addrs returns the nodes' addresses.
func Addrs(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr
	}
	return out
}

var ready = regexp.MustCompile(`memnode: ready on (\S+)`)

// start runs the process listening on listen and waits for its ready line.
func (nd *Node) start(listen string) {
	t := nd.t
	t.Helper()
	args := append([]string(nil), nd.args...)
	args[1] = listen
	cmd := exec.Command(Binary(t, nd.opts.Tags), args...)
	cmd.Env = append(os.Environ(), "FI_SOCKETS_PE_WAITTIME=0")
	nd.log = &LockedBuffer{}
	cmd.Stderr = nd.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nd.cmd, nd.done = cmd, make(chan struct{})
	t.Cleanup(nd.Stop)
	go func() {
		cmd.Wait()
		close(nd.done)
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case line := <-lines:
		m := ready.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("memnode printed %q, not a ready line", line)
		}
		nd.Addr = m[1]
	case <-nd.done:
		t.Fatalf("memnode exited before it was ready: %s", nd.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("memnode not ready after 30 s: %s", nd.log.String())
	}
}

// Kill kills the process with SIGKILL and waits for it to exit.
func (nd *Node) Kill() {
	nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.done
}

// Stop stops the process with SIGTERM (SIGKILL after 10 s) and waits for
// it; it reports an unclean exit. Calling it again does nothing.
func (nd *Node) Stop() {
	select {
	case <-nd.done:
		return
	default:
	}
	nd.cmd.Process.Signal(syscall.SIGTERM)
	nd.cmd.Process.Signal(syscall.SIGCONT) // a paused process (Pause) takes it once continued
	select {
	case <-nd.done:
		if !nd.cmd.ProcessState.Success() {
			nd.t.Errorf("memnode %s exited with %v: %s", nd.Addr, nd.cmd.ProcessState, nd.log.String())
		}
	case <-time.After(10 * time.Second):
		nd.Kill()
		nd.t.Errorf("memnode %s ignored SIGTERM for 10 s", nd.Addr)
	}
}

// Pause stops the process with SIGSTOP, as a memory node that stops
// answering: the kernel still accepts connections to its port, and nothing
// answers them. It returns once the process is stopped (on Linux, where
// /proc tells; elsewhere after 50 ms), so that a request sent after it is
// not answered. Resume continues it; Stop, which ends every test's
// processes, continues a paused one too.
func (nd *Node) Pause() {
	nd.cmd.Process.Signal(syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", nd.cmd.Process.Pid)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // no /proc
			return
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
	nd.t.Errorf("memnode %s not stopped 5 s after SIGSTOP", nd.Addr)
}

// Resume continues a process stopped by Pause.
func (nd *Node) Resume() { nd.cmd.Process.Signal(syscall.SIGCONT) }

// Restart stops the process (killing it if kill is set) and starts it again
// on the same address, with the same file.
func (nd *Node) Restart(kill bool) {
	if kill {
		nd.Kill()
	} else {
		nd.Stop()
	}
	nd.start(nd.Addr)
}

// Log returns what the process wrote to standard error.
func (nd *Node) Log() string { return nd.log.String() }

// LockedBuffer collects a process's output; it is safe for concurrent use.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
