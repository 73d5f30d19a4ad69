package sherman

import (
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
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
				if !errors.Is(err, smart.ErrOptionsMismatch) {
					t.Fatalf("%v does not wrap smart.ErrOptionsMismatch", err)
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
