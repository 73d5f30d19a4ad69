package ycsb_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
)

// limited is a footprint of an index storing keys up to 16 bytes and
// values up to 100 bytes, 100 bytes per record.
func limited(ycsb.IndexConfig) ycsb.Footprint {
	return ycsb.Footprint{MaxKeyLen: 16, MaxValueLen: 100, RecordBytes: 100}
}

func TestValidateRejects(t *testing.T) {
	long := []ycsb.Op{{Kind: ycsb.OpInsert, Key: make([]byte, 17)}}
	key0 := ycsb.KeyInt.AppendKey(nil, 0)
	for _, c := range []struct {
		name   string
		edit   func(*ycsb.Config)
		want   error
		phrase string // the error names the estimate, the limit or the cause
	}{
		{"value above the index's limit", func(c *ycsb.Config) { c.Footprint, c.ValueSize = limited, 101 },
			index.ErrValueTooLarge, "values of 101 bytes, mem stores at most 100"},
		{"trace key above the index's limit", func(c *ycsb.Config) { c.Footprint, c.LoadTrace, c.RunTrace = limited, long, long },
			index.ErrKeyTooLong, "keys of 17 bytes, mem stores at most 16"},
		{"records beyond the memory limit", func(c *ycsb.Config) { c.Records, c.NodeBytes, c.MemoryLimit = 10_000_000, 0, 64<<20 },
			ycsb.ErrTooLarge, "more than the 64.0 MiB of available memory (the run's MemoryLimit)"},
		{"memory nodes beyond the memory limit", func(c *ycsb.Config) { c.MemoryLimit = 100 << 20 },
			ycsb.ErrTooLarge, "memory nodes of 2 × 64.0 MiB = 128.0 MiB exceed the 100.0 MiB of physical memory"},
		{"huge values of an index without a footprint", func(c *ycsb.Config) { c.ValueSize, c.MemoryLimit = 1<<40, 1<<40 },
			ycsb.ErrTooLarge, "6 clients × 4.0 TiB"},
		{"many clients", func(c *ycsb.Config) { c.ComputeNodes, c.ClientsPerCN, c.MemoryLimit = 1000, 1000, 1<<34 },
			ycsb.ErrTooLarge, "1000 compute nodes × 3.5 MiB, 1000000 clients × 20.0 KiB"},
		{"records beyond the memory nodes", func(c *ycsb.Config) { c.Footprint, c.Records = limited, 2_000_000 },
			remote.ErrOutOfMemory, "need about 190.7 MiB on the memory nodes, more than their 2 × 64.0 MiB"},
		{"too many operations", func(c *ycsb.Config) { c.Ops, c.MaxRuntime = 10_000_000, time.Second },
			ycsb.ErrTooLong, "its 10006000 operations take at least"}, // load, warm-up (2 CNs) and run
		{"more operations than a day allows", func(c *ycsb.Config) { c.Ops = 100_000_000_000 },
			ycsb.ErrTooLong, "more than the limit of 24h0m0s"},
		{"NaN weight", func(c *ycsb.Config) { c.Workload.Read = math.NaN() },
			ycsb.ErrInvalid, `workload "a": proportions must be finite (read NaN, update 0.5`},
		{"infinite weight", func(c *ycsb.Config) { c.Workload.Update = math.Inf(1) },
			ycsb.ErrInvalid, `workload "a": proportions must be finite`},
		{"NaN Zipfian constant", func(c *ycsb.Config) { c.Workload.ZipfTheta = math.NaN() },
			ycsb.ErrInvalid, `workload "a": Zipfian constant NaN`},
		{"negative weight", func(c *ycsb.Config) { c.Workload.Read = -1 },
			ycsb.ErrInvalid, `workload "a": proportions must be non-negative`},
		{"negative compute nodes", func(c *ycsb.Config) { c.ComputeNodes = -1 },
			ycsb.ErrInvalid, "negative node or client count: MemoryNodes 2, ComputeNodes -1, ClientsPerCN 3"},
		{"negative clients", func(c *ycsb.Config) { c.ClientsPerCN = -3 }, ycsb.ErrInvalid, "ClientsPerCN -3"},
		{"negative memory nodes", func(c *ycsb.Config) { c.MemoryNodes = -2 }, ycsb.ErrInvalid, "MemoryNodes -2"},
		{"more memory nodes than a pool addresses", func(c *ycsb.Config) { c.MemoryNodes, c.NodeBytes = remote.MaxMemoryNodes+1, 0 },
			ycsb.ErrInvalid, "65537 memory nodes, more than a pool addresses (65536)"},
		{"more memory nodes than the index addresses", func(c *ycsb.Config) {
			c.MemoryNodes, c.Footprint = 3, func(ycsb.IndexConfig) ycsb.Footprint { return ycsb.Footprint{MaxMemoryNodes: 2} }
		}, ycsb.ErrInvalid, "3 memory nodes, mem addresses at most 2"},
		{"larger memory nodes than the index addresses", func(c *ycsb.Config) {
			c.Footprint = func(ycsb.IndexConfig) ycsb.Footprint { return ycsb.Footprint{MaxNodeBytes: 32 << 20} }
		}, ycsb.ErrInvalid, "memory nodes of 64.0 MiB, mem addresses at most 32.0 MiB each"},
		{"memnode servers other than MemoryNodes", func(c *ycsb.Config) {
			c.Mode, c.TCP = ycsb.ModeTCP, remote.TCPConfig{MemoryNodes: []string{"127.0.0.1:1"}}
		}, ycsb.ErrInvalid, "MemoryNodes 2, but mode tcp lists 1 memory nodes"},
		{"records beyond the memnode servers", func(c *ycsb.Config) {
			c.Mode, c.MemoryNodes, c.TCP = ycsb.ModeTCP, 0, remote.TCPConfig{MemoryNodes: []string{"127.0.0.1:1"}}
			c.Footprint, c.Records = limited, 2_000_000
		}, remote.ErrOutOfMemory, "more than their 1 × 64.0 MiB"},
		{"empty run trace", func(c *ycsb.Config) { c.RunTrace = []ycsb.Op{} }, ycsb.ErrInvalid, "the run trace has no operations"},
		// Validate accepted it and Run refused it (NewGenerator's check).
		{"a workload that reads, without records", func(c *ycsb.Config) { c.Records = 0 },
			ycsb.ErrInvalid, `workload "a" reads existing records but records is 0`},
		// An unknown kind panicked in a client (the process died).
		{"unknown operation in the run trace", func(c *ycsb.Config) {
			c.RunTrace = []ycsb.Op{{Kind: ycsb.OpRead, Key: key0}, {Kind: ycsb.OpKind(9), Key: key0}}
		}, ycsb.ErrInvalid, "ycsb: RunTrace[1]: unknown operation kind OpKind(9)"},
		{"unknown operation in the load trace", func(c *ycsb.Config) {
			c.LoadTrace, c.RunTrace = []ycsb.Op{{Kind: ycsb.OpReadModifyWrite + 1, Key: key0}}, []ycsb.Op{{Kind: ycsb.OpRead, Key: key0}}
		}, ycsb.ErrInvalid, "ycsb: LoadTrace[0]: unknown operation kind OpKind(5)"},
		// A length of 0 or less scanned the whole index (index.ScanLimit's
		// "no bound").
		{"scan of length 0 in the run trace", func(c *ycsb.Config) {
			c.RunTrace = []ycsb.Op{{Kind: ycsb.OpScan, Key: key0, ScanLength: 1}, {Kind: ycsb.OpScan, Key: key0}}
		}, ycsb.ErrInvalid, "ycsb: RunTrace[1]: SCAN of length 0, want at least 1 pair"},
		{"scan of negative length in the load trace", func(c *ycsb.Config) {
			c.LoadTrace = []ycsb.Op{{Kind: ycsb.OpInsert, Key: key0}, {Kind: ycsb.OpScan, Key: key0, ScanLength: -1}}
			c.RunTrace = []ycsb.Op{{Kind: ycsb.OpRead, Key: key0}}
		}, ycsb.ErrInvalid, "ycsb: LoadTrace[1]: SCAN of length -1, want at least 1 pair"},
	} {
		cfg := config(t, "a", ycsb.ModeSim)
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(fmtErr(err), c.phrase) {
			t.Errorf("%s: Validate = %v, want %v naming %q", c.name, err, c.want, c.phrase)
		}
		// A refusal of the Config itself wraps ErrInvalid (index limits
		// too); a run that does not fit does not.
		fits := errors.Is(err, ycsb.ErrTooLarge) || errors.Is(err, ycsb.ErrTooLong) || errors.Is(err, remote.ErrOutOfMemory)
		if errors.Is(err, ycsb.ErrInvalid) == fits {
			t.Errorf("%s: Validate = %v: wraps ErrInvalid %v, a run that does not fit %v", c.name, err, !fits, fits)
		}
		if _, runErr := ycsb.Run(context.Background(), cfg); fmtErr(runErr) != fmtErr(err) {
			t.Errorf("%s: Run = %v, Validate = %v", c.name, runErr, err)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestValidateAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*ycsb.Config)
	}{
		{"the test config", func(*ycsb.Config) {}},
		{"within the index's limits", func(c *ycsb.Config) { c.Footprint, c.ValueSize = limited, 100 }},
		{"memory checks disabled", func(c *ycsb.Config) { c.Records, c.NodeBytes, c.MemoryLimit, c.MaxRuntime = 1<<40, 0, -1, -1 }},
		{"runtime check disabled", func(c *ycsb.Config) { c.Ops, c.MaxRuntime = 1<<40, -1 }},
		{"memory nodes sized for the run", func(c *ycsb.Config) { c.Footprint, c.Records, c.NodeBytes = limited, 1_000_000, 0 }},
		// MemoryNodes 0 is as many as the memnode servers listed, whose
		// NodeBytes may be given (it must match theirs); their memory is on
		// their hosts, not this machine.
		{"memnode servers of a given size", func(c *ycsb.Config) {
			c.Mode, c.MemoryNodes, c.TCP = ycsb.ModeTCP, 0, remote.TCPConfig{MemoryNodes: []string{"127.0.0.1:1"}}
			c.NodeBytes, c.Records, c.Ops = 256<<20, 200, 500
		}},
		{"memnode servers as many as listed", func(c *ycsb.Config) {
			c.Mode, c.MemoryNodes, c.TCP = ycsb.ModeFabric, 2, remote.TCPConfig{}
			c.Fabric = remote.FabricConfig{MemoryNodes: []string{"127.0.0.1:1", "127.0.0.1:2"}}
		}},
		{"memnode servers larger than this machine", func(c *ycsb.Config) {
			c.Mode, c.MemoryNodes, c.TCP = ycsb.ModeTCP, 0, remote.TCPConfig{MemoryNodes: []string{"127.0.0.1:1"}}
			c.NodeBytes, c.MemoryLimit = 1<<40, 1<<30
		}},
		{"the index's largest pool", func(c *ycsb.Config) {
			c.Footprint = func(ycsb.IndexConfig) ycsb.Footprint {
				return ycsb.Footprint{MaxMemoryNodes: 2, MaxNodeBytes: 64 << 20}
			}
		}},
	} {
		cfg := config(t, "a", ycsb.ModeSim)
		c.edit(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// Run rejects a run that does not fit before it allocates the pool or opens
// an index.
func TestRunRejectsBeforeAllocating(t *testing.T) {
	cfg := config(t, "a", ycsb.ModeSim)
	cfg.Records, cfg.NodeBytes, cfg.ValueSize = 10_000_000_000, 0, 1<<20
	opened := false
	cfg.Open = func(*remote.ComputeNode, ycsb.IndexConfig) (index.Index, error) {
		opened = true
		return nil, errors.New("unreachable")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ycsb.Run(context.Background(), cfg)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ycsb.ErrTooLarge) || opened {
		t.Fatalf("Run = %v (opened an index: %v), want ErrTooLarge before opening", err, opened)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("Run allocated %d bytes before rejecting the run", d)
	}
}

func TestEstimate(t *testing.T) {
	base := config(t, "d", ycsb.ModeSim) // 5% inserts
	base.Footprint = func(ycsb.IndexConfig) ycsb.Footprint {
		return ycsb.Footprint{RecordBytes: 100, CacheBytes: 1 << 20, CacheBytesPerRecord: 1000, ComputeNodeBytes: 5000, ClientBytes: 300}
	}
	est := estimate(t, base)
	if want := base.Records + (base.Ops+ycsb.DefaultWarmup(base.Records, base.ComputeNodes))/20; est.Records != want {
		t.Errorf("Records = %d, want %d loaded and inserted (warm-up included)", est.Records, want)
	}
	if want := est.Records * 100; est.RemoteBytes != want {
		t.Errorf("RemoteBytes = %d, want %d", est.RemoteBytes, want)
	}
	// The cache (1 MiB budget < records × 1000 B) and the index's state
	// count per compute node, the client's state per client, all with the
	// collector's headroom: doubling nodes and clients adds exactly their
	// shares (with no warm-up, whose default grows with the compute nodes).
	base.WarmupOps = -1
	est = estimate(t, base)
	more := base
	more.ComputeNodes, more.ClientsPerCN = 2*base.ComputeNodes, 2*base.ClientsPerCN
	est2 := estimate(t, more)
	cns, clients := int64(base.ComputeNodes), int64(base.ComputeNodes*base.ClientsPerCN)
	if got, want := est2.Bytes-est.Bytes, cns*est.ComputeNodeBytes+3*clients*est.ClientBytes; got != want {
		t.Errorf("doubling nodes and clients added %d bytes, want %d", got, want)
	}
	if est.ComputeNodeBytes < 2*(1<<20+5000) || est.ClientBytes < 2*(300+2*8) {
		t.Errorf("compute node %d B, client %d B: less than twice the footprint's", est.ComputeNodeBytes, est.ClientBytes)
	}
	local := base
	local.Mode = ycsb.ModeLocal
	if e := estimate(t, local); e.MinRuntime > est.MinRuntime || est.MinRuntime <= 0 {
		t.Errorf("MinRuntime: sim %v, local %v: want local (parallel) at most sim's, both positive", est.MinRuntime, e.MinRuntime)
	}
	huge := base
	huge.Records, huge.Ops, huge.ValueSize, huge.ClientsPerCN = math.MaxInt64, math.MaxInt64, math.MaxInt, math.MaxInt32
	if e := estimate(t, huge); e.Bytes != math.MaxInt64 || e.MinRuntime != math.MaxInt64 {
		t.Errorf("absurd inputs: %+v, want saturated figures", e)
	}
}

func estimate(t *testing.T, cfg ycsb.Config) ycsb.Estimate {
	t.Helper()
	est, err := cfg.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	return est
}

// The estimate of a run too long is printed rounded up for its size, never
// at or below the limit it exceeds (it was rounded to minutes: "at least 0s
// ..., more than the limit of 1ms").
func TestRuntimeRounded(t *testing.T) {
	cfg := config(t, "a", ycsb.ModeSim)
	cfg.Records, cfg.Ops, cfg.MaxRuntime = 100_000, 100_000, time.Millisecond
	want := "its 400000 operations take at least 400ms at 1000000 operations/s, more than the limit of 1ms"
	if err := cfg.Validate(); !errors.Is(err, ycsb.ErrTooLong) || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate = %v, want ErrTooLong naming %q", err, want)
	}
	for _, c := range []struct{ d, want time.Duration }{
		{0, 0},
		{999, 999},
		{1001, 1010},
		{400 * time.Millisecond, 400 * time.Millisecond},
		{400*time.Millisecond + 1, 401 * time.Millisecond},
		{1234567 * time.Microsecond, 1240 * time.Millisecond},
		{59999 * time.Millisecond, time.Minute},
		{61500 * time.Millisecond, 62 * time.Second},
		{27*time.Hour + 46*time.Minute + 40*time.Second, 27*time.Hour + 47*time.Minute},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := ycsb.RoundRuntime(c.d); got != c.want {
			t.Errorf("RoundRuntime(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}
