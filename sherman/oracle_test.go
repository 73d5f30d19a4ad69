package sherman

import (
	"context"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
)

func collect(t testing.TB, tr index.Index, lo, hi []byte, limit int) []index.KV {
	t.Helper()
	var out []index.KV
	for kv, err := range tr.Scan(context.Background(), lo, hi) {
		if err != nil {
			t.Fatalf("scan [%x, %x): %v", lo, hi, err)
		}
		if len(out) == limit {
			break
		}
		out = append(out, kv)
	}
	return out
}

// TestOracle runs the battery's oracle workload (indextest.RunOracle:
// random operations from several compute nodes checked against an ordered
// model, Verify along the way) under Sherman's own geometries: tiny spans
// with short keys, upstream's 1 KiB pages, a tiny cache, and no cache with
// no hand-over and a small lock table.
func TestOracle(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"span4", Options{Span: 4, KeySize: 8, ValueSize: 8}},
		{"page1k-key32", Options{PageBytes: 1024, KeySize: 32, ValueSize: 16}},
		{"tinycache", Options{Span: 6, KeySize: 16, ValueSize: 16, CacheBytes: 3000}},
		{"nocache", Options{Span: 5, KeySize: 16, ValueSize: 16, CacheBytes: -1, HandOver: 1, LockTableSize: 64}},
	} {
		t.Run(c.name, func(t *testing.T) { indextest.RunOracle(t, contractTarget("sherman-"+c.name, c.opts)) })
	}
}
