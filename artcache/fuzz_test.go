package artcache

import "testing"

// FuzzOps decodes a sequence of operations (op byte, length byte, prefix
// bytes) and checks them against a map of the entries that must be cached.
func FuzzOps(f *testing.F) {
	f.Add([]byte("\x00\x03abc\x00\x02ab\x02\x04abca\x01\x02ab\x02\x04abca"), false)
	f.Add([]byte("\x00\x00\x00\x01a\x00\x02a\x00\x02\x03a\x00a"), true)
	f.Fuzz(func(t *testing.T, data []byte, hash bool) {
		c := New(Options{Hash: hash, Bytes: 1 << 40})
		oracle := make(map[string]*Entry)
		for len(data) >= 2 {
			op, n := data[0]%4, min(int(data[1]%16), len(data)-2)
			p := data[2 : 2+n]
			data = data[2+n:]
			switch op {
			case 0:
				e := NewEntry(0, []uint64{word('a', 1), word(0, 2), word(byte(n), 3), 0}, 0)
				c.Insert(p, e)
				oracle[string(p)] = e
			case 1:
				c.Invalidate(p, oracle[string(p)])
				delete(oracle, string(p))
			case 2:
				e, idx, plen, ok := c.Lookup(p)
				we, widx, wplen, wok := bruteLookup(oracle, p)
				if !sameResult(e, idx, plen, ok, we, widx, wplen, wok) {
					t.Fatalf("Lookup(%q) = (%v, %d, %d, %v), want (%v, %d, %d, %v)", p, e, idx, plen, ok, we, widx, wplen, wok)
				}
			case 3:
				if e, _ := c.Get(p); e != oracle[string(p)] {
					t.Fatalf("Get(%q) = %v, want %v", p, e, oracle[string(p)])
				}
			}
		}
		checkSame(t, c.contents(t), oracle)
	})
}
