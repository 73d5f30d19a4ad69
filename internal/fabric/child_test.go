//go:build fabric

package fabric

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary re-executes itself as a child process to play a client
// or a server in another process: TestMain runs the role named by
// childEnv instead of the tests.
const childEnv = "FABRIC_TEST_CHILD"

// presetWaitTime records whether the environment set FI_SOCKETS_PE_WAITTIME
// before the tests ran.
var presetWaitTime bool

func TestMain(m *testing.M) {
	_, presetWaitTime = os.LookupEnv("FI_SOCKETS_PE_WAITTIME")
	if role := os.Getenv(childEnv); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childArgs is what a child reads from its environment.
type childArgs struct {
	addr   string
	region Region
	off    uint64
	n      int
}

func (a childArgs) env(role string) []string {
	return append(os.Environ(),
		childEnv+"="+role,
		"FABRIC_TEST_ADDR="+a.addr,
		fmt.Sprintf("FABRIC_TEST_REGION=%d,%d,%d", a.region.Base, a.region.Key, a.region.Len),
		fmt.Sprintf("FABRIC_TEST_OFF=%d", a.off),
		fmt.Sprintf("FABRIC_TEST_N=%d", a.n),
	)
}

func readChildArgs() (childArgs, error) {
	a := childArgs{addr: os.Getenv("FABRIC_TEST_ADDR")}
	var err error
	if _, err = fmt.Sscanf(os.Getenv("FABRIC_TEST_REGION"), "%d,%d,%d", &a.region.Base, &a.region.Key, &a.region.Len); err != nil {
		return a, fmt.Errorf("FABRIC_TEST_REGION: %v", err)
	}
	if a.off, err = strconv.ParseUint(os.Getenv("FABRIC_TEST_OFF"), 10, 64); err != nil {
		return a, err
	}
	a.n, err = strconv.Atoi(os.Getenv("FABRIC_TEST_N"))
	return a, err
}

// runChild plays one role:
//   - server: listens (testListen) over one 4 KiB region, prints
//     "addr base key len" and serves until killed;
//   - faa: N fetch-and-adds of 1 on the word, printing every old value;
//   - cas: N CAS increments of the word, printing the attempts;
//   - hammer: batches of WRITEs and READs until killed, printing "ready"
//     after the first.
func runChild(role string) error {
	if role == "server" {
		mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return err
		}
		s, err := testListen([][]byte{mem})
		if err != nil {
			return err
		}
		r := s.Regions()[0]
		fmt.Printf("%s %d %d %d\n", s.Addr(), r.Base, r.Key, r.Len)
		select {}
	}
	a, err := readChildArgs()
	if err != nil {
		return err
	}
	c, err := Dial(testDialConfig(a.addr))
	if err != nil {
		return err
	}
	defer c.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch role {
	case "faa":
		for range a.n {
			op := []Op{{Kind: OpFAA, Region: a.region, Off: a.off, Swap: 1}}
			if err := c.Do(op); err != nil {
				return err
			}
			fmt.Fprintln(out, op[0].Old)
		}
	case "cas":
		attempts, err := casIncrements(c, a.region, a.off, a.n)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, attempts)
	case "hammer":
		ops := make([]Op, 32)
		for i := range ops {
			ops[i] = Op{Kind: OpWrite, Region: a.region, Off: a.off, Buf: make([]byte, 4096)}
			if i%2 == 1 {
				ops[i].Kind = OpRead
			}
		}
		for i := 0; ; i++ {
			if err := c.Do(ops); err != nil {
				return err
			}
			if i == 0 {
				fmt.Fprintln(out, "ready")
				out.Flush()
			}
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// casIncrements increments the word at off n times with CAS loops and
// returns the number of CAS attempts.
func casIncrements(c *Conn, r Region, off uint64, n int) (int, error) {
	attempts := 0
	cur := uint64(0)
	for range n {
		for {
			attempts++
			op := []Op{{Kind: OpCAS, Region: r, Off: off, Compare: cur, Swap: cur + 1}}
			if err := c.Do(op); err != nil {
				return attempts, err
			}
			if op[0].Succeeded() {
				cur++
				break
			}
			cur = op[0].Old
		}
	}
	return attempts, nil
}

// child is a running child process.
type child struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

// startChild starts the test binary as a child playing role; it is killed
// (by pid) and reaped at the end of the test.
func startChild(t testing.TB, role string, a childArgs) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = a.env(role)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return ch
}

// line reads the child's next output line, failing the test after timeout.
func (ch *child) line(t testing.TB, timeout time.Duration) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	done := make(chan res, 1)
	go func() {
		s, err := ch.out.ReadString('\n')
		done <- res{strings.TrimSpace(s), err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("child %d: reading its output: %v", ch.cmd.Process.Pid, r.err)
		}
		return r.s
	case <-time.After(timeout):
		t.Fatalf("child %d: no output in %v", ch.cmd.Process.Pid, timeout)
		return ""
	}
}

// wait reads the child's remaining output and waits for it to exit
// successfully.
func (ch *child) wait(t *testing.T) string {
	t.Helper()
	b, err := io.ReadAll(ch.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Wait(); err != nil {
		t.Fatalf("child %d: %v", ch.cmd.Process.Pid, err)
	}
	return string(b)
}
