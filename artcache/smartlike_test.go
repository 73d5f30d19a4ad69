package artcache

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
)

// emailKeys returns n distinct e-mail-like keys with the host reversed in
// front ("com.gmail@john.x7k2"), the string keys of the SMART paper.
func emailKeys(n int, seed uint64) [][]byte {
	hosts := []string{"com.gmail", "com.yahoo", "com.hotmail", "com.outlook", "com.aol", "net.comcast",
		"de.web", "fr.orange", "uk.co.bt", "ru.mail", "cn.163", "org.apache", "edu.mit", "jp.co.nifty"}
	names := []string{"john", "mary", "james", "linda", "robert", "susan", "michael", "karen", "david",
		"lisa", "william", "nancy", "richard", "betty", "joseph", "sandra", "info", "admin", "sales"}
	r := rand.New(rand.NewPCG(seed, 0x656d61696c))
	seen := make(map[string]bool, n)
	var keys [][]byte
	for len(keys) < n {
		k := hosts[r.IntN(len(hosts))] + "@" + names[r.IntN(len(names))] + "." +
			strconv.FormatUint(r.Uint64N(1<<40), 36)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, []byte(k))
		}
	}
	return keys
}

// nodeSpec is an internal node of a SMART tree: its key prefix (the bytes
// matched when a search reaches its slots), its slot words and its level.
type nodeSpec struct {
	prefix []byte
	slots  []uint64
	level  int
}

func (n nodeSpec) entry() *Entry {
	return NewEntry(uint64(len(n.prefix))<<32|uint64(n.slots[0]), n.slots, n.level)
}

// smartNodes returns the internal nodes of a SMART tree holding keys (each
// terminated by a zero byte, as SMART encodes keys), parents before
// children: a node per branching position, and chain nodes where a
// compressed path is longer than the 6 prefix bytes of a header.
func smartNodes(keys [][]byte) []nodeSpec {
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = append(slices.Clip(k), 0)
	}
	slices.SortFunc(ks, bytes.Compare)
	var out []nodeSpec
	next := uint64(1)
	slotWords := func(bs []byte) []uint64 {
		c := 4
		for c < len(bs) {
			c *= 2
		}
		s := make([]uint64, c)
		for i, b := range bs {
			s[i] = word(b, next)
			next++
		}
		return s
	}
	var build func(lo, hi, d, level int)
	build = func(lo, hi, d, level int) {
		end := d + commonPrefix(string(ks[lo][d:]), ks[hi-1][d:])
		for end-d > 6 { // chain node: 6 header bytes, one child
			d += 6
			out = append(out, nodeSpec{ks[lo][:d], slotWords(ks[lo][d : d+1]), level})
			d, level = d+1, level+1
		}
		var bs []byte
		var starts []int
		for i := lo; i < hi; i++ {
			if i == lo || ks[i][end] != ks[i-1][end] {
				bs, starts = append(bs, ks[i][end]), append(starts, i)
			}
		}
		out = append(out, nodeSpec{ks[lo][:end], slotWords(bs), level})
		starts = append(starts, hi)
		for i := range bs {
			if starts[i+1]-starts[i] > 1 {
				build(starts[i], starts[i+1], end+1, level+1)
			}
		}
	}
	build(0, len(ks), 0, 0)
	slices.SortStableFunc(out, func(a, b nodeSpec) int { return a.level - b.level })
	return out
}
