package rdmadev

import (
	"os"
	"slices"
	"testing"

	"github.com/Mellanox/rdmamap"
)

// hasRDMA reports whether the kernel lists RDMA devices at all.
func hasRDMA() bool {
	_, err := os.Stat(rdmamap.RdmaClassDir)
	return err == nil
}

func TestCounters(t *testing.T) {
	got := counters(
		[]rdmamap.RdmaStatEntry{{Name: "port_xmit_data", Value: 7}},
		[]rdmamap.RdmaStatEntry{{Name: "rx_atomic_requests", Value: 9}, {Name: "duplicate_request", Value: 1}},
	)
	want := []Counter{
		{Name: "port_xmit_data", Value: 7},
		{Name: "duplicate_request", Value: 1, HW: true},
		{Name: "rx_atomic_requests", Value: 9, HW: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("counters = %+v, want %+v", got, want)
	}
}
