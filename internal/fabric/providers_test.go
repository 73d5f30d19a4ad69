//go:build fabric

package fabric

import (
	"os"
	"slices"
	"testing"
)

// TestProviders finds the sockets provider on the loopback interface, which
// every Linux machine with libfabric has.
func TestProviders(t *testing.T) {
	ps, err := Providers()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ps, func(p ProviderInfo) bool { return p.Provider == "sockets" && p.Domain == "lo" }) {
		t.Errorf("no sockets provider on lo in %+v", ps)
	}
	if major, minor := Version(); major < 1 || major == 1 && minor < 17 {
		t.Errorf("libfabric %d.%d, want >= 1.17", major, minor)
	}
}

func TestParseProviders(t *testing.T) {
	tests := []struct {
		in   string
		want []ProviderInfo
	}{
		{"", nil},
		{"sockets\t127.0.0.1/32\tlo\n", []ProviderInfo{{"sockets", "127.0.0.1/32", "lo"}}},
		{"verbs\tIB-0xfe80\tmlx5_0\nsockets\tf\tlo\nverbs\tIB-0xfe80\tmlx5_0\n",
			[]ProviderInfo{{"verbs", "IB-0xfe80", "mlx5_0"}, {"sockets", "f", "lo"}}},
		{"malformed line\nsockets\tf\tlo", []ProviderInfo{{"sockets", "f", "lo"}}},
	}
	for _, tc := range tests {
		if got := parseProviders(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("parseProviders(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestSocketsWaitTime checks that Listen and Dial set FI_SOCKETS_PE_WAITTIME
// to 0 when the environment leaves it unset.
func TestSocketsWaitTime(t *testing.T) {
	s, _ := startServer(t, 4096)
	dial(t, s.Addr())
	if v := os.Getenv("FI_SOCKETS_PE_WAITTIME"); v != "0" && !presetWaitTime {
		t.Errorf("FI_SOCKETS_PE_WAITTIME=%q, want 0", v)
	}
}
