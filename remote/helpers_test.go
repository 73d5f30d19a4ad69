package remote

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/internal/memnodetest"
)

// transportCase is one way to run a pool.
type transportCase struct {
	name string
	sim  *SimConfig
}

// allTransports runs the same memory behind every transport and ordering:
// in-process (local, sim), shared files (shm) and memnode processes (tcp).
var allTransports = []transportCase{
	{"local", nil},
	{"sim-inorder", &SimConfig{Ordering: InOrder, Seed: 1}},
	{"sim-strict", &SimConfig{Ordering: Strict, Seed: 1}},
	{"shm", nil},
	{"tcp", nil},
}

// pool creates a pool of cfg behind the case's transport, closed at the end
// of the test. For tcp it starts cfg.MemoryNodes memnode processes of
// cfg's sizes.
func (tc transportCase) pool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.NodeBytes == 0 {
		cfg.NodeBytes = 1 << 20
	}
	switch tc.name {
	case "shm":
		cfg.Shm = &ShmConfig{Dir: t.TempDir()}
	case "fabric":
		return fabricPool(t, cfg)
	case "tcp":
		nodes := memnodetest.Start(t, max(cfg.MemoryNodes, 1), memnodetest.Options{Bytes: cfg.NodeBytes, OnChipBytes: int64(cfg.OnChipBytes)})
		cfg.TCP = &TCPConfig{MemoryNodes: memnodetest.Addrs(nodes), Token: memnodetest.Token}
	default:
		cfg.Sim = tc.sim
	}
	return newTestPool(t, cfg)
}

// newTestPool creates a pool closed at the end of the test. NodeBytes
// defaults to 1 MiB: re-zeroing the default 256 MiB per pool would dominate
// the package's test time.
func newTestPool(t testing.TB, cfg Config) *Pool {
	t.Helper()
	if cfg.NodeBytes == 0 {
		cfg.NodeBytes = 1 << 20
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// simConfig returns a copy of sc with the given ordering and seed.
func simConfig(o Ordering, seed uint64) *SimConfig {
	return &SimConfig{Profile: CX6(), Ordering: o, Seed: seed}
}

// pingPong starts two goroutines that take turns rounds times through Wait
// and Signal, each round checked by an FAA on the word at a; the caller
// waits for them with p.Wait.
func pingPong(t *testing.T, p *Pool, ping, pong *Client, a Addr, rounds int) {
	ctx := context.Background()
	p.Go(func() {
		for i := range rounds {
			if _, err := ping.FAA(ctx, a, 1); err != nil {
				t.Error(err)
			}
			pong.Signal()
			if err := ping.Wait(ctx); err != nil {
				t.Errorf("ping round %d: %v", i, err)
				return
			}
		}
	})
	p.Go(func() {
		for i := range rounds {
			if err := pong.Wait(ctx); err != nil {
				t.Errorf("pong round %d: %v", i, err)
				return
			}
			if v, err := pong.FAA(ctx, a, 0); err != nil || v != uint64(i+1) {
				t.Errorf("pong round %d saw %d, %v", i, v, err)
			}
			ping.Signal()
		}
	})
}
