//go:build fabric

package fabric

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchShapes are the measured batch shapes: 8-byte CAS and 64-byte READ,
// one at a time and in batches of 32 and 64.
var benchShapes = []struct {
	op     string
	window int
}{
	{"cas8", 1}, {"cas8", 32}, {"cas8", 64},
	{"read64", 1}, {"read64", 32}, {"read64", 64},
}

// BenchmarkGo measures verbs per second through the Go engine: one Do per
// batch of window operations (ns/op is per batch).
func BenchmarkGo(b *testing.B) {
	_, addr, r := startServerChild(b) // the server in a process of its own, as on a real memory node
	c, err := Dial(testDialConfig(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, sh := range benchShapes {
		b.Run(fmt.Sprintf("%s/w%d", sh.op, sh.window), func(b *testing.B) {
			ops := benchOps(sh.op, sh.window, r)
			start := time.Now()
			for b.Loop() {
				if err := c.Do(ops); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*sh.window)/time.Since(start).Seconds(), "verbs/s")
		})
	}
}

// BenchmarkGoVsC alternates pairs rounds of chunk verbs (rounded up to a
// whole number of batches) between the C and the Go client.
const (
	pairs = 10
	chunk = 2000
)

// benchOps returns the batch of a shape: window 8-byte CAS (compare 0,
// swap 0) or 64-byte READs of the region's first bytes.
func benchOps(op string, window int, r Region) []Op {
	ops := make([]Op, window)
	for i := range ops {
		ops[i] = Op{Kind: OpCAS, Region: r}
		if op == "read64" {
			ops[i] = Op{Kind: OpRead, Region: r, Buf: make([]byte, 64)}
		}
	}
	return ops
}

// BenchmarkGoVsC measures the cost of the Go and cgo layer. For each shape
// it runs cbench/cbench.c, a plain C client of the same provider (built
// here with cc and pkg-config; skipped if either is missing), and Conn.Do
// against the same server process, alternating rounds of the same verbs
// between them (C first, then Go first) so that both see the same machine
// load. It reports both rates and go/c, the ratio of their total times
// (1.2: the Go layer costs 20%); ns/op is the Go time per batch.
func BenchmarkGoVsC(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "cbench")
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "libfabric").Output()
	if err != nil {
		b.Skipf("pkg-config libfabric: %v", err)
	}
	args := append([]string{"-O2", "-o", bin, filepath.Join("cbench", "cbench.c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		b.Skipf("cc: %v\n%s", err, out)
	}
	_, addr, r := startServerChild(b) // the server in a process of its own, as on a real memory node
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		b.Fatal(err)
	}
	c, err := Dial(testDialConfig(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, sh := range benchShapes {
		b.Run(fmt.Sprintf("%s/w%d", sh.op, sh.window), func(b *testing.B) {
			cb := startCBench(b, bin, host, port, r, sh.op, sh.window)
			ops := benchOps(sh.op, sh.window, r)
			batches := (chunk + sh.window - 1) / sh.window
			verbs := batches * sh.window
			var cSecs, goSecs float64
			runGo := func() {
				start := time.Now()
				for range batches {
					if err := c.Do(ops); err != nil {
						b.Fatal(err)
					}
				}
				goSecs += time.Since(start).Seconds()
			}
			for i := range pairs {
				if i%2 == 1 {
					runGo()
				}
				cSecs += cb.run(b, verbs)
				if i%2 == 0 {
					runGo()
				}
			}
			total := float64(pairs * verbs)
			b.ReportMetric(goSecs*1e9/float64(pairs*batches), "ns/op")
			b.ReportMetric(total/cSecs, "c-verbs/s")
			b.ReportMetric(total/goSecs, "go-verbs/s")
			b.ReportMetric(goSecs/cSecs, "go/c")
		})
	}
}

// cBench is a running cbench process.
type cBench struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// startCBench starts cbench for one shape; it exits at the end of the
// benchmark (end of input), or is killed.
func startCBench(b *testing.B, bin, host, port string, r Region, op string, window int) *cBench {
	cmd := exec.Command(bin, testProvider, host, port, strconv.FormatUint(r.Key, 10),
		strconv.FormatUint(r.Base, 10), strings.TrimRight(op, "0123456789"), strconv.Itoa(window))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(failBound):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return &cBench{in: in, out: bufio.NewReader(out)}
}

// run has cbench run verbs verbs and returns the seconds they took.
func (cb *cBench) run(b *testing.B, verbs int) float64 {
	if _, err := fmt.Fprintln(cb.in, verbs); err != nil {
		b.Fatalf("cbench: %v", err)
	}
	line, err := cb.out.ReadString('\n')
	if err != nil {
		b.Fatalf("cbench: %v", err)
	}
	var n int
	var secs float64
	if _, err := fmt.Sscanf(line, "%d %g", &n, &secs); err != nil || n != verbs {
		b.Fatalf("cbench said %q", line)
	}
	return secs
}
