package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/dmindex/dmindex/ycsb"
)

// describeSetup prints what the runs of a command (compare,
// amplification) are: the workloads ws at each client count of clients,
// records, operations and warm-up per run, whether runs with the same load
// share it (sharedLoads: runPoints), the cluster, the keys and values, and
// the transport, so that no figure is printed without its setup.
func (o *options) describeSetup(w io.Writer, ws []ycsb.Workload, clients []int, sharedLoads bool) {
	var names []string
	skewed := false
	for _, wl := range ws {
		names = append(names, wl.Name)
		skewed = skewed || !wl.LoadOnly && (wl.Distribution == ycsb.DistZipfian || wl.Distribution == ycsb.DistLatest)
	}
	warm := "the default warm-up (--records × --cns)"
	switch {
	case o.warmup < 0:
		warm = "no warm-up"
	case o.warmup > 0:
		warm = fmt.Sprintf("%d warm-up operations", o.warmup)
	case o.warmupKeys > 0:
		warm = fmt.Sprintf("a warm-up of %d keys' worth (a scan counts its mean length)", o.warmupKeys)
	case o.records > 0:
		warm = fmt.Sprintf("a warm-up of %d keys' worth (a scan counts its mean length)", ycsb.DefaultWarmup(o.records, o.cns))
	}
	var cl []string
	for _, c := range clients {
		cl = append(cl, fmt.Sprint(c))
	}
	theta := ""
	if skewed {
		theta = fmt.Sprintf(" (Zipfian θ %.2f where the workload is skewed)", o.zipf)
	}
	fmt.Fprintf(w, "setup: YCSB %s, %d records of %s and %d-byte values%s\n",
		strings.Join(names, ", "), o.records, describeKeys(o.keys), o.valueSize, theta)
	load := "load"
	if o.loadClients > 0 {
		load = fmt.Sprintf("load (by %d clients per compute node, whatever the run's)", o.loadClients)
	}
	if o.compact {
		load += " and one compaction (--compact)"
	}
	fmt.Fprintf(w, "       per run: %s, %s (not measured), then %d measured operations\n", load, warm, o.ops)
	if sharedLoads {
		fmt.Fprintf(w, "       each run starts from its loaded index with cold caches; runs with the same load share it\n")
	} else {
		fmt.Fprintf(w, "       each run loads its own index and starts from it with cold caches\n")
	}
	fmt.Fprintf(w, "       %d memory nodes × %d compute nodes × {%s} clients per compute node, %.0f MiB cache per compute node\n",
		o.mns, o.cns, strings.Join(cl, ", "), o.cacheMB)
	if o.mode == "sim" {
		fmt.Fprintf(w, "       simulated RNICs (%s profile, %s ordering): times are virtual, exact and repeatable, not this machine's\n",
			o.nic, o.ordering)
	} else {
		fmt.Fprintf(w, "       mode %s: times are this machine's wall clock\n", o.mode)
	}
	fmt.Fprintln(w)
}

// describeKeys names the keys of --keys keys: "8-byte integer keys" or
// "e-mail keys (at most 32 bytes)".
func describeKeys(keys string) string {
	if keys == "email" {
		return "e-mail keys (at most 32 bytes)"
	}
	return "8-byte integer keys"
}

// legend prints, after a table, what its columns mean (columns) and then
// paper, the note on the paper's figures shown beside them (none if
// empty).
func legend(w io.Writer, columns, paper string) {
	fmt.Fprint(w, "\n"+columns+paper)
}

// compareColumns explains the columns of compare's table.
const compareColumns = `columns: Mops/s = million operations per second; p50/p99 µs = latency percentiles; rtt/op = round
  trips (signaled doorbell batches) per operation; verbs/op = one-sided READ/WRITE/CAS/FAA per
  operation; read/write B/op = bytes moved per operation; cache hit = share of Get/Put/Delete that
  reached their leaf without reading an internal node; MN iops / MN bw = the busiest memory node's
  NIC verb rate and bandwidth as shares of their limits (near 100%: the memory nodes saturate, the
  ratio is the system's); errors = failed operations.
ratio = peak throughput over the client counts, first index over the other.
`

// paperRatiosNote is the note on compare's paper ratios: how the paper's
// setup differs from this one.
func (o *options) paperRatiosNote() string {
	return fmt.Sprintf(`paper = SMART/Sherman in the SMART paper (Fig. 4.10, integer keys), measured with 60 M records
  and 60 M operations, 2 memory nodes and 16 compute nodes with up to 56 clients each (896), 8-byte
  values, on ConnectX-6 NICs. This run: %d records, %d operations, %d memory nodes × %d compute nodes,
  a simulated ConnectX-6. Smaller trees cache better and load the NICs differently, so the ratios
  need not match; docs/results has the comparison at larger scales. Both indexes here survive
  crashed clients: every in-place write is preceded by a redo record (one more WRITE verb, no
  round trip), which the paper's designs do not write; --indexes smart-noredo,sherman-noredo
  runs them without it.
`, o.records, o.ops, o.mns, o.cns)
}
