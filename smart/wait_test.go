package smart

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// TestWaitForSlowHolder pauses a live lock holder in the middle of its
// change, as a loaded machine preempts one, and checks that the other
// operations on its leaf wait for it rather than fail: a Get, a Scan and a
// Put of another compute node find the leaf torn by a half-landed WRITE,
// or marked removed while its slot still holds it, for the whole pause.
// Each re-read used to spend the retry budget (32 re-reads times 64
// restarts, with no backoff), which a pause of a few milliseconds
// exhausted: ErrContention. On the local transport, in real time.
func TestWaitForSlowHolder(t *testing.T) {
	const pause = 100 * time.Millisecond
	key, old, mid, last := []byte("slow-holder"), bytes.Repeat([]byte("o"), 40), bytes.Repeat([]byte("m"), 30), []byte("from another node")
	cases := []struct {
		name string
		// half makes the first half of the holder's change on the leaf it
		// locked; rest completes it after the pause.
		half, rest func(ctx context.Context, s *session, cur cursor, v leafView) error
		// got reports whether a value a waiter read is one it may see.
		got func(v []byte, ok bool) bool
	}{
		{
			name: "torn by an in-place update",
			half: func(ctx context.Context, s *session, cur cursor, v leafView) error {
				// The new meta word (another value length) lands first.
				binary := putWord(nil, makeMeta(len(key), len(mid), cur.sl.leafClass()))
				return s.c.Write(ctx, leafMetaAddr(cur.sl), binary)
			},
			rest: func(ctx context.Context, s *session, cur cursor, v leafView) error {
				return s.writeInPlace(ctx, cur.sl, key, mid, v.birth)
			},
			got: func(v []byte, ok bool) bool {
				return ok && (bytes.Equal(v, mid) || bytes.Equal(v, last))
			},
		},
		{
			name: "marked removed by a delete",
			half: func(ctx context.Context, s *session, cur cursor, v leafView) error {
				return s.do(ctx, s.markRemoved(s.batch(), cur.sl, v.meta))
			},
			rest: func(ctx context.Context, s *session, cur cursor, v leafView) error {
				ops := append(s.batch(), remote.CAS(cur.addr, uint64(cur.sl), uint64(tombstone(cur.sl.partial()))))
				if err := s.do(ctx, ops); err != nil {
					return err
				}
				return s.retire(ctx, cur.sl)
			},
			got: func(v []byte, ok bool) bool {
				return !ok || bytes.Equal(v, old) || bytes.Equal(v, last)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			a, p := newTree(t, remote.Config{MemoryNodes: 2, NodeBytes: 16 << 20}, Options{})
			defer p.Close()
			b, err := Open(p.NewComputeNode(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"slow-a", "slow-holder", "slow-z"} {
				if err := a.Put(ctx, []byte(k), old); err != nil {
					t.Fatal(err)
				}
			}
			s, cur, v := lockedLeaf(t, a, key)
			if err := tc.half(ctx, s, cur, v); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan string, 3)
			wg.Go(func() {
				got, ok, err := b.Get(ctx, key)
				if err != nil || !tc.got(got, ok) {
					errs <- "Get: " + string(got) + ", " + errString(err)
				}
			})
			wg.Go(func() {
				for kv, err := range b.Scan(ctx, []byte("slow-"), []byte("slow-zz")) {
					if err != nil || bytes.Equal(kv.Key, key) && !tc.got(kv.Value, true) {
						errs <- "Scan: " + string(kv.Value) + ", " + errString(err)
						return
					}
				}
			})
			wg.Go(func() {
				if err := b.Put(ctx, key, last); err != nil {
					errs <- "Put: " + err.Error()
				}
			})
			time.Sleep(pause)
			if err := tc.rest(ctx, s, cur, v); err != nil {
				t.Fatal(err)
			}
			a.release(s)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			if got, ok, err := a.Get(ctx, key); err != nil || !ok || !bytes.Equal(got, last) {
				t.Fatalf("after both: Get = %q, %v, %v; want %q", got, ok, err, last)
			}
			if err := a.Verify(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lockedLeaf takes a session of tr and, with it, the lock of the leaf that
// holds key. The caller releases the session.
func lockedLeaf(t *testing.T, tr *Tree, key []byte) (*session, cursor, leafView) {
	t.Helper()
	s, cur := leafCursor(t, tr, key)
	res, v, cur, err := s.lockLeaf(context.Background(), cur, key, false)
	if err != nil || res != leafLocked {
		t.Fatalf("lockLeaf(%q) = %v, %v", key, res, err)
	}
	return s, cur, v
}

// leafCursor takes a session of tr and descends with it to the leaf that
// holds key. The caller releases the session.
func leafCursor(t *testing.T, tr *Tree, key []byte) (*session, cursor) {
	t.Helper()
	s, d := descendTo(t, tr, key, atLeaf)
	return s, d.cur
}

// descendTo takes a session of tr and descends with it for key, which
// must end with outcome out. The caller releases the session.
func descendTo(t *testing.T, tr *Tree, key []byte, out outcome) (*session, descent) {
	t.Helper()
	ctx := context.Background()
	s, err := tr.session()
	if err != nil {
		t.Fatal(err)
	}
	s.enc = appendEncoded(s.enc[:0], key)
	cur, err := s.start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.descend(ctx, s.enc, cur)
	if err != nil || d.out != out {
		t.Fatalf("descent for %q: %v, %v; want %v", key, d.out, err, out)
	}
	return s, d
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
