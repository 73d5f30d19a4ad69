package ycsb

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// platformMemory reads MemTotal and MemAvailable from /proc/meminfo, falls
// back to sysinfo(2) (free and buffer memory), and lowers both to the
// memory.max of the process's cgroup (v2) if it sets one.
func platformMemory() memory {
	m := procMeminfo()
	if m.total == 0 || m.available == 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			unit := int64(max(si.Unit, 1))
			m = memory{total: int64(si.Totalram) * unit, available: int64(si.Freeram+si.Bufferram) * unit, source: "sysinfo(2)"}
		}
	}
	if limit, used, ok := cgroupMemory(); ok {
		if m.total == 0 || limit < m.total {
			m.total = limit
		}
		if m.available == 0 || limit-used < m.available {
			m.available, m.source = limit-used, "cgroup memory.max"
		}
	}
	return m
}

// procMeminfo parses /proc/meminfo; fields it cannot read stay 0.
func procMeminfo() memory {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return memory{}
	}
	m := memory{source: "/proc/meminfo"}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemTotal":
			m.total = kb << 10
		case "MemAvailable":
			m.available = kb << 10
		}
	}
	return m
}

// cgroupMemory returns memory.max and memory.current of the process's
// cgroup v2, if it has a limit.
func cgroupMemory() (limit, used int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	path, found := strings.CutPrefix(strings.TrimSpace(string(b)), "0::")
	if !found || strings.Contains(path, "\n") {
		return 0, 0, false // cgroup v1 or a hybrid hierarchy
	}
	dir := "/sys/fs/cgroup" + path
	limit, err = readInt(dir + "/memory.max")
	if err != nil {
		return 0, 0, false // "max": no limit
	}
	used, err = readInt(dir + "/memory.current")
	if err != nil {
		return 0, 0, false
	}
	return limit, min(used, limit), true
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
