package indextest

import (
	"bytes"
	"fmt"
	"testing"
)

// RunBasic checks each operation on its own: Get, Delete and Scan on an
// empty index; Put, Get and overwrite with values of every interesting size
// from 0 to MaxValueLen, growing and shrinking (in-place and out-of-place
// updates); Delete of present and absent keys and delete then reinsert; the
// ownership of the slices passed to Put and returned by Get and Scan; and
// that the indexes opened under one name on several compute nodes are one
// structure, also after one of them is closed and reopened.
func RunBasic(t *testing.T, tg Target) {
	checkTarget(t, tg)
	tg = tg.withPool(t)
	t.Run("empty", func(t *testing.T) { basicEmpty(t, tg) })
	t.Run("put-get-overwrite", func(t *testing.T) { basicPutGet(t, tg) })
	t.Run("value-sizes", func(t *testing.T) { basicValueSizes(t, tg) })
	t.Run("delete", func(t *testing.T) { basicDelete(t, tg) })
	t.Run("ownership", func(t *testing.T) { basicOwnership(t, tg) })
	t.Run("shared-compute-nodes", func(t *testing.T) { basicShared(t, tg) })
}

// testKeys returns a few distinct keys the target accepts, some prefixes
// of others.
func (tg Target) testKeys() [][]byte {
	return tg.dedupe([][]byte{
		[]byte("k"), []byte("key"), []byte("key1"), []byte("key2"), []byte("kez"), []byte("\x00"),
		[]byte("\xff"), []byte("\x00\x00"), []byte("\xff\xff"), []byte("key\x00"), []byte("keys-and-values"),
		bytes.Repeat([]byte("m"), tg.MaxKeyLen), bytes.Repeat([]byte("m"), tg.MaxKeyLen-1),
	})
}

func basicEmpty(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := newOracle()
	for _, k := range tg.testKeys() {
		if p := checkGet(ctx, idx, o, k); p != "" {
			t.Errorf("empty index: %s", p)
		}
		if found, err := idx.Delete(ctx, k); found || err != nil {
			t.Errorf("empty index: Delete(%s) = %v, %v; want false, nil", fmtKey(k), found, err)
		}
	}
	for _, b := range [][2][]byte{{nil, nil}, {[]byte("a"), nil}, {nil, []byte("z")}, {[]byte("a"), []byte("z")}, {{}, {}}} {
		if p := scanN(ctx, idx, b[0], b[1], -1).problem(nil); p != "" {
			t.Errorf("empty index: Scan(%s, %s): %s", fmtKey(b[0]), fmtKey(b[1]), p)
		}
	}
	tg.verify(t, ctx, idx, "of an empty index")
}

func basicPutGet(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := newOracle()
	keys := tg.testKeys()
	vlen := func(i int) int {
		if tg.FixedValueLen > 0 {
			return tg.FixedValueLen
		}
		return 8 + i%24
	}
	for i, k := range keys {
		v := makeValue(uint64(i), vlen(i))
		if err := idx.Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
		for _, k2 := range keys {
			if p := checkGet(ctx, idx, o, k2); p != "" {
				t.Fatalf("after Put(%s): %s", fmtKey(k), p)
			}
		}
	}
	// Overwrite each key twice; the others must not change.
	for round := 1; round <= 2; round++ {
		for i, k := range keys {
			v := makeValue(uint64(round<<16|i), vlen(i+round))
			if err := idx.Put(ctx, k, v); err != nil {
				t.Fatalf("overwrite %d: Put(%s): %v", round, fmtKey(k), err)
			}
			o.put(k, v)
			for _, k2 := range keys {
				if p := checkGet(ctx, idx, o, k2); p != "" {
					t.Fatalf("after overwrite %d of %s: %s", round, fmtKey(k), p)
				}
			}
		}
	}
	// Overwrite with the same value.
	if v, ok := o.get(keys[0]); ok {
		if err := idx.Put(ctx, keys[0], []byte(v)); err != nil {
			t.Fatalf("Put of the same value: %v", err)
		}
	}
	checkAll(t, ctx, idx, o, "after overwrites")
	tg.verify(t, ctx, idx, "after overwrites")
}

