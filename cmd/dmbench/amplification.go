package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/dmindex/dmindex/ycsb"
)

// paperAmplification is Table 4.1 of the SMART paper (96-byte objects,
// internal nodes cached): SMART's leaves are ART's. The paper's designs
// write no redo record, so the -noredo variants are the closest to them.
var paperAmplification = map[string][2]float64{
	"smart": {1.10, 1.10}, "smart-noredo": {1.10, 1.10},
	"sherman": {33.0, 1.01}, "sherman-noredo": {33.0, 1.01},
}

// The setup of Table 4.1, amplification's defaults: 32-byte (e-mail) keys
// and 64-byte values, 96-byte objects (SMART §4.3.1, whose 32.1× for
// Sherman docs/sherman-layout.md reproduces).
const (
	paperKeys      = "email"
	paperValueSize = 64
)

// paperSetup reports whether keys and values of valueSize bytes are the
// setup of Table 4.1, whose figures are shown only beside runs of it.
func paperSetup(keys string, valueSize int) bool {
	return keys == paperKeys && valueSize == paperValueSize
}

// amplificationColumns explains the columns of amplification's table.
const amplificationColumns = `columns: object B = key and value bytes per operation (what a read returns, what an update
  writes); read: B moved = bytes read and written per read; read amp. = read: B moved / object B;
  write: B written = bytes written per update; write amp. = write: B written / object B; B moved =
  bytes read and written per update; moved/written = B moved / object B. Both runs choose their keys
  uniformly (no contention).
`

// amplification is one index's measured I/O amplification.
type amplification struct {
	Index string `json:"index"`
	// AppBytes is the key and value bytes per operation the application
	// got back (reads) or handed over (writes).
	ReadAppBytes  float64 `json:"read_app_bytes"`
	WriteAppBytes float64 `json:"write_app_bytes"`
	// Read: bytes moved (read and written) per byte returned by a read.
	ReadMovedBytes float64 `json:"read_moved_bytes"`
	Read           float64 `json:"read"`
	// Write: bytes written per byte written by the application, and bytes
	// moved (read and written) per byte written.
	WriteWrittenBytes float64 `json:"write_written_bytes"`
	Write             float64 `json:"write"`
	WriteMovedBytes   float64 `json:"write_moved_bytes"`
	WriteMoved        float64 `json:"write_moved"`
	// PaperRead and PaperWrite are Table 4.1's factors, given only if the
	// run's keys and values are the paper's (paperSetup).
	PaperRead  *float64 `json:"paper_read,omitempty"`
	PaperWrite *float64 `json:"paper_write,omitempty"`
}

