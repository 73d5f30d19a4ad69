package ycsb

import (
	"bytes"
	"strings"
	"testing"
)

func TestFNVHash64(t *testing.T) {
	// Values of YCSB's Utils.fnvhash64 (FNV-1a over the little-endian bytes,
	// then Math.abs).
	for _, c := range []struct{ in, want uint64 }{
		{0, 6284781860667377211},
		{1, 8517097267634966620},
		{2, 1820151046732198393},
		{42, 55488592825689361},
		{1000000, 1011632231655643464},
		{1<<40 + 7, 6089181255519459853},
	} {
		if got := FNVHash64(c.in); got != c.want {
			t.Errorf("FNVHash64(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestIntKeysOrderAndRoundTrip(t *testing.T) {
	prev := KeyInt.AppendKey(nil, 0)
	for _, v := range []uint64{1, 255, 256, 1 << 32, 1<<63 - 1, 1<<64 - 1} {
		k := KeyInt.AppendKey(nil, v)
		if len(k) != 8 || bytes.Compare(prev, k) >= 0 {
			t.Fatalf("key(%d) = %x: not 8 bytes or not above %x", v, k, prev)
		}
		s := KeyInt.FormatKey(k)
		back, err := KeyInt.ParseKey(s)
		if err != nil || !bytes.Equal(back, k) {
			t.Fatalf("ParseKey(FormatKey(%x)) = %x, %v", k, back, err)
		}
		prev = k
	}
	if _, err := KeyInt.ParseKey("-1"); err == nil {
		t.Error("ParseKey(-1) succeeded")
	}
}

// A key that is not one of its type is formatted as a text ParseKey
// rejects (KeyInt.FormatKey returned the bytes of a key not 8 bytes long:
// "12" read back as the key of 12), and ParseKey takes no token that
// ReadTrace would split.
func TestKeysNotOfTheType(t *testing.T) {
	for _, c := range []struct {
		keys KeyType
		key  []byte
		want string
	}{
		{KeyInt, []byte{1, 2}, "0x0102"},
		{KeyInt, []byte("12"), `"12"`},
		{KeyInt, nil, `""`},
		{KeyInt, make([]byte, 9), "0x000000000000000000"},
		{KeyEmail, []byte("a b"), "a b"},
		{KeyEmail, nil, ""},
		{KeyEmail, []byte("a\u00a0b"), "a\u00a0b"},
		{KeyEmail, []byte("a\u2028b"), "a\u2028b"},
	} {
		s := c.keys.FormatKey(c.key)
		if s != c.want {
			t.Errorf("%v.FormatKey(%q) = %q, want %q", c.keys, c.key, s, c.want)
		}
		if back, err := c.keys.ParseKey(s); err == nil {
			t.Errorf("%v.ParseKey(FormatKey(%q)) = %q, want an error", c.keys, c.key, back)
		}
	}
}

func TestEmailKeys(t *testing.T) {
	// Names must be prefix-free, or name+digits could collide.
	for i, a := range emailNames {
		for j, b := range emailNames {
			if i != j && strings.HasPrefix(b, a) {
				t.Fatalf("name %q is a prefix of %q", a, b)
			}
		}
	}
	seen := make(map[string]uint64)
	for n := range uint64(100000) {
		v := FNVHash64(n)
		k := string(KeyEmail.AppendKey(nil, v))
		if len(k) > EmailMaxLen {
			t.Fatalf("email(%d) = %q is longer than %d", v, k, EmailMaxLen)
		}
		host, _, ok := strings.Cut(k, "@")
		if !ok || !strings.Contains(host, ".") {
			t.Fatalf("email(%d) = %q is not host@user", v, k)
		}
		if o, dup := seen[k]; dup {
			t.Fatalf("email(%d) = email(%d) = %q", v, o, k)
		}
		seen[k] = v
		back, err := KeyEmail.ParseKey(KeyEmail.FormatKey([]byte(k)))
		if err != nil || string(back) != k {
			t.Fatalf("round trip of %q: %q, %v", k, back, err)
		}
	}
	if got := string(KeyEmail.AppendKey(nil, 0)); got != "com.gmail@john0" {
		t.Errorf("email(0) = %q", got)
	}
	if k := KeyEmail.AppendKey(nil, 1<<64-1); len(k) > EmailMaxLen {
		t.Errorf("email(max) = %q is longer than %d", k, EmailMaxLen)
	}
}

func FuzzEmailKeysDistinct(f *testing.F) {
	f.Add(uint64(0), uint64(1))
	f.Add(uint64(1<<10), uint64(1<<4))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		ka, kb := KeyEmail.AppendKey(nil, a), KeyEmail.AppendKey(nil, b)
		if len(ka) > EmailMaxLen || len(kb) > EmailMaxLen {
			t.Fatalf("too long: %q %q", ka, kb)
		}
		if (a == b) != bytes.Equal(ka, kb) {
			t.Fatalf("email(%d) = %q, email(%d) = %q", a, ka, b, kb)
		}
	})
}

func TestParseKeyType(t *testing.T) {
	for s, want := range map[string]KeyType{"int": KeyInt, "randint": KeyInt, "email": KeyEmail} {
		if got, err := ParseKeyType(s); err != nil || got != want {
			t.Errorf("ParseKeyType(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseKeyType("string"); err == nil {
		t.Error(`ParseKeyType("string") succeeded`)
	}
}
