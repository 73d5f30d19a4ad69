package ycsb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxTraceLine is the longest line of a trace that ReadTrace reads, its
// newline included (the limit of its bufio.Scanner).
const maxTraceLine = 1 << 20

// ReadTrace parses an index-microbench trace: one operation per line,
// "INSERT <key>", "READ <key>", "UPDATE <key>" or "SCAN <key> <len>",
// fields separated by white space, keys in the text form of keys (see
// KeyType.FormatKey), lines of at most 1 MiB. Blank lines are skipped. The
// error names the first bad line; a trace without operations (empty, or
// blank lines only) is an error too. Returned keys are owned by the caller.
func ReadTrace(r io.Reader, keys KeyType) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxTraceLine)
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

// WriteTrace writes ops in the index-microbench format, which ReadTrace
// reads back as ops, keys in the text form of keys (KeyType.FormatKey). A
// READ-MODIFY-WRITE, which the format lacks, is written as a READ followed
// by an UPDATE of the same key; ScanLength is written for SCANs only. It
// checks every operation before it writes anything: one that ReadTrace
// would not read back as it is (a kind outside OpRead to
// OpReadModifyWrite, a SCAN of fewer than 1 pair, a key that is not one of
// keys, a line longer than ReadTrace reads) is an error that names its
// index in ops and the cause, and nothing is written. Without operations
// it writes nothing, which ReadTrace refuses as a trace without operations
// (the outputs of several calls may be concatenated).
func WriteTrace(w io.Writer, keys KeyType, ops []Op) error {
	var line []byte
	for i := range ops {
		var err error
		if line, err = appendTraceOp(line[:0], keys, &ops[i]); err != nil {
			return fmt.Errorf("ycsb: cannot write ops[%d] to a trace: %w", i, err)
		}
	}
	bw := bufio.NewWriter(w)
	for i := range ops {
		line, _ = appendTraceOp(line[:0], keys, &ops[i]) // checked above
		bw.Write(line)
	}
	return bw.Flush()
}

// appendTraceOp appends the trace lines of op to dst, or returns why
// ReadTrace would not read them back as op.
func appendTraceOp(dst []byte, keys KeyType, op *Op) ([]byte, error) {
	if err := op.check(); err != nil {
		return dst, err
	}
	if err := keys.checkKey(op.Key); err != nil {
		return dst, err
	}
	start, k := len(dst), keys.FormatKey(op.Key)
	switch op.Kind {
	case OpScan:
		dst = fmt.Appendf(dst, "SCAN %s %d\n", k, op.ScanLength)
	case OpReadModifyWrite:
		dst = fmt.Appendf(dst, "READ %s\nUPDATE %s\n", k, k)
	default:
		dst = fmt.Appendf(dst, "%s %s\n", op.Kind, k)
	}
	for l := range bytes.Lines(dst[start:]) {
		if len(l) > maxTraceLine {
			return dst, fmt.Errorf("a line of %d bytes, more than ReadTrace reads (%d)", len(l), maxTraceLine)
		}
	}
	return dst, nil
}
