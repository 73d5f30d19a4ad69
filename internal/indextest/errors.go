package indextest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/dmindex/dmindex/index"
)

// RunErrors checks the errors of the contract and that a failed call
// changes nothing: ErrEmptyKey for nil and empty keys, ErrKeyTooLong for
// keys of MaxKeyLen+1 bytes and more, ErrValueTooLarge for values of
// MaxValueLen+1 bytes and more (the previous value stays), ErrClosed for
// every call after Close (while the index stays usable on other compute
// nodes), and context.Canceled and context.DeadlineExceeded for calls with
// a done context, including a context cancelled in the middle of a scan.
// After each group the index must still equal the oracle.
func RunErrors(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	t.Run("invalid-arguments", func(t *testing.T) { errorsInvalid(t, tg) })
	t.Run("closed", func(t *testing.T) { errorsClosed(t, tg) })
	t.Run("context", func(t *testing.T) { errorsContext(t, tg) })
}

// populate puts n keys (some of them the test keys) and returns the oracle.
func (tg Target) populate(t *testing.T, idx index.Index, n int) *oracle {
	t.Helper()
	ctx := t.Context()
	o := newOracle()
	r := newRand(uint64(n))
	keys := tg.testKeys()
	gens := tg.keyGens(1, n)
	for i := range n {
		k := gens[i%len(gens)].gen(r)
		if i < len(keys) {
			k = keys[i]
		}
		v := makeValue(uint64(i), tg.randValueLen(r, 8))
		if err := idx.Put(ctx, k, v); err != nil {
			t.Fatalf("populate: Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
	}
	return o
}

// wantErr reports whether err wraps target, with a message naming the call.
func wantErr(t testing.TB, call string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one wrapping %v", call, err, target)
	}
}

func errorsInvalid(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	idx := idxs[0]
	o := tg.populate(t, idx, 200)
	val := makeValue(1, tg.randValueLen(newRand(1), 8))

	for _, k := range [][]byte{nil, {}} {
		name := fmt.Sprintf("%#v", k)
		v, found, err := idx.Get(ctx, k)
		wantErr(t, "Get("+name+")", err, index.ErrEmptyKey)
		if found || v != nil {
			t.Errorf("Get(%s) with an error returned %s, %v", name, fmtVal(v), found)
		}
		wantErr(t, "Put("+name+")", idx.Put(ctx, k, val), index.ErrEmptyKey)
		found, err = idx.Delete(ctx, k)
		wantErr(t, "Delete("+name+")", err, index.ErrEmptyKey)
		if found {
			t.Errorf("Delete(%s) with an error reported found", name)
		}
	}

	// Too long keys, also those whose MaxKeyLen-byte prefix is a key.
	stored := bytes.Repeat([]byte("m"), tg.MaxKeyLen)
	if _, ok := o.get(stored); !ok {
		t.Fatalf("populate did not store the %d-byte key", tg.MaxKeyLen)
	}
	for _, n := range []int{tg.MaxKeyLen + 1, tg.MaxKeyLen + 8, 256, 1000, 70000} {
		if n <= tg.MaxKeyLen {
			continue
		}
		for _, k := range [][]byte{bytes.Repeat([]byte("m"), n), bytes.Repeat([]byte{0xff}, n), bytes.Repeat([]byte{0x00}, n)} {
			call := fmt.Sprintf("%d-byte key %s", n, fmtKey(k))
			_, found, err := idx.Get(ctx, k)
			wantErr(t, "Get of a "+call, err, index.ErrKeyTooLong)
			if found {
				t.Errorf("Get of a %s reported found", call)
			}
			wantErr(t, "Put of a "+call, idx.Put(ctx, k, val), index.ErrKeyTooLong)
			found, err = idx.Delete(ctx, k)
			wantErr(t, "Delete of a "+call, err, index.ErrKeyTooLong)
			if found {
				t.Errorf("Delete of a %s reported found", call)
			}
		}
	}

	// Too large values: the previous value stays, an absent key stays
	// absent.
	absent := tg.fitKey([]byte("absent-key-for-large-values"))
	o.del(absent)
	if _, err := idx.Delete(ctx, absent); err != nil {
		t.Fatalf("Delete(%s): %v", fmtKey(absent), err)
	}
	for _, n := range []int{tg.MaxValueLen + 1, tg.MaxValueLen + 4096, 1 << 20} {
		if n <= tg.MaxValueLen {
			continue
		}
		big := makeValue(9, n)
		for _, k := range slices.Concat(tg.testKeys()[:4], [][]byte{absent}) {
			wantErr(t, fmt.Sprintf("Put(%s, %d-byte value)", fmtKey(k), n), idx.Put(ctx, k, big), index.ErrValueTooLarge)
			for cn := range idxs {
				if p := checkGet(ctx, idxs[cn], o, k); p != "" {
					t.Errorf("after a Put of %d bytes failed, compute node %d: %s", n, cn, p)
				}
			}
		}
	}
	if tg.FixedValueLen > 0 {
		t.Logf("FixedValueLen %d: values of other lengths below it are not tested", tg.FixedValueLen)
	}
	checkAll(t, ctx, idxs[1], o, "after the failed calls")
	tg.verify(t, ctx, idx, "after the failed calls")
}

func errorsClosed(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	o := tg.populate(t, idxs[0], 100)
	// Leave a scan open across Close: it may finish or fail, but must not
	// hang or yield garbage.
	next, stop := iter.Pull2(idxs[0].Scan(ctx, nil, nil))
	defer stop()
	first, err, ok := next()
	if !ok || err != nil {
		t.Fatalf("Scan before Close: %v, %v", ok, err)
	}
	if err := idxs[0].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := idxs[0].Close(); err != nil && !errors.Is(err, index.ErrClosed) {
		t.Errorf("second Close: %v, want nil or ErrClosed", err)
	}
	prev := first.Key
	for n := 0; ; n++ {
		kv, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			if !errors.Is(err, index.ErrClosed) {
				t.Errorf("scan across Close failed with %v, want ErrClosed", err)
			}
			break
		}
		if string(kv.Key) <= string(prev) {
			t.Errorf("scan across Close: key %s after %s", fmtKey(kv.Key), fmtKey(prev))
		}
		if want, ok := o.get(kv.Key); !ok || want != string(kv.Value) {
			t.Errorf("scan across Close: pair %s = %s is not in the index", fmtKey(kv.Key), fmtVal(kv.Value))
		}
		prev = kv.Key
		if n > o.len() {
			t.Fatalf("scan across Close does not end")
		}
	}

	k := tg.testKeys()[0]
	v, found, err := idxs[0].Get(ctx, k)
	wantErr(t, "Get after Close", err, index.ErrClosed)
	if found || v != nil {
		t.Errorf("Get after Close returned %s, %v", fmtVal(v), found)
	}
	wantErr(t, "Put after Close", idxs[0].Put(ctx, k, makeValue(1, tg.vlen(8))), index.ErrClosed)
	wantErr(t, "Put of a new key after Close", idxs[0].Put(ctx, tg.fitKey([]byte("new-after-close")), makeValue(2, tg.vlen(8))), index.ErrClosed)
	found, err = idxs[0].Delete(ctx, k)
	wantErr(t, "Delete after Close", err, index.ErrClosed)
	if found {
		t.Errorf("Delete after Close reported found")
	}
	// Invalid arguments after Close: either error is fine, but an error.
	if err := idxs[0].Put(ctx, nil, nil); err == nil {
		t.Errorf("Put(nil) after Close succeeded")
	}
	s := scanN(ctx, idxs[0], nil, nil, -1)
	if len(s.kvs) != 0 || len(s.proto) != 0 {
		t.Errorf("Scan after Close yielded %d pairs (protocol: %v)", len(s.kvs), s.proto)
	}
	wantErr(t, "Scan after Close", s.err, index.ErrClosed)
	// The other compute node is unaffected and sees everything.
	checkAll(t, ctx, idxs[1], o, "on another compute node after Close")
	tg.verify(t, ctx, idxs[1], "after Close on another compute node")
}

