//go:build fabric

package fabric

import (
	"slices"
	"strings"
)

// parseProviders parses fs_list's lines "prov\tfabric\tdomain", dropping
// duplicates and keeping the first occurrence's position.
func parseProviders(s string) []ProviderInfo {
	var out []ProviderInfo
	for line := range strings.Lines(s) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 3 {
			continue
		}
		p := ProviderInfo{Provider: f[0], Fabric: f[1], Domain: f[2]}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
