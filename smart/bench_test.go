package smart

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

// reportIO reports the remote I/O per operation between two snapshots.
func reportIO(b *testing.B, before, after remote.Stats, ops int) {
	d := after.Sub(before)
	n := float64(ops)
	b.ReportMetric(float64(d.RoundTrips)/n, "rtt/op")
	b.ReportMetric(float64(d.Verbs())/n, "verbs/op")
	b.ReportMetric(float64(d.ReadBytes)/n, "read-B/op")
	b.ReportMetric(float64(d.WriteBytes)/n, "write-B/op")
}

func benchKey(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15) }

// benchTree returns a tree holding n 8-byte keys with 8-byte values.
func benchTree(b *testing.B, n int, opts Options) (*Tree, *remote.ComputeNode) {
	b.Helper()
	p, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	cn := p.NewComputeNode()
	tr, err := Open(cn, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if err := tr.Put(ctx, benchKey(i), benchKey(i)); err != nil {
			b.Fatal(err)
		}
	}
	return tr, cn
}

const benchKeys = 100000

func BenchmarkGet(b *testing.B) {
	tr, cn := benchTree(b, benchKeys, Options{})
	ctx := context.Background()
	before := cn.Stats()
	i := 0
	for b.Loop() {
		if _, ok, err := tr.Get(ctx, benchKey(i%benchKeys)); !ok || err != nil {
			b.Fatal(ok, err)
		}
		i++
	}
	reportIO(b, before, cn.Stats(), i)
}

func BenchmarkPutExisting(b *testing.B) {
	tr, cn := benchTree(b, benchKeys, Options{})
	ctx := context.Background()
	before := cn.Stats()
	i := 0
	for b.Loop() {
		if err := tr.Put(ctx, benchKey(i%benchKeys), benchKey(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportIO(b, before, cn.Stats(), i)
}

func BenchmarkPutNew(b *testing.B) {
	tr, cn := benchTree(b, benchKeys, Options{})
	ctx := context.Background()
	before := cn.Stats()
	i := 0
	for b.Loop() {
		if err := tr.Put(ctx, benchKey(benchKeys+i), benchKey(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	reportIO(b, before, cn.Stats(), i)
}

func BenchmarkDelete(b *testing.B) {
	tr, cn := benchTree(b, benchKeys, Options{})
	ctx := context.Background()
	before := cn.Stats()
	i := 0
	for b.Loop() {
		k := benchKey(i % benchKeys)
		if i >= benchKeys {
			// Keep the tree populated: put back what an earlier pass deleted.
			b.StopTimer()
			if err := tr.Put(ctx, k, k); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if found, err := tr.Delete(ctx, k); !found || err != nil {
			b.Fatal(found, err)
		}
		i++
	}
	b.StopTimer()
	if i <= benchKeys {
		reportIO(b, before, cn.Stats(), i)
	}
}

func BenchmarkScan100(b *testing.B) {
	tr, cn := benchTree(b, benchKeys, Options{})
	ctx := context.Background()
	before := cn.Stats()
	i := 0
	for b.Loop() {
		n := 0
		for _, err := range tr.Scan(ctx, benchKey(i%benchKeys), nil) {
			if err != nil {
				b.Fatal(err)
			}
			if n++; n == 100 {
				break
			}
		}
		i++
	}
	reportIO(b, before, cn.Stats(), i)
}
