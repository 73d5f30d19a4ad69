package sherman

import (
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// TestOpenLockTableSize opens one tree on two compute nodes with different
// LockTableSize: a page's global lock word depends on it, so compute nodes
// must agree. The tree records it; zero adopts the tree's.
func TestOpenLockTableSize(t *testing.T) {
	region := remote.DefaultOnChipBytes / 8
	tests := []struct {
		name          string
		first, second int
		want          error
		size          int // the second compute node's LockTableSize
	}{
		{"different", 1024, 2048, ErrOptionsMismatch, 0},
		{"default then explicit", 0, 1024, ErrOptionsMismatch, 0},
		{"explicit then default", 1024, 0, nil, 1024},
		{"both default", 0, 0, nil, region},
		{"same", 64, 64, nil, 64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, remote.Config{})
			tr := openTree(t, p, Options{LockTableSize: tc.first})
			if err := tr.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			tr2, err := Open(p.NewComputeNode(), Options{LockTableSize: tc.second})
			if !errors.Is(err, tc.want) {
				t.Fatalf("second Open: %v, want %v", err, tc.want)
			}
			if err != nil {
				if !errors.Is(err, index.ErrOptionsMismatch) {
					t.Fatalf("%v does not wrap index.ErrOptionsMismatch", err)
				}
				return
			}
			if got := tr2.Options().LockTableSize; got != tc.size {
				t.Fatalf("second compute node's LockTableSize %d, want %d", got, tc.size)
			}
			if err := tr2.Put(context.Background(), []byte("k"), []byte("w")); err != nil {
				t.Fatal(err)
			}
			verify(t, tr2)
		})
	}
}

// TestOpenNilComputeNode: Open(nil) is an error, not a panic.
func TestOpenNilComputeNode(t *testing.T) {
	if _, err := Open(nil, Options{}); !errors.Is(err, remote.ErrBadRequest) {
		t.Fatalf("Open(nil) = %v, want remote.ErrBadRequest", err)
	}
}

// TestPoolClosedIsErrClosed: after the pool closes, Sherman's errors
// satisfy errors.Is(err, index.ErrClosed), as SMART's do.
func TestPoolClosedIsErrClosed(t *testing.T) {
	p, err := remote.NewPool(remote.Config{NodeBytes: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(p.NewComputeNode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	ctx := context.Background()
	if err := tr.Put(ctx, []byte("k"), []byte("v")); !errors.Is(err, index.ErrClosed) || !errors.Is(err, remote.ErrClosed) {
		t.Errorf("Put after pool.Close = %v", err)
	}
	if _, _, err := tr.Get(ctx, []byte("k")); !errors.Is(err, index.ErrClosed) {
		t.Errorf("Get after pool.Close = %v", err)
	}
	for _, err := range tr.Scan(ctx, nil, nil) {
		if !errors.Is(err, index.ErrClosed) {
			t.Errorf("Scan after pool.Close = %v", err)
		}
	}
}

// TestOpenPageLargerThanAllocation opens trees whose pages fit NodeBytes
// but not what a memory node can ever give one allocation
// (remote.Pool.MaxAllocBytes): ErrBadOptions at Open, as for pages larger
// than the node, not remote.ErrOutOfMemory at Open or at the first split.
func TestOpenPageLargerThanAllocation(t *testing.T) {
	for _, opts := range []Options{
		{KeySize: MaxKeyLen, ValueSize: MaxValueLen},
		{KeySize: 8, ValueSize: 1024, Span: 16},
	} {
		o, err := opts.normalized()
		if err != nil {
			t.Fatal(err)
		}
		g, err := newGeometry(o)
		if err != nil {
			t.Fatal(err)
		}
		p := newPool(t, remote.Config{NodeBytes: int64(g.pageBytes), ChunkBytes: 4096})
		if int64(g.pageBytes) <= p.MaxAllocBytes() || int64(g.pageBytes) > p.Config().NodeBytes {
			t.Fatalf("pages of %d bytes not in (%d, %d]", g.pageBytes, p.MaxAllocBytes(), p.Config().NodeBytes)
		}
		if _, err := Open(p.NewComputeNode(), opts); !errors.Is(err, ErrBadOptions) {
			t.Errorf("Open(%+v) with pages of %d bytes in memory nodes of %d: %v, want ErrBadOptions",
				opts, g.pageBytes, p.Config().NodeBytes, err)
		}
	}
}

// TestZeroTree: a Tree never made by Open, zero or nil, fails every call
// with ErrClosed and closes without error (a zero Tree reported keys too
// long for its KeySize of 0, and its Scan panicked).
func TestZeroTree(t *testing.T) {
	for name, tr := range map[string]*Tree{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			indextest.RunZeroValue(t, tr)
			_, _ = tr.Stats(), tr.Options()
		})
	}
}
