package index_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

// Every Index of this module keeps Close's contract: a second Close returns
// nil, and the other methods fail with ErrClosed after Close (the contract
// said that later calls of Close return ErrClosed, which neither tree does;
// ycsbtest's index did).
func TestCloseContract(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		open func(*remote.ComputeNode) (index.Index, error)
	}{
		{"smart", func(cn *remote.ComputeNode) (index.Index, error) { return smart.Open(cn, smart.Options{}) }},
		{"sherman", func(cn *remote.ComputeNode) (index.Index, error) { return sherman.Open(cn, sherman.Options{}) }},
		{"ycsbtest", func(cn *remote.ComputeNode) (index.Index, error) {
			return ycsbtest.NewOpener()(cn, ycsb.IndexConfig{Name: "close"})
		}},
	} {
		pool, err := remote.NewPool(remote.Config{NodeBytes: 32 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		ix, err := c.open(pool.NewComputeNode())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		key := []byte("key")
		if err := ix.Put(ctx, key, []byte("value")); err != nil {
			t.Fatalf("%s: Put: %v", c.name, err)
		}
		for i := range 2 {
			if err := ix.Close(); err != nil {
				t.Errorf("%s: Close #%d = %v, want nil", c.name, i+1, err)
			}
		}
		_, _, getErr := ix.Get(ctx, key)
		_, delErr := ix.Delete(ctx, key)
		var scanErr, reverseErr error
		for _, err := range ix.Scan(ctx, nil, nil) {
			scanErr = err
		}
		for _, err := range ix.ReverseScan(ctx, nil, nil) {
			reverseErr = err
		}
		for _, op := range []struct {
			name string
			err  error
		}{
			{"Get", getErr}, {"Put", ix.Put(ctx, key, nil)}, {"Delete", delErr}, {"Scan", scanErr}, {"ReverseScan", reverseErr},
		} {
			if !errors.Is(op.err, index.ErrClosed) {
				t.Errorf("%s: %s after Close = %v, want ErrClosed", c.name, op.name, op.err)
			}
		}
	}
}
