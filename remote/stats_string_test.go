package remote

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestStatsString(t *testing.T) {
	for _, c := range []struct {
		s    Stats
		want string
	}{
		{Stats{}, "reads=0 (0 B) writes=0 (0 B) cas=0 (0 failed) faa=0 round_trips=0 unsignaled=0 rpcs=0 alloc=0 B freed=0 B"},
		{Stats{Reads: 5, ReadBytes: 4096, Writes: 3, WriteBytes: 96, CASes: 2, CASFailures: 1, FAAs: 1, RoundTrips: 7, Unsignaled: 1, RPCs: 1, AllocBytes: 640, FreedBytes: 64},
			"reads=5 (4096 B) writes=3 (96 B) cas=2 (1 failed) faa=1 round_trips=7 unsignaled=1 rpcs=1 alloc=640 B freed=64 B"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.s, got, c.want)
		}
	}
	// Every counter appears: a field added to Stats must be added to String.
	var s Stats
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(1000 + i))
	}
	str := s.String()
	for i := range v.NumField() {
		if n := strings.Count(str, strconv.Itoa(1000+i)); n != 1 {
			t.Errorf("String() shows %s (%d) %d times: %s", v.Type().Field(i).Name, 1000+i, n, str)
		}
	}
}
