package sherman

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

func TestEmptyTree(t *testing.T) {
	ctx := context.Background()
	tr := openTree(t, newPool(t, remote.Config{}), Options{})
	if v, ok, err := tr.Get(ctx, []byte("x")); err != nil || ok || v != nil {
		t.Fatalf("Get on empty tree = %q, %v, %v", v, ok, err)
	}
	if ok, err := tr.Delete(ctx, []byte("x")); err != nil || ok {
		t.Fatalf("Delete on empty tree = %v, %v", ok, err)
	}
	for kv, err := range tr.Scan(ctx, nil, nil) {
		t.Fatalf("Scan on empty tree yielded %q, %v", kv.Key, err)
	}
	if info := verify(t, tr); info.height != 1 || info.keys != 0 {
		t.Fatalf("empty tree: %+v", info)
	}
}

func TestArgumentErrors(t *testing.T) {
	ctx := context.Background()
	tr := openTree(t, newPool(t, remote.Config{}), Options{KeySize: 4, ValueSize: 3})
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"put empty key", tr.Put(ctx, nil, nil), index.ErrEmptyKey},
		{"put long key", tr.Put(ctx, []byte("12345"), nil), index.ErrKeyTooLong},
		{"put large value", tr.Put(ctx, []byte("k"), []byte("1234")), index.ErrValueTooLarge},
		{"get long key", func() error { _, _, err := tr.Get(ctx, []byte("12345")); return err }(), index.ErrKeyTooLong},
		{"delete empty key", func() error { _, err := tr.Delete(ctx, []byte{}); return err }(), index.ErrEmptyKey},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := tr.Put(ctx, []byte("1234"), []byte("123")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Put(ctx, []byte("k"), nil); !errors.Is(err, index.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if _, _, err := tr.Get(ctx, []byte("k")); !errors.Is(err, index.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	for _, err := range tr.Scan(ctx, nil, nil) {
		if !errors.Is(err, index.ErrClosed) {
			t.Fatalf("Scan after Close: %v", err)
		}
	}
}

// TestBadOptions: Open refuses options out of range with ErrBadOptions, in
// a message of its own size (a name far too long is not echoed), and
// accepts the longest name.
func TestBadOptions(t *testing.T) {
	p := newPool(t, remote.Config{})
	for _, o := range []Options{
		{KeySize: 256}, {ValueSize: -1}, {Span: 3}, {Span: 8, PageBytes: 1024}, {PageBytes: 100},
		{HandOver: -1}, {RetryBudget: -1}, {LockTableSize: 1 << 30},
		{Name: strings.Repeat("n", remote.MaxNameBytes-len(regionPrefix)+1)}, {Name: strings.Repeat("n", 10000)},
	} {
		_, err := Open(p.NewComputeNode(), o)
		if !errors.Is(err, ErrBadOptions) {
			t.Errorf("Open(%.200v) = %v, want ErrBadOptions", o, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("Open(%.200v): an error of %d bytes: %.200s…", o, len(err.Error()), err)
		}
	}
	tr, err := Open(p.NewComputeNode(), Options{Name: strings.Repeat("n", remote.MaxNameBytes-len(regionPrefix))})
	if err != nil {
		t.Fatalf("Open with the longest name: %v", err)
	}
	tr.Close()
	noChip := newPool(t, remote.Config{OnChipBytes: -1})
	if _, err := Open(noChip.NewComputeNode(), Options{}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("Open without on-chip memory = %v, want ErrBadOptions", err)
	}
	small := newPool(t, remote.Config{NodeBytes: 64 << 10, ChunkBytes: 4096})
	if _, err := Open(small.NewComputeNode(), Options{KeySize: MaxKeyLen, ValueSize: MaxValueLen}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("Open with pages larger than a memory node = %v, want ErrBadOptions", err)
	}
	openTree(t, p, Options{Name: "a"})
	if _, err := Open(p.NewComputeNode(), Options{Name: "a", KeySize: 8}); !errors.Is(err, ErrOptionsMismatch) {
		t.Errorf("reopen with another key size = %v, want ErrOptionsMismatch", err)
	}
}

func TestShortKeysAndValues(t *testing.T) {
	ctx := context.Background()
	tr := openTree(t, newPool(t, remote.Config{}), Options{})
	keys := [][]byte{{'a'}, {'a', 0}, {'a', 0, 0}, {0}, {0, 0}, {'a', 0, 0, 0, 0, 0, 0, 0}}
	for i, k := range keys {
		if err := tr.Put(ctx, k, bytes.Repeat([]byte{byte(i)}, i%3)); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		v, ok, err := tr.Get(ctx, k)
		if err != nil || !ok || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i%3)) || v == nil {
			t.Fatalf("Get(%x) = %x, %v, %v", k, v, ok, err)
		}
	}
	var got [][]byte
	for kv, err := range tr.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, kv.Key)
	}
	want := [][]byte{{0}, {0, 0}, {'a'}, {'a', 0}, {'a', 0, 0}, {'a', 0, 0, 0, 0, 0, 0, 0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Scan = %x, want %x", got, want)
	}
	verify(t, tr)
}

func TestSplitsAndRootGrowth(t *testing.T) {
	ctx := context.Background()
	for _, span := range []int{4, 5, 32} {
		t.Run(fmt.Sprint("span", span), func(t *testing.T) {
			p := newPool(t, remote.Config{MemoryNodes: 2})
			tr := openTree(t, p, Options{Span: span})
			const n = 3000
			for i := range uint64(n) {
				k := ikey(i * 7919 % n)
				if err := tr.Put(ctx, k, k); err != nil {
					t.Fatalf("Put %d: %v", i, err)
				}
			}
			info := verify(t, tr)
			if info.keys != n || info.height < 3 {
				t.Fatalf("tree after %d inserts: %+v", n, info)
			}
			t.Logf("%+v stats %+v", info, tr.Stats())
			// A second compute node sees the grown tree.
			tr2 := openTree(t, p, Options{Span: span})
			i := uint64(0)
			for kv, err := range tr2.Scan(ctx, nil, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(kv.Key, ikey(i)) || !bytes.Equal(kv.Value, ikey(i)) {
					t.Fatalf("scan #%d = %x→%x", i, kv.Key, kv.Value)
				}
				i++
			}
			if i != n {
				t.Fatalf("scan yielded %d pairs, want %d", i, n)
			}
			for i := range uint64(n) {
				if v, ok, err := tr2.Get(ctx, ikey(i)); err != nil || !ok || !bytes.Equal(v, ikey(i)) {
					t.Fatalf("Get(%d) = %x %v %v", i, v, ok, err)
				}
			}
		})
	}
}
