package smart

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmindex/dmindex/remote"
)

func TestSmoke(t *testing.T) {
	p, _ := remote.NewPool(remote.Config{MemoryNodes: 2})
	tr, err := Open(p.NewComputeNode(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := map[string]string{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		k := fmt.Sprintf("k%d", r.IntN(5000))
		if r.IntN(4) == 0 {
			k = string([]byte{0, byte(r.IntN(3)), 1})[:1+r.IntN(3)]
		}
		switch r.IntN(3) {
		case 0, 1:
			v := fmt.Sprint(i)
			if err := tr.Put(ctx, []byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			m[k] = v
		case 2:
			f, err := tr.Delete(ctx, []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			_, ok := m[k]
			if f != ok {
				t.Fatalf("delete %q found=%v want %v", k, f, ok)
			}
			delete(m, k)
		}
	}
	for k, v := range m {
		got, ok, err := tr.Get(ctx, []byte(k))
		if err != nil || !ok || string(got) != v {
			t.Fatalf("get %q = %q %v %v want %q", k, got, ok, err, v)
		}
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	var last []byte
	for kv, err := range tr.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if last != nil && string(last) >= string(kv.Key) {
			t.Fatalf("order")
		}
		last = kv.Key
		if m[string(kv.Key)] != string(kv.Value) {
			t.Fatalf("scan value")
		}
		n++
	}
	if n != len(m) {
		t.Fatalf("scan %d want %d", n, len(m))
	}
	t.Log(n, p.Stats())
}
