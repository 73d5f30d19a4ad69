package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParallelIdentical checks that compare and factor give the same
// results whether their simulated runs execute one at a time or side by
// side.
func TestParallelIdentical(t *testing.T) {
	for _, cmd := range [][]string{
		{"compare", "--indexes", "smart,sherman", "--workloads", "a,c", "--clients", "2,4"},
		{"factor", "--workloads", "a"},
	} {
		var runs [2][]map[string]any
		for i, par := range []string{"1", "2"} {
			args := append(append(append([]string(nil), cmd...), small...), "--json", "--parallel", par)
			var out struct {
				Results []map[string]any `json:"results"`
			}
			text := mustExec(t, args...)
			if cmd[0] == "factor" {
				if err := json.Unmarshal([]byte(text), &out.Results); err != nil {
					t.Fatal(err)
				}
			} else if err := json.Unmarshal([]byte(text), &out); err != nil {
				t.Fatal(err)
			}
			runs[i] = out.Results
		}
		if len(runs[0]) < 4 || !reflect.DeepEqual(runs[0], runs[1]) {
			t.Fatalf("%s: %d results one at a time, %d in parallel, or they differ:\n%v\n%v", cmd[0], len(runs[0]), len(runs[1]), runs[0], runs[1])
		}
	}
}
