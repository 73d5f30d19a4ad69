// Package childtest runs a test binary's own test functions in child
// processes, for tests that need several processes (pools of shared-memory
// files): the child is the running test binary re-executed with -test.run
// selecting one test function, which reads its argument with Arg. Every
// child runs under a time limit and is killed, by pid, when the test that
// started it ends.
package childtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// envArg is the environment variable that carries a child's argument.
const envArg = "DMINDEX_CHILDTEST_ARG"

// DefaultTimeout is the time limit of a child whose Options give none.
const DefaultTimeout = 2 * time.Minute

// Arg returns the argument the running process was started with, and
// whether it is a child started by Start. Child test functions skip
// themselves when it is not.
func Arg() (arg string, ok bool) { return os.LookupEnv(envArg) }

// Options describe a child.
type Options struct {
	// Test is the name of the test function the child runs.
	Test string
	// Arg is handed to the child, which reads it with Arg.
	Arg string
	// Files are passed to the child as descriptors 3, 4, ...
	Files []*os.File
	// Timeout bounds the child's run (default DefaultTimeout): it is
	// killed when it expires.
	Timeout time.Duration
	// SysProcAttr, if set, are the child's process attributes (for
	// instance a mount namespace of its own).
	SysProcAttr *syscall.SysProcAttr
}

// Child is a running child process.
type Child struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}
	err  error // the exit status, set before done is closed

	timedOut atomic.Bool
}

// Start starts a child running o.Test and returns once it runs; it fails
// the test if the child cannot be started. The child is killed (SIGKILL)
// and waited for when the test ends, or when o.Timeout expires.
func Start(t testing.TB, o Options) *Child {
	t.Helper()
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	args := []string{"-test.run=^" + o.Test + "$", "-test.count=1", "-test.timeout=" + o.Timeout.String()}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	c := &Child{done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], args...)
	c.cmd.Env = append(os.Environ(), envArg+"="+o.Arg)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.cmd.ExtraFiles = o.Files
	c.cmd.SysProcAttr = o.SysProcAttr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("childtest: starting %s: %v", o.Test, err)
	}
	timer := time.AfterFunc(o.Timeout, func() {
		c.timedOut.Store(true)
		c.kill()
	})
	go func() {
		c.err = c.cmd.Wait()
		timer.Stop()
		close(c.done)
	}()
	t.Cleanup(c.Kill)
	return c
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done returns a channel that is closed once the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Wait waits for the child to exit. It returns nil if the child's test
// passed, otherwise an error that includes the child's output.
func (c *Child) Wait() error {
	<-c.done
	if c.err != nil {
		limit := ""
		if c.timedOut.Load() {
			limit = " (killed at its time limit)"
		}
		return fmt.Errorf("child %d: %w%s; output:\n%s", c.Pid(), c.err, limit, c.Output())
	}
	return nil
}

// Kill kills the child with SIGKILL, by pid, and waits for it to exit. It
// does nothing if the child has exited.
func (c *Child) Kill() {
	c.kill()
	<-c.done
}

// kill sends SIGKILL to the child. It can only fail if the child has
// exited already, which is what the caller wants.
func (c *Child) kill() { _ = c.cmd.Process.Kill() }

// Output returns what the child wrote to its standard output and error so
// far.
func (c *Child) Output() string { return c.out.String() }

// Lines returns the lines of the child's output that start with prefix,
// with the prefix removed.
func (c *Child) Lines(prefix string) []string {
	var out []string
	for line := range strings.Lines(c.Output()) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			out = append(out, strings.TrimSuffix(rest, "\n"))
		}
	}
	return out
}

// Signal creates the empty file path, a flag other processes wait for with
// Await.
func Signal(path string) error { return os.WriteFile(path, nil, 0o644) }

// Await waits until every file of paths exists, or fails after timeout.
func Await(timeout time.Duration, paths ...string) error {
	deadline := time.Now().Add(timeout)
	for _, p := range paths {
		for {
			_, err := os.Stat(p)
			if err == nil {
				break
			}
			if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("childtest: %s did not appear within %v", p, timeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// lockedBuffer collects a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
