package rdmadev

import (
	"errors"
	"slices"
	"testing"
)

// TestDevices lists the devices: on a machine without RDMA (like CI) the
// list is empty and there is no error; otherwise every device has sorted
// ports whose counters can be read.
func TestDevices(t *testing.T) {
	devs, err := Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if !hasRDMA() && len(devs) != 0 {
		t.Fatalf("no RDMA class directory, yet %d devices", len(devs))
	}
	for _, d := range devs {
		if d.Name == "" || !slices.IsSorted(d.Ports) {
			t.Errorf("device %+v: empty name or unsorted ports", d)
		}
		for _, p := range d.Ports {
			if _, err := PortCounters(d.Name, p); err != nil {
				t.Errorf("PortCounters(%s, %d): %v", d.Name, p, err)
			}
		}
	}
	t.Logf("%d RDMA devices: %+v", len(devs), devs)
}

// TestPortCountersUnknown asks for a device and ports that do not exist.
func TestPortCountersUnknown(t *testing.T) {
	for _, tc := range []struct {
		dev  string
		port int
	}{{"no-such-device", 1}, {"", 1}, {"no-such-device", 0}} {
		if _, err := PortCounters(tc.dev, tc.port); !errors.Is(err, ErrNoDevice) {
			t.Errorf("PortCounters(%q, %d) = %v, want ErrNoDevice", tc.dev, tc.port, err)
		}
	}
}

func TestParsePorts(t *testing.T) {
	tests := []struct {
		in      []string
		want    []int
		wantErr bool
	}{
		{nil, []int{}, false},
		{[]string{"1"}, []int{1}, false},
		{[]string{"2", "1", "10"}, []int{1, 2, 10}, false},
		{[]string{"1", "x"}, nil, true},
		{[]string{"0"}, nil, true},
	}
	for _, tc := range tests {
		got, err := parsePorts("dev", tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parsePorts(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestSortCounters(t *testing.T) {
	cs := []Counter{
		{Name: "rx_write_requests", Value: 3, HW: true},
		{Name: "port_xmit_data", Value: 1},
		{Name: "out_of_sequence", Value: 4, HW: true},
		{Name: "port_rcv_data", Value: 2},
	}
	sortCounters(cs)
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	want := []string{"port_rcv_data", "port_xmit_data", "out_of_sequence", "rx_write_requests"}
	if !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
}
