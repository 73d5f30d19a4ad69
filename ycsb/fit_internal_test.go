package ycsb

import (
	"runtime"
	"testing"
)

func TestHistogramBytes(t *testing.T) {
	if got := newHist().ByteSize(); got != histogramBytes {
		t.Errorf("a histogram takes %d bytes, histogramBytes is %d", got, histogramBytes)
	}
}

func TestSystemMemory(t *testing.T) {
	m := systemMemory()
	if runtime.GOOS != "linux" && m.total == 0 {
		t.Skipf("no memory figures on %s", runtime.GOOS)
	}
	if m.available <= 0 || m.total < m.available || m.source == "" {
		t.Errorf("systemMemory() = %+v, want 0 < available <= total and a source", m)
	}
}

func TestQuoteKey(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{nil, `""`},
		{[]byte("com.gmail@john"), `"com.gmail@john"`},
		{[]byte("ünïcode"), `"ünïcode"`},
		{[]byte{0x57, 0x84, 0x92, 0x70}, "0x57849270"},
		{[]byte("tab\there"), "0x7461620968657265"},
		{[]byte{'a', 0}, "0x6100"},
	} {
		if got := quoteKey(c.key); got != c.want {
			t.Errorf("quoteKey(%q) = %s, want %s", c.key, got, c.want)
		}
	}
}
