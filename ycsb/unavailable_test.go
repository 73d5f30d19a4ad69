package ycsb_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

// TestRunStopsWhenNodeGone: a memory node whose server goes away during
// the warm-up or the run phase of a tcp run stops that phase at the first
// operation that fails with remote.ErrUnavailable: Run returns that error,
// naming the phase, instead of a Result measured over a dead node, and the
// clients stop (far fewer operations than the phase's).
func TestRunStopsWhenNodeGone(t *testing.T) {
	const records, ops = 2000, 200_000
	for _, tc := range []struct {
		phase  string
		warmup int64
	}{
		{"warm-up", ops},
		{"run", -1},
	} {
		t.Run(tc.phase, func(t *testing.T) {
			srv, addr := startServer(t)
			w, err := ycsb.Preset("a")
			if err != nil {
				t.Fatal(err)
			}
			var done atomic.Int64
			var once sync.Once
			closed := make(chan struct{})
			cfg := ycsb.Config{
				Index: "mem", Open: ycsbtest.NewOpener(), Workload: w, Keys: ycsb.KeyInt,
				Records: records, Ops: ops, WarmupOps: tc.warmup, ComputeNodes: 2, ClientsPerCN: 3,
				Mode: ycsb.ModeTCP, Seed: 7,
				TCP: remote.TCPConfig{MemoryNodes: []string{addr}, Token: token,
					DialTimeout: 500 * time.Millisecond, Timeout: 500 * time.Millisecond},
				Progress: func(n int64) {
					// Past the load and a few thousand operations of the
					// next phase, the server goes away.
					if done.Add(n) >= records+4096 {
						once.Do(func() {
							go func() { srv.Close(); close(closed) }()
						})
					}
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			res, err := ycsb.Run(ctx, cfg)
			<-closed
			t.Logf("Run returned after %v and %d operations: %v", time.Since(start), done.Load(), err)
			if err == nil {
				t.Fatalf("Run on a memory node that went away succeeded: %d completed, %d errors", res.Completed, res.Errors)
			}
			if !errors.Is(err, remote.ErrUnavailable) || !strings.Contains(err.Error(), tc.phase+" phase") {
				t.Fatalf("Run: %v, want an error of the %s phase wrapping remote.ErrUnavailable", tc.phase, err)
			}
			if n := done.Load(); n > records+ops/2 {
				t.Errorf("%d operations reported: the phase went on after the node was gone", n)
			}
		})
	}
}

const token = "ycsb-test-token"

// startServer serves an in-process memory node on 127.0.0.1 until the end
// of the test (or an earlier Close).
func startServer(t *testing.T) (*remote.Server, string) {
	t.Helper()
	srv, err := remote.NewServer(remote.ServerConfig{Bytes: 64 << 20, Token: token,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10 s of Close")
		}
	})
	return srv, l.Addr().String()
}
