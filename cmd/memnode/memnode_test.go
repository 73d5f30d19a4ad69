package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/memnodetest"
	"github.com/dmindex/dmindex/remote"
)

// TestMemnodeFlagErrors: bad command lines make memnode exit with status 2
// and a message, without serving.
func TestMemnodeFlagErrors(t *testing.T) {
	bin := memnodetest.Binary(t, "")
	dir := t.TempDir()
	tok := "--token=x"
	cases := []struct {
		name string
		args []string
		want string // in standard error
	}{
		{"no token", []string{"--listen", "127.0.0.1:0"}, "token"},
		{"bytes not a number", []string{tok, "--bytes", "abc"}, "--bytes"},
		{"negative bytes", []string{tok, "--bytes", "-1"}, "--bytes"},
		{"unknown suffix", []string{tok, "--bytes", "12Q"}, "--bytes"},
		{"bytes of 200T", []string{tok, "--bytes", "200T"}, `--bytes: "200T" is not a size below 128T`},
		{"bytes overflowing int64", []string{tok, "--bytes", "99999999999999999999"}, "--bytes"},
		{"empty number with a suffix", []string{tok, "--bytes", "G"}, "--bytes"},
		{"bad on-chip bytes", []string{tok, "--onchip-bytes", "1.5K"}, "--onchip-bytes"},
		{"on-chip bytes above 1G", []string{tok, "--listen", "127.0.0.1:0", "--onchip-bytes", "3G"}, "OnChipBytes 3221225472 above 1 GiB"},
		{"bad log level", []string{tok, "--log-level", "loud"}, "log-level"},
		{"extra argument", []string{tok, "serve"}, "serve"},
		{"unknown flag", []string{tok, "--port", "1"}, "port"},
		{"unusable listen address", []string{tok, "--listen", "256.0.0.1:0"}, "256.0.0.1"},
		{"file in a missing directory", []string{tok, "--listen", "127.0.0.1:0", "--file", filepath.Join(dir, "missing", "node")}, "missing"},
		{"main region too small for a node", []string{tok, "--listen", "127.0.0.1:0", "--bytes", "4K"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = environWithout("DMINDEX_TOKEN")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("memnode %v still running after 20 s (it should have refused to start); stdout %q", tc.args, stdout.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("memnode %v: %v, want exit status 2; stdout %q stderr %q", tc.args, err, stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), "ready") {
				t.Errorf("printed a ready line: %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || stderr.Len() == 0 {
				t.Errorf("standard error %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
	t.Run("file that is not a memory node", func(t *testing.T) {
		junk := filepath.Join(dir, "junk")
		content := bytes.Repeat([]byte("not a memory node\n"), 1<<16)
		if err := os.WriteFile(junk, content, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--token", "x", "--listen", "127.0.0.1:0", "--file", junk)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("memnode on a foreign file: %v, want exit status 2: %s", err, out)
		}
		if after, _ := os.ReadFile(junk); !bytes.Equal(after, content) {
			t.Error("memnode modified a file it refused")
		}
	})
}

// TestMemnodeHelp: -h prints the usage text and exits with status 0, as a
// help request and not an error.
func TestMemnodeHelp(t *testing.T) {
	bin := memnodetest.Binary(t, "")
	for _, arg := range []string{"-h", "--help"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, arg)
		cmd.Env = environWithout("DMINDEX_TOKEN")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("memnode %s: %v, want exit status 0; stderr %q", arg, err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "usage: memnode") || strings.Contains(stderr.String(), "memnode: flag") {
			t.Errorf("memnode %s: standard error %q, want the usage text alone", arg, stderr.String())
		}
	}
}

// TestMemnodeListenFailureLeavesNoFile: a memnode that cannot listen exits
// with status 2 without creating its --file (it left a new 64 MiB file
// behind), and leaves an existing one as it was.
func TestMemnodeListenFailureLeavesNoFile(t *testing.T) {
	bin := memnodetest.Binary(t, "")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	content := []byte("not a memory node, and not memnode's to remove\n")
	if err := os.WriteFile(existing, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "new"), existing} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--token", "x", "--listen", busy.Addr().String(), "--bytes", "64M", "--file", file)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), busy.Addr().String()) {
			t.Errorf("memnode --listen on a busy port: %v, want exit status 2 naming the address: %s", err, out)
		}
		after, err := os.ReadFile(file)
		switch {
		case file == existing && !bytes.Equal(after, content):
			t.Errorf("the existing file %s was changed or removed: %v", file, err)
		case file != existing && !errors.Is(err, os.ErrNotExist):
			t.Errorf("a failed start left %s behind (%d bytes, %v)", file, len(after), err)
		}
	}
}

// TestMemnodeReadyLine: the first line of standard output is the ready
// line with the address and sizes actually served, the token may come from
// DMINDEX_TOKEN, and a pool sees the sizes the line announces.
func TestMemnodeReadyLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name             string
		args             []string
		main, chip, kind string
	}{
		{"anonymous", []string{"--bytes", "2M", "--onchip-bytes", "8K"}, "2097152", "8192", "anonymous"},
		{"file", []string{"--bytes", "3M", "--file", filepath.Join(t.TempDir(), "n")}, "3145728", "262144", "file "},
		{"no on-chip region", []string{"--bytes", "1M", "--onchip-bytes", "0"}, "1048576", "0", "anonymous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, append([]string{"--listen", "127.0.0.1:0"}, tc.args...), "DMINDEX_TOKEN="+memnodetest.Token)
			p.waitReady()
			m := readyLine.FindStringSubmatch(p.ready)
			if m[2] != tc.main || m[3] != tc.chip || !strings.HasPrefix(m[4], tc.kind) {
				t.Fatalf("ready line %q, want main %s, on-chip %s, %s", p.ready, tc.main, tc.chip, tc.kind)
			}
			pool := newPool(t, tcpConfig([]string{p.addr}, 5*time.Second))
			got := pool.Config()
			chip := got.OnChipBytes
			if chip < 0 {
				chip = 0 // a pool reports a node without a region as disabled (-1)
			}
			if got.NodeBytes != int64(atoi(t, tc.main)) || chip != atoi(t, tc.chip) {
				t.Fatalf("pool sees main %d, on-chip %d; the ready line said %s, %s", got.NodeBytes, got.OnChipBytes, tc.main, tc.chip)
			}
			c := pool.NewComputeNode().NewClient()
			if _, err := c.Named(ctx, "ready", 64); err != nil {
				t.Fatal(err)
			}
			pool.Close()
			p.signal(syscall.SIGTERM)
			if code := p.exit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d after SIGTERM: %s", code, p.stderr.String())
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMemnodeSignals: SIGTERM and SIGINT end memnode with status 0 within
// a bounded time, also with connected pools and an idle connection, and
// its clients then get errors wrapping ErrUnavailable, never a hang.
func TestMemnodeSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := startProc(t, []string{"--listen", "127.0.0.1:0", "--bytes", "4M", "--token", memnodetest.Token})
			p.waitReady()
			pool := newPool(t, tcpConfig([]string{p.addr}, 2*time.Second))
			c := pool.NewComputeNode().NewClient()
			a, err := c.Alloc(ctx, 64)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			errs := make(chan error, 4)
			for range 4 { // clients busy while the signal arrives
				c := pool.NewComputeNode().NewClient()
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := c.FAA(ctx, a, 1); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			p.signal(sig)
			if code := p.exit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d after %v: %s", code, sig, p.stderr.String())
			}
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, remote.ErrUnavailable) {
					t.Errorf("verb in flight at shutdown: %v, want ErrUnavailable", err)
				}
			}
			start := time.Now()
			if _, err := c.FAA(ctx, a, 1); !errors.Is(err, remote.ErrUnavailable) {
				t.Fatalf("verb after shutdown: %v, want ErrUnavailable", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("verb after shutdown took %v", d)
			}
		})
	}
}

