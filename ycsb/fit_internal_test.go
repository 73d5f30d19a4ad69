package ycsb

import (
	"context"
	"runtime"
	"strings"
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

// An operation of an unknown kind fails unmeasured (it indexed the
// histograms out of range); Validate keeps such operations out of traces.
func TestExecUnknownKind(t *testing.T) {
	hs := new(histSet)
	app, err := new(runner).exec(context.Background(), nil, hs, nil, Op{Kind: numOpKinds, Key: []byte("k")}, nil, 0)
	if err == nil || !strings.Contains(err.Error(), "unknown operation kind OpKind(5)") || app != 0 {
		t.Errorf("exec of OpKind(5) = %d, %v; want 0 and an error naming the kind", app, err)
	}
	if hs.overall != nil {
		t.Error("exec measured an operation of an unknown kind")
	}
}