func basicValueSizes(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	o := newOracle()
	sizes := tg.valueSizes()
	keys := tg.dedupe([][]byte{[]byte("size"), []byte("size-neighbour-a"), []byte("sizf"), []byte("siz")})
	// Neighbours hold values of their own so that a value overflowing its
	// leaf would show.
	put := func(cn int, k []byte, n int, tag uint64) {
		t.Helper()
		v := makeValue(tag, n)
		if err := idxs[cn].Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s, %d bytes): %v", fmtKey(k), n, err)
		}
		o.put(k, v)
	}
	checkKeys := func(when string) {
		t.Helper()
		for cn := range idxs {
			for _, k := range keys {
				if p := checkGet(ctx, idxs[cn], o, k); p != "" {
					t.Fatalf("%s, compute node %d: %s", when, cn, p)
				}
			}
		}
	}
	for i, k := range keys[1:] {
		put(0, k, sizes[i%len(sizes)], uint64(100+i))
	}
	// Growing, shrinking, then alternating between the extremes.
	var seq []int
	seq = append(seq, sizes...)
	for i := len(sizes) - 1; i >= 0; i-- {
		seq = append(seq, sizes[i])
	}
	if !testing.Short() {
		for i := range sizes {
			seq = append(seq, sizes[i], sizes[len(sizes)-1-i])
		}
	}
	for i, n := range seq {
		put(i%2, keys[0], n, uint64(i))
		checkKeys(fmt.Sprintf("after writing %d bytes (step %d)", n, i))
	}
	// A key per size, so every size class holds a live value at once.
	for i, n := range sizes {
		put(i%2, tg.fitKey([]byte(fmt.Sprintf("size-%05d", n))), n, uint64(1000+i))
	}
	tg.verify(t, ctx, idxs[0], "after the value-size sequence")
	checkAll(t, ctx, idxs[1], o, "after the value-size sequence")

	// nil and empty values are both stored as empty values.
	if tg.FixedValueLen == 0 {
		for _, v := range [][]byte{nil, {}} {
			k := keys[0]
			if err := idxs[0].Put(ctx, k, v); err != nil {
				t.Fatalf("Put(%s, %#v): %v", fmtKey(k), v, err)
			}
			got, found, err := idxs[1].Get(ctx, k)
			if err != nil || !found || len(got) != 0 {
				t.Errorf("after Put(%s, %#v): Get = %s, %v, %v; want empty, true, nil", fmtKey(k), v, fmtVal(got), found, err)
			}
		}
	}
}

func basicDelete(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 2)
	o := newOracle()
	keys := tg.testKeys()
	for i, k := range keys {
		v := makeValue(uint64(i), tg.randValueLen(newRand(uint64(i)), 8))
		if err := idxs[0].Put(ctx, k, v); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k), err)
		}
		o.put(k, v)
	}
	del := func(cn int, k []byte, want bool, when string) {
		t.Helper()
		found, err := idxs[cn].Delete(ctx, k)
		o.del(k)
		if err != nil || found != want {
			t.Fatalf("%s: Delete(%s) = %v, %v; want %v, nil", when, fmtKey(k), found, err, want)
		}
		check := keys
		if testing.Short() {
			check = [][]byte{k}
		}
		for cn := range idxs {
			for _, k2 := range check {
				if p := checkGet(ctx, idxs[cn], o, k2); p != "" {
					t.Fatalf("%s, after Delete(%s), compute node %d: %s", when, fmtKey(k), cn, p)
				}
			}
		}
	}
	// Absent keys: neighbours of present ones.
	for _, k := range keys {
		for _, nb := range tg.neighbours(k) {
			if _, ok := o.get(nb); !ok {
				del(0, nb, false, "absent key")
			}
		}
	}
	// Present keys, every other one; deleting again finds nothing.
	for i, k := range keys {
		if i%2 == 0 {
			del(i%2, k, true, "present key")
			del((i+1)%2, k, false, "deleted key")
		}
	}
	checkAll(t, ctx, idxs[1], o, "after deleting every other key")
	tg.verify(t, ctx, idxs[0], "after deleting every other key")
	// Delete then reinsert, with a value of another size, several times.
	sizes := tg.valueSizes()
	for round := range 3 {
		for i, k := range keys {
			if _, ok := o.get(k); ok {
				del(i%2, k, true, fmt.Sprintf("round %d", round))
			}
			v := makeValue(uint64(round<<16|i), sizes[(i+round*5)%len(sizes)])
			if err := idxs[(i+1)%2].Put(ctx, k, v); err != nil {
				t.Fatalf("reinsert round %d: Put(%s): %v", round, fmtKey(k), err)
			}
			o.put(k, v)
		}
		checkAll(t, ctx, idxs[0], o, fmt.Sprintf("after reinsert round %d", round))
	}
	// Delete everything.
	for i, k := range keys {
		del(i%2, k, true, "delete all")
	}
	checkAll(t, ctx, idxs[0], o, "after deleting every key")
	tg.verify(t, ctx, idxs[1], "after deleting every key")
}

