package main

import (
	"bytes"
	"encoding/json"
	"testing"
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
