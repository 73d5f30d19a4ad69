package sherman

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/btree"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// oracle is the ordered model the randomized tests compare against.
type oracle struct{ t *btree.BTreeG[smart.KV] }

func newOracle() *oracle {
	return &oracle{btree.NewG(8, func(a, b smart.KV) bool { return bytes.Compare(a.Key, b.Key) < 0 })}
}

func (o *oracle) get(k []byte) ([]byte, bool) {
	kv, ok := o.t.Get(smart.KV{Key: k})
	return kv.Value, ok
}

func (o *oracle) put(k, v []byte) {
	o.t.ReplaceOrInsert(smart.KV{Key: bytes.Clone(k), Value: bytes.Clone(v)})
}

func (o *oracle) del(k []byte) bool { _, ok := o.t.Delete(smart.KV{Key: k}); return ok }

// scan returns up to limit pairs of [lo, hi) (nil hi: unbounded).
func (o *oracle) scan(lo, hi []byte, limit int) []smart.KV {
	var out []smart.KV
	o.t.AscendGreaterOrEqual(smart.KV{Key: lo}, func(kv smart.KV) bool {
		if hi != nil && bytes.Compare(kv.Key, hi) >= 0 || len(out) == limit {
			return false
		}
		out = append(out, kv)
		return true
	})
	return out
}

// keyGen draws keys that share prefixes and differ in length, so that
// zero-padding bugs and prefix ordering show up.
func keyGen(r *rand.Rand, keySize int, space int) []byte {
	if r.IntN(2) == 0 {
		k := ikey(uint64(r.IntN(space)))
		return k[max(0, 8-keySize):]
	}
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	k := make([]byte, 1+r.IntN(min(keySize, 6)))
	for i := range k {
		k[i] = alphabet[r.IntN(len(alphabet))]
	}
	return k
}

func collect(t testing.TB, tr smart.Index, lo, hi []byte, limit int) []smart.KV {
	t.Helper()
	var out []smart.KV
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

// TestOracle runs random operations through several compute nodes sharing
// one tree and compares every result with an ordered model, verifying the
// remote tree along the way.
func TestOracle(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		ops  int
	}{
		{"span4", Options{Span: 4, KeySize: 8, ValueSize: 5}, 6000},
		{"span32", Options{}, 8000},
		{"page1k-key32", Options{PageBytes: 1024, KeySize: 32, ValueSize: 16}, 6000},
		{"tinycache", Options{Span: 6, CacheBytes: 3000}, 6000},
		{"nocache", Options{Span: 5, CacheBytes: -1, HandOver: 1}, 4000},
	} {
		t.Run(c.name, func(t *testing.T) {
			seed := testSeed(t)
			r := rand.New(rand.NewPCG(seed, 1))
			if testing.Short() {
				c.ops /= 4
			}
			p := newPool(t, remote.Config{MemoryNodes: 2})
			trees := []*Tree{openTree(t, p, c.opts), openTree(t, p, c.opts), openTree(t, p, c.opts)}
			o := newOracle()
			ctx := context.Background()
			space := 2000
			for i := range c.ops {
				tr := trees[r.IntN(len(trees))]
				k := keyGen(r, tr.g.keySize, space)
				switch x := r.IntN(100); {
				case x < 45:
					v := make([]byte, r.IntN(tr.g.valueSize+1))
					for j := range v {
						v[j] = byte(r.Uint32())
					}
					if err := tr.Put(ctx, k, v); err != nil {
						t.Fatalf("op %d Put(%x): %v", i, k, err)
					}
					o.put(k, v)
				case x < 70:
					v, ok, err := tr.Get(ctx, k)
					wv, wok := o.get(k)
					if err != nil || ok != wok || !bytes.Equal(v, wv) {
						t.Fatalf("op %d Get(%x) = %x %v %v, want %x %v", i, k, v, ok, err, wv, wok)
					}
				case x < 90:
					ok, err := tr.Delete(ctx, k)
					if wok := o.del(k); err != nil || ok != wok {
						t.Fatalf("op %d Delete(%x) = %v %v, want %v", i, k, ok, err, wok)
					}
				default:
					lo := keyGen(r, tr.g.keySize, space)
					var hi []byte
					if r.IntN(3) > 0 {
						hi = keyGen(r, tr.g.keySize, space)
					}
					limit := 1 + r.IntN(50)
					got, want := collect(t, tr, lo, hi, limit), o.scan(lo, hi, limit)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("op %d Scan(%x, %x, %d) =\n%x\nwant\n%x", i, lo, hi, limit, got, want)
					}
				}
				if i%500 == 499 {
					if info := verify(t, trees[0]); info.keys != o.t.Len() {
						t.Fatalf("op %d: tree holds %d keys, oracle %d", i, info.keys, o.t.Len())
					}
				}
			}
			info := verify(t, trees[0])
			if got, want := collect(t, trees[1], nil, nil, -1), o.scan(nil, nil, -1); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("final scan differs: %d pairs, want %d", len(got), len(want))
			}
			t.Logf("%+v", info)
		})
	}
}
