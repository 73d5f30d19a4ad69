package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dmindex/dmindex/ycsb"
)

// genCmd is "dmbench gen": the workload's load and transaction phases as
// index-microbench trace files, named as index-microbench names them
// (load_<randint|email>_workload<x>, txn_…), for replay with dmbench run
// --load-trace/--run-trace or by other tools. The transactions are one
// client's stream with every insert acknowledged at once.
func genCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gen", "Writes a workload as index-microbench trace files.")
	workload := fs.String("workload", "a", "workload: load, a, b, c, d, e, f, la, or N-")
	keysFlag := fs.String("keys", "int", "key type: int or email")
	records := fs.Uint64("records", 100_000, "records of the load file")
	ops := fs.Uint64("ops", 100_000, "operations of the transaction file")
	zipf := fs.Float64("zipf", ycsb.DefaultZipfTheta, "Zipfian constant θ, 0 < θ < 1")
	seed := fs.Uint64("seed", 1, "seed of the transaction stream")
	out := fs.String("out", ".", "directory to write the files to")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if err := checkZipf(*zipf); err != nil {
		return badUsage(err)
	}
	w, err := ycsb.Preset(*workload)
	if err != nil {
		return badUsage(err)
	}
	w.ZipfTheta = *zipf
	keys, err := ycsb.ParseKeyType(*keysFlag)
	if err != nil {
		return badUsage(err)
	}
	g, err := ycsb.NewGenerator(w, keys, *records, *ops)
	if err != nil {
		return badUsage(err)
	}
	kt := map[ycsb.KeyType]string{ycsb.KeyInt: "randint", ycsb.KeyEmail: "email"}[keys]
	suffix := kt + "_workload" + w.Name
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	load := filepath.Join(*out, "load_"+suffix)
	if err := writeTraceFile(load, keys, *records, func(n uint64) ycsb.Op { return g.LoadOp(nil, n) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, load)
	if w.LoadOnly {
		return nil
	}
	s := g.Stream(*seed)
	txn := filepath.Join(*out, "txn_"+suffix)
	if err := writeTraceFile(txn, keys, *ops, func(uint64) ycsb.Op {
		op := s.Next()
		g.Ack(op)
		op.Key = bytes.Clone(op.Key)
		return op
	}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, txn)
	return nil
}

// writeTraceFile writes n operations made by next to path.
func writeTraceFile(path string, keys ycsb.KeyType, n uint64, next func(uint64) ycsb.Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	batch := make([]ycsb.Op, 0, 4096)
	for i := range n {
		batch = append(batch, next(i))
		if len(batch) == cap(batch) || i == n-1 {
			if err := ycsb.WriteTrace(bw, keys, batch); err != nil {
				f.Close()
				return err
			}
			batch = batch[:0]
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