func basicOwnership(t *testing.T, tg Target) {
	ctx := t.Context()
	_, idxs := tg.localIndex(t, 1)
	idx := idxs[0]
	o := newOracle()
	n := tg.vlen(48)
	// Buffers passed to Put are the caller's after Put returns.
	for i, k0 := range tg.testKeys() {
		kbuf := bytes.Clone(k0)
		vbuf := makeValue(uint64(i), n)
		if err := idx.Put(ctx, kbuf, vbuf); err != nil {
			t.Fatalf("Put(%s): %v", fmtKey(k0), err)
		}
		o.put(k0, vbuf)
		for j := range kbuf {
			kbuf[j] ^= 0x5a
		}
		for j := range vbuf {
			vbuf[j] ^= 0xa5
		}
	}
	if !checkAll(t, ctx, idx, o, "after mutating the key and value buffers passed to Put") {
		t.FailNow()
	}
	for _, k := range tg.testKeys() {
		if p := checkGet(ctx, idx, o, k); p != "" {
			t.Fatalf("after mutating the buffers passed to Put: %s", p)
		}
	}
	// The value returned by Get belongs to the caller.
	for _, k := range tg.testKeys() {
		v, found, err := idx.Get(ctx, k)
		if err != nil || !found {
			t.Fatalf("Get(%s) = %v, %v", fmtKey(k), found, err)
		}
		for j := range v {
			v[j] ^= 0xff
		}
		if p := checkGet(ctx, idx, o, k); p != "" {
			t.Fatalf("after mutating the value returned by Get: %s", p)
		}
	}
	// Keys and values yielded by Scan belong to the caller, also while the
	// scan goes on.
	count := 0
	for kv, err := range idx.Scan(ctx, nil, nil) {
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		count++
		for j := range kv.Key {
			kv.Key[j] ^= 0xff
		}
		for j := range kv.Value {
			kv.Value[j] ^= 0xff
		}
	}
	if count != o.len() {
		t.Errorf("scan while mutating the yielded slices: %d pairs, want %d", count, o.len())
	}
	checkAll(t, ctx, idx, o, "after mutating the slices yielded by Scan")
	for _, k := range tg.testKeys() {
		if p := checkGet(ctx, idx, o, k); p != "" {
			t.Fatalf("after mutating the slices yielded by Scan: %s", p)
		}
	}
	// Two Gets of one key do not share memory.
	k := tg.testKeys()[0]
	v1, _, err1 := idx.Get(ctx, k)
	v2, _, err2 := idx.Get(ctx, k)
	if err1 != nil || err2 != nil {
		t.Fatalf("Get(%s): %v, %v", fmtKey(k), err1, err2)
	}
	if len(v1) > 0 {
		v1[0] ^= 0xff
		if v1[0] == v2[0] {
			t.Errorf("two Gets of %s returned values sharing memory", fmtKey(k))
		}
	}
	tg.verify(t, ctx, idx, "after the ownership checks")
}

func basicShared(t *testing.T, tg Target) {
	ctx := t.Context()
	pool, idxs := tg.localIndex(t, 3)
	o := newOracle()
	r := newRand(seedFor(t))
	gens := tg.keyGens(r.Uint64(), 600)
	var keys [][]byte
	write := func(cn, n int, round int) {
		t.Helper()
		for i := range n {
			k := gens[i%len(gens)].gen(r)
			v := makeValue(uint64(round<<20|i), tg.randValueLen(r, 8))
			if err := idxs[cn].Put(ctx, k, v); err != nil {
				t.Fatalf("Put(%s) on compute node %d: %v", fmtKey(k), cn, err)
			}
			o.put(k, v)
			keys = append(keys, k)
		}
	}
	readAll := func(cn int, when string) {
		t.Helper()
		for _, k := range keys {
			if p := checkGet(ctx, idxs[cn], o, k); p != "" {
				t.Fatalf("%s, on compute node %d: %s", when, cn, p)
			}
		}
		if !checkAll(t, ctx, idxs[cn], o, fmt.Sprintf("%s, on compute node %d", when, cn)) {
			t.FailNow()
		}
	}
	// A write on one compute node is seen at once by the others, also after
	// they cached the structure and it changed under them.
	write(0, 300, 1)
	readAll(1, "after writes on compute node 0")
	readAll(2, "after writes on compute node 0")
	write(0, 300, 2)
	for i, k := range keys {
		if i%3 == 0 {
			if _, err := idxs[0].Delete(ctx, k); err != nil {
				t.Fatalf("Delete(%s): %v", fmtKey(k), err)
			}
			o.del(k)
		}
	}
	readAll(1, "after splits and deletes on compute node 0")
	write(1, 300, 3)
	readAll(0, "after writes on compute node 1")
	readAll(2, "after writes on compute node 1")

	// Closing one compute node's index leaves the others working; the
	// index can be reopened on that node and on a new one.
	if err := idxs[2].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	write(0, 100, 4)
	readAll(1, "after another compute node closed its index")
	cns := pool.ComputeNodes()
	idxs[2] = tg.open(t, cns[len(cns)-1], idxName(t))
	readAll(2, "after reopening on the same compute node")
	fresh := tg.open(t, pool.NewComputeNode(), idxName(t))
	if !checkAll(t, ctx, fresh, o, "on a new compute node") {
		t.FailNow()
	}
	// Another name is another index.
	other := tg.open(t, cns[len(cns)-3], idxName(t)+"-other")
	if p := scanN(ctx, other, nil, nil, -1).problem(nil); p != "" {
		t.Errorf("an index under another name is not empty: %s", p)
	}
	if err := other.Put(ctx, keys[0], makeValue(7, tg.randValueLen(r, 8))); err != nil {
		t.Fatalf("Put on the other index: %v", err)
	}
	readAll(0, "after writing to an index under another name")
	tg.verify(t, ctx, idxs[0], "after the shared compute node checks")
}