func errorsContext(t *testing.T, tg Target) {
	_, idxs := tg.localIndex(t, 2)
	idx := idxs[0]
	o := tg.populate(t, idx, 300)
	bg := t.Context()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel2()
	keys := tg.testKeys()
	newKey := tg.fitKey([]byte("inserted-with-a-done-context"))
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
	}{{"cancelled", cancelled, context.Canceled}, {"deadline", expired, context.DeadlineExceeded}} {
		for i, k := range slices.Concat(keys[:4], [][]byte{newKey}) {
			v, found, err := idx.Get(c.ctx, k)
			wantErr(t, fmt.Sprintf("Get(%s) with a %s context", fmtKey(k), c.name), err, c.err)
			if found || v != nil {
				t.Errorf("Get with a %s context returned %s, %v", c.name, fmtVal(v), found)
			}
			wantErr(t, fmt.Sprintf("Put(%s) with a %s context", fmtKey(k), c.name),
				idx.Put(c.ctx, k, makeValue(uint64(i), tg.randValueLen(newRand(uint64(i)), 8))), c.err)
			found, err = idx.Delete(c.ctx, k)
			wantErr(t, fmt.Sprintf("Delete(%s) with a %s context", fmtKey(k), c.name), err, c.err)
			if found {
				t.Errorf("Delete with a %s context reported found", c.name)
			}
		}
		s := scanN(c.ctx, idx, nil, nil, -1)
		if len(s.kvs) != 0 || len(s.proto) != 0 {
			t.Errorf("Scan with a %s context yielded %d pairs (protocol: %v)", c.name, len(s.kvs), s.proto)
		}
		wantErr(t, fmt.Sprintf("Scan with a %s context", c.name), s.err, c.err)
	}
	checkAll(t, bg, idxs[1], o, "after calls with done contexts")

	// A context cancelled in the middle of a scan: the scan either finishes
	// correctly or yields context.Canceled once and stops.
	ctx, cancel3 := context.WithCancel(bg)
	defer cancel3()
	var got []index.KV
	var scanErr error
	calls := 0
	idx.Scan(ctx, nil, nil)(func(kv index.KV, err error) bool {
		calls++
		if scanErr != nil {
			t.Errorf("scan yielded again after the error %v", scanErr)
			return false
		}
		if err != nil {
			scanErr = err
			return true
		}
		got = append(got, kv)
		if len(got) == 5 {
			cancel3()
		}
		return true
	})
	if scanErr != nil {
		wantErr(t, "scan cancelled in the middle", scanErr, context.Canceled)
	}
	want := o.all()
	if scanErr == nil && len(got) != len(want) {
		t.Errorf("scan cancelled in the middle ended without an error after %d of %d pairs", len(got), len(want))
	}
	if p := diffKVs(got, want[:min(len(got), len(want))]); p != "" {
		t.Errorf("scan cancelled in the middle: %s", p)
	}
	checkAll(t, bg, idxs[1], o, "after a cancelled scan")
	tg.verify(t, bg, idx, "after calls with done contexts")
}