// TestMemnodeWrongToken: a pool presenting a wrong token fails with an
// error wrapping ErrAuth, the server logs the refusal, and keeps serving
// good clients, old and new.
func TestMemnodeWrongToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := memnodetest.Start(t, 1, memnodetest.Options{Bytes: 4 << 20, Args: []string{"--log-level", "info"}})
	good := newPool(t, tcpConfig(memnodetest.Addrs(nodes), 5*time.Second))
	c := good.NewComputeNode().NewClient()
	a, err := c.Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"wrong", memnodetest.Token + " ", strings.ToUpper(memnodetest.Token)} {
		cfg := tcpConfig(memnodetest.Addrs(nodes), 5*time.Second)
		cfg.TCP.Token = tok
		p, err := remote.NewPool(cfg)
		if err == nil {
			p.Close()
			t.Fatalf("token %q accepted", tok)
		}
		if !errors.Is(err, remote.ErrAuth) {
			t.Fatalf("token %q: %v, want ErrAuth", tok, err)
		}
		if _, err := c.FAA(ctx, a, 1); err != nil {
			t.Fatalf("good client after a refusal: %v", err)
		}
	}
	if !regexp.MustCompile(`(?i)refus|auth`).MatchString(nodes[0].Log()) {
		t.Errorf("no refusal in the server's log:\n%s", nodes[0].Log())
	}
	late := newPool(t, tcpConfig(memnodetest.Addrs(nodes), 5*time.Second))
	if v, err := late.NewComputeNode().NewClient().FAA(ctx, a, 0); err != nil || v != 3 {
		t.Fatalf("new good pool after refusals: %d, %v (want 3)", v, err)
	}
}

