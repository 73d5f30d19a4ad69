package indextest

import (
	"context"
	"errors"
	"testing"

	"github.com/dmindex/dmindex/index"
)

// RunZeroValue checks an index that was never opened (the zero value of
// its type, or a nil pointer to it): every call returns an error wrapping
// index.ErrClosed (the calls of index.LimitScanner, index.Recoverer and a
// Verify method too, where idx has them), a scan yields that error once,
// and Close returns nil; nothing panics.
func RunZeroValue(t *testing.T, idx index.Index) {
	ctx := context.Background()
	calls := map[string]func() error{
		"Put":         func() error { return idx.Put(ctx, []byte("k"), []byte("v")) },
		"Get":         func() error { _, _, err := idx.Get(ctx, []byte("k")); return err },
		"Delete":      func() error { _, err := idx.Delete(ctx, []byte("k")); return err },
		"Scan":        func() error { return firstErr(idx.Scan(ctx, nil, nil)) },
		"ReverseScan": func() error { return firstErr(idx.ReverseScan(ctx, []byte("a"), []byte("z"))) },
	}
	if ls, ok := idx.(index.LimitScanner); ok {
		calls["ScanLimit"] = func() error { return firstErr(ls.ScanLimit(ctx, nil, nil, 3)) }
		calls["ReverseScanLimit"] = func() error { return firstErr(ls.ReverseScanLimit(ctx, nil, nil, 3)) }
	}
	if r, ok := idx.(index.Recoverer); ok {
		calls["Recover"] = func() error { _, err := r.Recover(ctx); return err }
	}
	if v, ok := idx.(interface{ Verify(context.Context) error }); ok {
		calls["Verify"] = func() error { return v.Verify(ctx) }
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, index.ErrClosed) {
				t.Errorf("%s on an index never opened: %v, want index.ErrClosed", name, err)
			}
		})
	}
	if err := idx.Close(); err != nil {
		t.Errorf("Close of an index never opened: %v", err)
	}
}

// firstErr ranges over seq and returns the error it yields; it reports
// pairs or more than one error as errors of their own.
func firstErr(seq func(yield func(index.KV, error) bool)) error {
	var first error
	n := 0
	for _, err := range seq {
		n++
		if first == nil {
			first = err
		}
	}
	if n != 1 {
		return errors.New("the scan yielded other than one error")
	}
	return first
}
