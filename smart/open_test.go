package smart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// TestOpenOptionsMismatch opens one tree on two compute nodes with
// different options: only the protocol variant (LockedInternal, Reclaim) must agree,
// every other option is the compute node's own business.
func TestOpenOptionsMismatch(t *testing.T) {
	tests := []struct {
		name          string
		first, second Options
		want          error
	}{
		{"lock-free then locked", Options{}, Options{LockedInternal: true}, ErrOptionsMismatch},
		{"locked then lock-free", Options{LockedInternal: true}, Options{}, ErrOptionsMismatch},
		{"reclaim then not", Options{Reclaim: true}, Options{}, ErrOptionsMismatch},
		{"not then reclaim", Options{}, Options{Reclaim: true}, ErrOptionsMismatch},
		{"reclaim with other intervals", Options{Reclaim: true}, Options{Reclaim: true, ReclaimInterval: time.Millisecond}, nil},
		{"locked twice", Options{LockedInternal: true}, Options{LockedInternal: true}, nil},
		{"local switches", Options{}, Options{OutOfPlaceLeaves: true, Release: ReleaseRoundTrip, NoReadDelegation: true,
			NoWriteCombining: true, HashCache: true, CacheBytes: -1, RetryBudget: 3}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, p := newTree(t, remote.Config{}, tc.first)
			ctx := context.Background()
			if err := tr.Put(ctx, []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			tr2, err := Open(p.NewComputeNode(), tc.second)
			if !errors.Is(err, tc.want) {
				t.Fatalf("second Open: %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			if v, ok, err := tr2.Get(ctx, []byte("k")); err != nil || !ok || string(v) != "v" {
				t.Fatalf("Get on the second compute node: %q, %v, %v", v, ok, err)
			}
		})
	}
}

// TestOpenNilComputeNode: Open(nil) is an error, not a panic.
func TestOpenNilComputeNode(t *testing.T) {
	if _, err := Open(nil, Options{}); !errors.Is(err, remote.ErrBadRequest) {
		t.Fatalf("Open(nil) = %v, want remote.ErrBadRequest", err)
	}
}

// TestOpenBadOptions: Open refuses options out of their range with
// remote.ErrBadRequest (a negative RetryBudget among them, as Sherman
// refuses one, instead of taking it for the default; a Lease that does not
// exceed the ReclaimInterval, which the registry refused without naming
// either option), in a message of its own size (a name far too long is not
// echoed), and accepts the values at their edges.
func TestOpenBadOptions(t *testing.T) {
	p, err := remote.NewPool(remote.Config{NodeBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"negative RetryBudget", Options{RetryBudget: -1}, false},
		{"very negative RetryBudget", Options{RetryBudget: -1 << 40}, false},
		{"default RetryBudget", Options{RetryBudget: 0}, true},
		{"RetryBudget 1", Options{RetryBudget: 1}, true},
		{"negative Lease", Options{Lease: -time.Millisecond}, false},
		{"ReclaimInterval below the least", Options{Reclaim: true, ReclaimInterval: MinReclaimInterval / 2}, false},
		{"negative ReclaimInterval", Options{ReclaimInterval: -time.Millisecond}, false},
		{"unknown Release", Options{Release: ReleaseRoundTrip + 1}, false},
		{"Lease at ReclaimInterval", Options{Reclaim: true, ReclaimInterval: 5 * time.Millisecond, Lease: 5 * time.Millisecond}, false},
		{"Lease below the default ReclaimInterval", Options{Reclaim: true, Lease: time.Millisecond}, false},
		{"Lease above ReclaimInterval", Options{Reclaim: true, ReclaimInterval: time.Millisecond, Lease: 2 * time.Millisecond}, true},
		{"short Lease without Reclaim", Options{Lease: time.Millisecond}, true},
		{"Name too long", Options{Name: strings.Repeat("n", remote.MaxNameBytes-len(regionPrefix)+1)}, false},
		{"Name far too long", Options{Name: strings.Repeat("n", 10000)}, false},
		{"longest Name", Options{Name: strings.Repeat("n", remote.MaxNameBytes-len(regionPrefix))}, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Name == "" {
				tc.opts.Name = fmt.Sprint("bad-options-", i)
			}
			tr, err := Open(p.NewComputeNode(), tc.opts)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Open(%+v): %v", tc.opts, err)
			case tc.ok:
				if got := tr.retryBudget; got <= 0 {
					t.Errorf("Open(%+v): retry budget %d", tc.opts, got)
				}
				tr.Close()
			case !errors.Is(err, remote.ErrBadRequest):
				if err == nil {
					tr.Close()
				}
				t.Fatalf("Open(%.200v) = %v, want remote.ErrBadRequest", tc.opts, err)
			case len(err.Error()) > 200:
				t.Fatalf("Open(%.200v): an error of %d bytes: %.200s…", tc.opts, len(err.Error()), err)
			}
		})
	}
}

// TestOpenOldFormat: a tree created by an earlier format (SMARTv1: 64-byte
// leaf classes; SMARTv2: the leaf checksum after the meta word; SMARTv3:
// 16-byte leaf classes and a checksum word; SMARTv4: no NODE_2, which its
// readers refuse; SMARTv5: a NODE_8 grows to NODE_16, where the movers and
// readers of SMARTv6 take it to a NODE_32) is refused
// with a clear error (ErrCorrupt naming the format), and its region is left
// as it was.
func TestOpenOldFormat(t *testing.T) {
	for _, old := range []struct {
		name  string
		magic uint64
	}{{"SMARTv1", formatMagicV1}, {"SMARTv2", formatMagicV2}, {"SMARTv3", formatMagicV3}, {"SMARTv4", formatMagicV4}, {"SMARTv5", formatMagicV5}} {
		t.Run(old.name, func(t *testing.T) {
			ctx := context.Background()
			p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c := p.NewComputeNode().NewClient()
			region, err := c.Named(ctx, "smart/smart", regionBytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Write(ctx, region.Add(8), putWord(nil, old.magic)); err != nil {
				t.Fatal(err)
			}
			_, err = Open(p.NewComputeNode(), Options{})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), old.name) {
				t.Fatalf("Open of a %s tree: %v, want ErrCorrupt naming the format", old.name, err)
			}
			buf := make([]byte, 16)
			if err := c.Read(ctx, region, buf); err != nil {
				t.Fatal(err)
			}
			if binary.LittleEndian.Uint64(buf) != 0 || binary.LittleEndian.Uint64(buf[8:]) != old.magic {
				t.Fatalf("the refused region changed: %x", buf)
			}
		})
	}
}

// TestZeroTree: a Tree never made by Open, zero or nil, fails every call
// with ErrClosed and closes without error (a zero Tree's Put reported a
// value too large for its 0-byte memory nodes, and its Get panicked).
func TestZeroTree(t *testing.T) {
	for name, tr := range map[string]*Tree{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			indextest.RunZeroValue(t, tr)
			if _, err := tr.Compact(t.Context(), nil, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Compact: %v, want ErrClosed", err)
			}
			_, _, _ = tr.Stats(), tr.Name(), tr.String()
		})
	}
}
