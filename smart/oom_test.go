package smart

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// fillTree exhausts the memory of p and of tr's sessions: every memory
// node is filled by another client, then 1-byte keys (each a 40-byte leaf in
// the root) are inserted until the session's chunks are used up too.
func fillTree(t testing.TB, p *remote.Pool, tr *Tree) {
	t.Helper()
	for mn := range p.MemoryNodes() {
		fillNode(t, p, mn)
	}
	failed := false
	for b := 2; b < 256; b++ {
		err := tr.Put(context.Background(), []byte{byte(b)}, nil)
		if errors.Is(err, remote.ErrOutOfMemory) {
			failed = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !failed {
		t.Fatal("the pool never ran out of memory")
	}
}

// TestUpdateOutOfMemory updates a key whose new leaf cannot be allocated:
// the update must fail with remote.ErrOutOfMemory (or ErrValueTooLarge if
// the leaf is larger than a memory node) and leave the old value, instead
// of retrying forever. The deadline turns such a spin into a failure.
func TestUpdateOutOfMemory(t *testing.T) {
	small := []byte("old value")
	tests := []struct {
		name  string
		opts  Options
		value []byte
		want  error
	}{
		{"outgrows its leaf", Options{}, make([]byte, 8000), remote.ErrOutOfMemory},
		{"out-of-place leaves", Options{OutOfPlaceLeaves: true}, []byte("new value"), remote.ErrOutOfMemory},
		{"locked internal", Options{LockedInternal: true}, make([]byte, 8000), remote.ErrOutOfMemory},
		{"leaf larger than a memory node", Options{}, make([]byte, MaxValueLen), ErrValueTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, p := newTree(t, remote.Config{NodeBytes: 64 << 10, ChunkBytes: 4096}, tc.opts)
			k := []byte("key")
			if err := tr.Put(context.Background(), k, small); err != nil {
				t.Fatal(err)
			}
			fillTree(t, p, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.Put(ctx, k, tc.value); !errors.Is(err, tc.want) {
				t.Fatalf("Put of %d bytes: %v, want %v", len(tc.value), err, tc.want)
			}
			if v, ok, err := tr.Get(ctx, k); err != nil || !ok || !bytes.Equal(v, small) {
				t.Fatalf("after the failed Put: Get = %q, %v, %v", v, ok, err)
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.opts.OutOfPlaceLeaves {
				// The leaf was unlocked: an update in place still works.
				if err := tr.Put(ctx, k, []byte("in place")); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestNewKeyLargerThanMemoryNode inserts a key whose leaf cannot fit any
// memory node: ErrValueTooLarge, not a bare remote.ErrBadRequest.
func TestNewKeyLargerThanMemoryNode(t *testing.T) {
	tr, _ := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 64 << 10}, Options{})
	ctx := context.Background()
	k := []byte("new")
	if err := tr.Put(ctx, k, make([]byte, MaxValueLen)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("Put of a %d-byte value into 64 KiB memory nodes: %v, want ErrValueTooLarge", MaxValueLen, err)
	}
	if _, ok, err := tr.Get(ctx, k); ok || err != nil {
		t.Fatalf("Get after the failed Put: %v, %v", ok, err)
	}
	if err := tr.Put(ctx, k, make([]byte, 30000)); err != nil {
		t.Fatal(err)
	}
}

// TestLeafLargerThanAllocation puts values whose leaf fits NodeBytes but
// not what a memory node can ever give one allocation (NodeBytes less the
// bytes the node reserves, remote.Pool.MaxAllocBytes): ErrValueTooLarge at
// once, without a verb, not remote.ErrOutOfMemory after a failed
// allocation; the old value stays and smaller leaves still go in.
func TestLeafLargerThanAllocation(t *testing.T) {
	ctx := context.Background()
	key := []byte("key")
	leaf := func(value int) int64 { return int64(classBytes(leafFormat{}.classOf(key, make([]byte, value)))) }
	tests := []struct {
		name      string
		nodeBytes int64
		value     int // leaf in (MaxAllocBytes, NodeBytes]
		fits      int // a value whose leaf fits
	}{
		{"64 KiB nodes", 64 << 10, 62000, 20000},
		{"a node of the largest leaf", 73728, MaxValueLen, 30000},
		{"a node of the largest leaf, rounded", 73728 + 8, MaxValueLen, 30000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: tc.nodeBytes}, Options{})
			if n := leaf(tc.value); n <= p.MaxAllocBytes() || n > p.Config().NodeBytes {
				t.Fatalf("a leaf of %d bytes is not in (%d, %d]", n, p.MaxAllocBytes(), p.Config().NodeBytes)
			}
			small := []byte("old value")
			if err := tr.Put(ctx, key, small); err != nil {
				t.Fatal(err)
			}
			before := p.Stats()
			if err := tr.Put(ctx, key, make([]byte, tc.value)); !errors.Is(err, ErrValueTooLarge) {
				t.Fatalf("Put of a %d-byte value (a %d-byte leaf, nodes of %d bytes): %v, want ErrValueTooLarge",
					tc.value, leaf(tc.value), tc.nodeBytes, err)
			}
			if err := tr.Put(ctx, []byte("new"), make([]byte, tc.value)); !errors.Is(err, ErrValueTooLarge) {
				t.Fatalf("insert of a %d-byte value: %v, want ErrValueTooLarge", tc.value, err)
			}
			if after := p.Stats(); after != before {
				t.Errorf("the refused Puts reached the memory nodes:\n%v\n%v", after, before)
			}
			if v, ok, err := tr.Get(ctx, key); err != nil || !ok || !bytes.Equal(v, small) {
				t.Fatalf("after the refused Put: Get = %q, %v, %v", v, ok, err)
			}
			if _, ok, err := tr.Get(ctx, []byte("new")); ok || err != nil {
				t.Fatalf("the refused insert: Get = %v, %v", ok, err)
			}
			if err := tr.Put(ctx, key, make([]byte, tc.fits)); err != nil {
				t.Fatalf("Put of a %d-byte value: %v", tc.fits, err)
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCombinedWritersOutOfMemory has the clients of one compute node update
// one key at once while memory is exhausted: writes combined into one
// leader's window must all fail with the leader's error, not hang with it.
func TestCombinedWritersOutOfMemory(t *testing.T) {
	p, err := remote.NewPool(remote.Config{NodeBytes: 64 << 10, ChunkBytes: 4096, Sim: &remote.SimConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := Open(p.NewComputeNode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, small := []byte("key"), []byte("old value")
	if err := tr.Put(context.Background(), k, small); err != nil {
		t.Fatal(err)
	}
	fillTree(t, p, tr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const writers = 8
	errs := make([]error, writers)
	for i := range writers {
		p.Go(func() { errs[i] = tr.Put(ctx, k, bytes.Repeat([]byte{byte(i)}, 8000)) })
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, remote.ErrOutOfMemory) {
			t.Errorf("writer %d: %v, want ErrOutOfMemory", i, err)
		}
	}
	if st := tr.rd.Stats(); st.Combined == 0 {
		t.Fatalf("no write was combined (%+v): the test does not test combining", st)
	}
	if v, ok, err := tr.Get(ctx, k); err != nil || !ok || !bytes.Equal(v, small) {
		t.Fatalf("after the failed Puts: Get = %q, %v, %v", v, ok, err)
	}
}