// TestMemnodeKilledUnderLoad: when one of two memory nodes is killed
// (SIGKILL) under a SMART write load, every operation returns within the
// transport's Timeout plus a margin, every error wraps ErrUnavailable, and
// verbs to the dead node keep failing that way.
func TestMemnodeKilledUnderLoad(t *testing.T) {
	const timeout = 2 * time.Second
	const bound = timeout + 3*time.Second
	nodes := memnodetest.Start(t, 2, memnodetest.Options{Bytes: 32 << 20})
	p := newPool(t, tcpConfig(memnodetest.Addrs(nodes), timeout))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cn := p.NewComputeNode()
	idx, _, err := openIndex("smart", cn, 0)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := cn.NewClient().AllocOn(ctx, 1, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	var killed sync.Once
	var killedAt time.Time
	var mu sync.Mutex
	var wg sync.WaitGroup
	unavailable := 0
	for w := range 6 {
		wg.Go(func() {
			for i := uint64(0); ; i++ {
				k := uint64(w)<<32 | i + 1
				start := time.Now()
				err := idx.Put(ctx, key(k), value(k))
				if d := time.Since(start); d > bound {
					t.Errorf("a Put took %v (Timeout %v)", d, timeout)
				}
				if err == nil {
					if i == 200 {
						killed.Do(func() { nodes[1].Kill(); killedAt = time.Now() })
					}
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(err, remote.ErrUnavailable) {
					t.Errorf("Put after the kill: %v, want ErrUnavailable", err)
				}
				unavailable++
				return
			}
		})
	}
	wg.Wait()
	if unavailable != 6 || killedAt.IsZero() {
		t.Fatalf("%d of 6 writers saw ErrUnavailable", unavailable)
	}
	t.Logf("every writer failed within %v of the kill", time.Since(killedAt))
	for i := range 3 {
		c := cn.NewClient() // a failed FAA stops its client (remote.Client.Crashed)
		start := time.Now()
		if _, err := c.FAA(ctx, dead, 1); !errors.Is(err, remote.ErrUnavailable) {
			t.Fatalf("FAA %d on the dead node: %v, want ErrUnavailable", i, err)
		}
		if d := time.Since(start); d > bound {
			t.Fatalf("FAA %d on the dead node took %v", i, d)
		}
	}
}

// TestMemnodeStoppedUnderLoad: a memory node that stops answering (SIGSTOP:
// its connections stay open) fails the verbs waiting on it with
// ErrUnavailable once TCPConfig.Timeout has passed, not later.
func TestMemnodeStoppedUnderLoad(t *testing.T) {
	const timeout = time.Second
	const bound = timeout + 3*time.Second
	p := startProc(t, []string{"--listen", "127.0.0.1:0", "--bytes", "4M", "--token", memnodetest.Token})
	p.waitReady()
	pool := newPool(t, tcpConfig([]string{p.addr}, timeout))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := pool.NewComputeNode().NewClient().Alloc(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	var stopped sync.Once
	var stoppedAt time.Time
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		c := pool.NewComputeNode().NewClient()
		wg.Go(func() {
			for i := 0; ; i++ {
				start := time.Now()
				_, err := c.FAA(ctx, a, 1)
				d := time.Since(start)
				if err == nil {
					if i == 500 && w == 0 {
						stopped.Do(func() {
							mu.Lock()
							defer mu.Unlock()
							p.signal(syscall.SIGSTOP)
							stoppedAt = time.Now()
						})
					}
					if d > bound {
						t.Errorf("an FAA took %v", d)
					}
					continue
				}
				if !errors.Is(err, remote.ErrUnavailable) {
					t.Errorf("FAA on a stopped node: %v, want ErrUnavailable", err)
				}
				mu.Lock()
				since := time.Since(stoppedAt)
				mu.Unlock()
				if since > bound {
					t.Errorf("FAA failed %v after the node stopped (Timeout %v)", since, timeout)
				}
				return
			}
		})
	}
	wg.Wait()
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	if code := p.exit(10 * time.Second); code != 0 {
		t.Errorf("exit status %d after SIGCONT and SIGTERM: %s", code, p.stderr.String())
	}
}

// TestMemnodeFileReopen: memnode restarted on its --file without size
// flags serves the file with its sizes and contents (the flag's help: "with
// --file: the file's size"), whether the file was created with explicit
// sizes or the defaults; a size flag that contradicts the file is refused
// (status 2) and leaves the file as it was.
func TestMemnodeFileReopen(t *testing.T) {
	for _, tc := range []struct {
		name       string
		create     []string
		main, chip string
	}{
		{"explicit sizes", []string{"--bytes", "3M", "--onchip-bytes", "8K"}, "3145728", "8192"},
		{"default sizes", nil, "1073741824", "262144"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			file := filepath.Join(t.TempDir(), "node")
			base := []string{"--listen", "127.0.0.1:0", "--token", memnodetest.Token, "--file", file}
			p := startProc(t, append(base, tc.create...))
			p.waitReady()
			pool := newPool(t, tcpConfig([]string{p.addr}, 5*time.Second))
			c := pool.NewComputeNode().NewClient()
			x, err := c.Named(ctx, "reopen", 64)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Write(ctx, x, []byte("reopen!!")); err != nil {
				t.Fatal(err)
			}
			pool.Close()
			p.signal(syscall.SIGTERM)
			if code := p.exit(10 * time.Second); code != 0 {
				t.Fatalf("exit status %d: %s", code, p.stderr.String())
			}

			wrong := startProc(t, append(base, "--bytes", "5M"))
			if code := wrong.exit(20 * time.Second); code != 2 {
				t.Errorf("--bytes 5M on a file of %s bytes: exit status %d, want 2", tc.main, code)
			}

			q := startProc(t, base)
			q.waitReady()
			m := readyLine.FindStringSubmatch(q.ready)
			if m[2] != tc.main || m[3] != tc.chip {
				t.Fatalf("reopened: %q, want main %s and on-chip %s", q.ready, tc.main, tc.chip)
			}
			pool = newPool(t, tcpConfig([]string{q.addr}, 5*time.Second))
			c = pool.NewComputeNode().NewClient()
			y, err := c.Named(ctx, "reopen", 64)
			got := make([]byte, 8)
			if err == nil {
				err = c.Read(ctx, y, got)
			}
			if err != nil || y != x || string(got) != "reopen!!" {
				t.Fatalf("reopened: %v, region %v (was %v) holds %q", err, y, x, got)
			}
		})
	}
}
