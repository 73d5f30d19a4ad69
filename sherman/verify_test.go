package sherman

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// TestVerifyNamesRule breaks one invariant of a two-level tree at a time
// and checks that Verify reports it as corruption naming that rule.
func TestVerifyNamesRule(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		rule    string
		breakIt func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr)
	}{
		{"S1", func(t *testing.T, tr *Tree, c *remote.Client, _ []remote.Addr) {
			if _, err := c.FAA(ctx, tr.meta.Add(offMetaDescr), 1); err != nil {
				t.Fatal(err)
			}
		}},
		{"S2", func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr) {
			if _, err := c.FAA(ctx, leaves[1].Add(uint64(tr.g.entryOffset(0)+7)&^7), 1); err != nil { // a word inside entry 0
				t.Fatal(err)
			}
		}},
		{"S3", func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr) {
			rewriteLeaf(t, tr, c, leaves[len(leaves)-1], func(h *header, _ []kv) []kv {
				h.sibling = leaves[0] // a sibling after the +inf fence
				return nil
			})
		}},
		{"S4", func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr) {
			rewriteLeaf(t, tr, c, leaves[1], func(h *header, kvs []kv) []kv {
				h.low = bytes.Clone(h.low)
				h.low[len(h.low)-1]-- // no longer its separator
				return nil
			})
		}},
		{"S5", func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr) {
			rewriteLeaf(t, tr, c, leaves[0], func(_ *header, kvs []kv) []kv {
				return append(kvs, kvs[0]) // one key twice
			})
		}},
		{"S6", func(t *testing.T, tr *Tree, c *remote.Client, leaves []remote.Addr) {
			_, word := tr.locks.lockWord(leaves[0])
			if _, err := c.FAA(ctx, word, 1); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			tr := openTree(t, newPool(t, remote.Config{}), Options{KeySize: 8, ValueSize: 8, Span: 4, RetryBudget: 8})
			for i := range uint64(12) {
				if err := tr.Put(ctx, ikey(i*10), ikey(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tr.Verify(ctx); err != nil {
				t.Fatalf("intact tree: %v", err)
			}
			c := tr.cn.NewClient()
			tc.breakIt(t, tr, c, leafChain(t, tr, c))
			err := tr.Verify(ctx)
			if !errors.Is(err, index.ErrCorrupt) || !strings.Contains(err.Error(), tc.rule+":") {
				t.Fatalf("Verify = %v, want corruption naming %s", err, tc.rule)
			}
		})
	}
}

// leafChain returns the addresses of a two-level tree's leaves, left to
// right.
func leafChain(t *testing.T, tr *Tree, c *remote.Client) []remote.Addr {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, tr.g.pageBytes)
	if err := c.Read(ctx, tr.root.Load().addr, buf); err != nil {
		t.Fatal(err)
	}
	root := page{&tr.g, buf}
	if root.level() != 1 {
		t.Fatalf("root at level %d, want 1", root.level())
	}
	var leaves []remote.Addr
	for a := root.leftmost(); a != 0; {
		leaves = append(leaves, a)
		if err := c.Read(ctx, a, buf[:tr.g.leafBytes]); err != nil {
			t.Fatal(err)
		}
		a = page{&tr.g, buf}.sibling()
	}
	if len(leaves) < 3 {
		t.Fatalf("%d leaves, want at least 3", len(leaves))
	}
	return leaves
}

// rewriteLeaf rewrites the leaf at a, valid (checksums included), with the
// header and pairs edit returns (nil: the leaf's own pairs).
func rewriteLeaf(t *testing.T, tr *Tree, c *remote.Client, a remote.Addr, edit func(*header, []kv) []kv) {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, tr.g.leafBytes)
	if err := c.Read(ctx, a, buf); err != nil {
		t.Fatal(err)
	}
	p := page{&tr.g, buf}
	var kvs []kv
	for i := range tr.g.leafSpan {
		if k, v := p.leafKV(i); k != nil {
			kvs = append(kvs, kv{bytes.Clone(k), bytes.Clone(v)})
		}
	}
	h := p.headerOf()
	if out := edit(&h, kvs); out != nil {
		kvs = out
	}
	img := make([]byte, tr.g.leafBytes)
	tr.g.encodeLeaf(img, &h, kvs)
	if err := c.Write(ctx, a, img); err != nil {
		t.Fatal(err)
	}
}
