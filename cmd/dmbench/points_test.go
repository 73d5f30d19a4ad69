package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/dmindex/dmindex/ycsb"
)

// TestParallelIdentical checks that compare and factor give byte-identical
// results whether their simulated runs execute one at a time or side by
// side.
func TestParallelIdentical(t *testing.T) {
	for _, cmd := range [][]string{
		{"compare", "--indexes", "smart,sherman", "--workloads", "a,c", "--clients", "2,4"},
		{"factor", "--workloads", "a"},
	} {
		var runs [2]json.RawMessage
		for i, par := range []string{"1", "2"} {
			args := append(append(append([]string(nil), cmd...), small...), "--json", "--parallel", par)
			text := mustExec(t, args...)
			if cmd[0] == "factor" {
				runs[i] = json.RawMessage(text) // the results alone
				continue
			}
			var out struct {
				Results json.RawMessage `json:"results"` // without the command, which names --parallel
			}
			if err := json.Unmarshal([]byte(text), &out); err != nil {
				t.Fatal(err)
			}
			runs[i] = out.Results
		}
		var results []map[string]any
		if err := json.Unmarshal(runs[0], &results); err != nil {
			t.Fatal(err)
		}
		if len(results) < 4 || !bytes.Equal(runs[0], runs[1]) {
			t.Fatalf("%s: %d results one at a time, or they differ in parallel:\n%s\n%s", cmd[0], len(results), runs[0], runs[1])
		}
	}
}

// TestSharedLoadIdentical checks that compare's points, which share one
// load phase per index and client count, give byte for byte what
// `dmbench run` gives for each of them alone, and that the points of the
// real trees are grouped (the test indexes, whose state is in the Go heap,
// are not).
func TestSharedLoadIdentical(t *testing.T) {
	for _, extra := range [][]string{nil, {"--load-clients", "2"}} {
		sharedLoadIdentical(t, extra)
	}

	cfgs := make([]ycsb.Config, 0, 6)
	for _, name := range []string{"smart", "sherman", "mem"} {
		for _, w := range []string{"a", "c"} {
			wl, err := ycsb.Preset(w)
			if err != nil {
				t.Fatal(err)
			}
			cfgs = append(cfgs, ycsb.Config{Index: name, Open: indexes[name].open(), Workload: wl, Records: 100, Ops: 10})
		}
	}
	inPool := func(cfg ycsb.Config) bool { return indexes[cfg.Index].inPool }
	if got := loadGroups(cfgs, inPool); !reflect.DeepEqual(got, [][]int{{0, 1}, {2, 3}, {4}, {5}}) {
		t.Errorf("load groups %v", got)
	}
}

// sharedLoadIdentical runs compare with extra flags and each of its points
// alone, and compares their JSON.
func sharedLoadIdentical(t *testing.T, extra []string) {
	args := append([]string{"compare", "--indexes", "smart,sherman", "--workloads", "load,a,e", "--clients", "1,3", "--json"}, small[:6]...)
	var cmp struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal([]byte(mustExec(t, append(args, extra...)...)), &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Results) != 12 {
		t.Fatalf("%v: %d results, want 12", extra, len(cmp.Results))
	}
	for _, raw := range cmp.Results {
		var r struct {
			Index, Workload string
			Clients         int
			LoadClients     int `json:"load_clients"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		want := 0 // load_clients is left out where it equals clients
		if extra != nil && r.Workload != "load" && r.Clients != 2 {
			want = 2
		}
		if r.LoadClients != want {
			t.Errorf("%v: %s on %s with %d clients: load_clients %d, want %d", extra, r.Index, r.Workload, r.Clients, r.LoadClients, want)
		}
		alone := mustExec(t, append(append([]string{"run", "--index", r.Index, "--workload", r.Workload, "--clients", strconv.Itoa(r.Clients), "--json"}, small[:6]...), extra...)...)
		var a, b bytes.Buffer
		if err := json.Compact(&a, raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&b, []byte(alone)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%v: %s on %s with %d clients: compare gives\n%s\nrun gives\n%s", extra, r.Index, r.Workload, r.Clients, a.Bytes(), b.Bytes())
		}
	}
}