// amplificationCmd is "dmbench amplification": for each index, a read-only
// and an update-only run with uniformly chosen keys (no contention, warm
// caches after the load), and the bytes moved per byte the application
// reads or writes: the paper's Table 4.1, measured.
func amplificationCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := defaultOptions()
	o.keys, o.valueSize = paperKeys, paperValueSize
	o.records, o.ops, o.cns = 50_000, 20_000, 1
	fs := newFlagSet("amplification", "Measures bytes moved per byte returned for reads and writes (the paper's Table 4.1).")
	idxList := fs.String("indexes", "smart,sherman", "comma-separated indexes ("+indexNames(" and ")+")")
	clients := fs.Int("clients", 1, "clients per compute node")
	asJSON := fs.Bool("json", false, "print JSON instead of the table")
	o.register(fs)
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	idx, err := names("indexes", *idxList)
	if err != nil {
		return badUsage(err)
	}
	reads := ycsb.Workload{Name: "read-only", Read: 1, Distribution: ycsb.DistUniform}
	writes := ycsb.Workload{Name: "update-only", Update: 1, Distribution: ycsb.DistUniform}
	var cfgs []ycsb.Config
	var total int64
	for _, name := range idx {
		for _, w := range []ycsb.Workload{reads, writes} {
			cfg, err := o.config(name, w, *clients)
			if err != nil {
				return badUsage(err)
			}
			cfgs = append(cfgs, cfg)
			total += phaseOps(cfg)
		}
	}
	if err := o.checkTotalRuntime(cfgs); err != nil {
		return err
	}
	bar := newProgress(stderr, total)
	var rows []amplification
	for i := 0; i < len(cfgs); i += 2 {
		var res [2]*ycsb.Result
		for j := range res {
			cfg := cfgs[i+j]
			bar.track(&cfg, cfg.Index+" "+cfg.Workload.Name)
			r, err := ycsb.Run(ctx, cfg)
			if err != nil {
				bar.finish()
				return fmt.Errorf("%s %s: %w", cfg.Index, cfg.Workload.Name, err)
			}
			if r.Errors > 0 {
				bar.finish()
				return fmt.Errorf("%s %s: %d operations failed; first: %s", cfg.Index, cfg.Workload.Name, r.Errors, r.FirstError)
			}
			res[j] = r
		}
		rows = append(rows, amplificationOf(res[0], res[1]))
	}
	bar.finish()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	o.describeSetup(stdout, []ycsb.Workload{reads, writes}, []int{*clients}, false)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "index\tobject B\tread: B moved\tread amp.\tpaper\twrite: B written\twrite amp.\tpaper\tB moved\tmoved/written\t")
	for _, a := range rows {
		pr, pw := "-", "-"
		if a.PaperRead != nil {
			pr, pw = fmt.Sprintf("%.2f", *a.PaperRead), fmt.Sprintf("%.2f", *a.PaperWrite)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f\t%s\t%.1f\t%.2f\t%s\t%.1f\t%.2f\t\n", a.Index, a.ReadAppBytes,
			a.ReadMovedBytes, a.Read, pr, a.WriteWrittenBytes, a.Write, pw, a.WriteMovedBytes, a.WriteMoved)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	legend(stdout, amplificationColumns, o.paperAmplificationNote(idx))
	return nil
}

// paperAmplificationNote is the note on the paper columns of a run of the
// indexes idx: empty if Table 4.1 has none of them, else the paper's setup
// and, unless the run's is the same, that its figures are not shown.
func (o *options) paperAmplificationNote(idx []string) string {
	if !slices.ContainsFunc(idx, func(name string) bool { _, ok := paperAmplification[name]; return ok }) {
		return ""
	}
	if !paperSetup(o.keys, o.valueSize) {
		return fmt.Sprintf(`paper = "-": Table 4.1 of the SMART paper measured %s
  and %d-byte values (96-byte objects), not %s and %d-byte values as this run, and
  amplification depends on the sizes; --keys %s --value-size %d (the defaults) sets the paper's
  figures beside the measured ones.
`, describeKeys(paperKeys), paperValueSize, describeKeys(o.keys), o.valueSize, paperKeys, paperValueSize)
	}
	return fmt.Sprintf(`paper = Table 4.1 of the SMART paper, measured with %s and %d-byte values
  (96-byte objects), internal nodes cached, on ConnectX-6 NICs; this run: %d records, %d operations.
  SMART and Sherman here write a redo record before every in-place write (a crashed client leaves no
  torn leaf), which the paper's designs do not: the write figures include it; --indexes
  smart,smart-noredo,sherman,sherman-noredo measures them without it too.
`, describeKeys(paperKeys), paperValueSize, o.records, o.ops)
}

// amplificationOf derives the factors of one index from its read-only and
// update-only runs.
func amplificationOf(read, write *ycsb.Result) amplification {
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	a := amplification{
		Index:             read.Index,
		ReadAppBytes:      read.AppBytesPerOp,
		WriteAppBytes:     write.AppBytesPerOp,
		ReadMovedBytes:    read.ReadBytesPerOp + read.WriteBytesPerOp,
		WriteWrittenBytes: write.WriteBytesPerOp,
		WriteMovedBytes:   write.ReadBytesPerOp + write.WriteBytesPerOp,
	}
	a.Read = div(a.ReadMovedBytes, a.ReadAppBytes)
	a.Write = div(a.WriteWrittenBytes, a.WriteAppBytes)
	a.WriteMoved = div(a.WriteMovedBytes, a.WriteAppBytes)
	if p, ok := paperAmplification[a.Index]; ok && paperSetup(read.Keys, read.ValueSize) {
		a.PaperRead, a.PaperWrite = &p[0], &p[1]
	}
	return a
}
