package ycsb

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReadTrace parses an index-microbench trace: one operation per line,
// "INSERT <key>", "READ <key>", "UPDATE <key>" or "SCAN <key> <len>",
// fields separated by white space, keys in the text form of keys (see
// KeyType.FormatKey). Blank lines are skipped. The error names the first bad
// line; a trace without operations (empty, or blank lines only) is an
// error too. Returned keys are owned by the caller.
func ReadTrace(r io.Reader, keys KeyType) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		op, err := parseTraceLine(f, keys)
		if err != nil {
			return nil, fmt.Errorf("ycsb: trace line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ycsb: reading trace: %w", err)
	}
	if len(ops) == 0 {
		return nil, errors.New("ycsb: the trace has no operations (empty, or blank lines only)")
	}
	return ops, nil
}

func parseTraceLine(f []string, keys KeyType) (Op, error) {
	var op Op
	want := 2
	switch f[0] {
	case "INSERT":
		op.Kind = OpInsert
	case "READ":
		op.Kind = OpRead
	case "UPDATE":
		op.Kind = OpUpdate
	case "SCAN":
		op.Kind, want = OpScan, 3
	default:
		return op, fmt.Errorf("unknown operation %q (want INSERT, READ, UPDATE or SCAN)", f[0])
	}
	if len(f) != want {
		return op, fmt.Errorf("%s wants %d fields, got %d", f[0], want, len(f))
	}
	key, err := keys.ParseKey(f[1])
	if err != nil {
		return op, err
	}
	op.Key = key
	if op.Kind == OpScan {
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 1 {
			return op, fmt.Errorf("scan length %q is not a positive integer", f[2])
		}
		op.ScanLength = n
	}
	return op, nil
}

// WriteTrace writes ops in the index-microbench format read by ReadTrace. A
// READ-MODIFY-WRITE, which the format lacks, is written as a READ followed
// by an UPDATE of the same key.
func WriteTrace(w io.Writer, keys KeyType, ops []Op) error {
	bw := bufio.NewWriter(w)
	for _, op := range ops {
		k := keys.FormatKey(op.Key)
		switch op.Kind {
		case OpScan:
			fmt.Fprintf(bw, "SCAN %s %d\n", k, op.ScanLength)
		case OpReadModifyWrite:
			fmt.Fprintf(bw, "READ %s\nUPDATE %s\n", k, k)
		case OpRead, OpUpdate, OpInsert:
			fmt.Fprintf(bw, "%s %s\n", op.Kind, k)
		default:
			return fmt.Errorf("ycsb: cannot write operation %v to a trace", op.Kind)
		}
	}
	return bw.Flush()
}
