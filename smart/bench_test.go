package smart

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/remote"
)

// benchKey is the 8-byte key number i of the package's tests.
func benchKey(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15) }

// BenchmarkBattery runs the module's benchmark battery (indextest.Bench) on
// SMART with the paper's design; Sherman's package runs the same battery,
// so benchstat compares the two.
func BenchmarkBattery(b *testing.B) {
	indextest.Bench(b, indextest.Target{
		Name: "smart",
		Open: func(cn *remote.ComputeNode, name string) (index.Index, error) {
			return Open(cn, Options{Name: name})
		},
		Verify:      func(ctx context.Context, idx index.Index) error { return idx.(*Tree).Verify(ctx) },
		MaxKeyLen:   MaxKeyLen,
		MaxValueLen: MaxValueLen,
	})
}
