// Package shmtest holds the multi-process tests of the indexes on the
// shared-memory transport (remote.ShmConfig): the test binary re-executes
// itself (internal/childtest) so that several processes map one pool's
// memory-node files and share one SMART or Sherman tree by name.
package shmtest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dmindex/dmindex/internal/childtest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
	"github.com/dmindex/dmindex/smart"
)

// treeName is the name every process opens its tree under.
const treeName = "shared"

// indexKind is an index the tests run on.
type indexKind struct {
	name string
	// open opens the tree called treeName on cn; retryBudget 0 keeps the
	// index's default.
	open   func(cn *remote.ComputeNode, retryBudget int) (smart.Index, error)
	verify func(ctx context.Context, idx smart.Index) error
	// crashLeft reports whether a Verify error is what a process killed
	// inside a critical section leaves, which the crash-recovery issue
	// covers: a lock held by no live process, and what it guarded.
	crashLeft func(err error) bool
}

var kinds = []indexKind{
	{
		name: "smart",
		open: func(cn *remote.ComputeNode, budget int) (smart.Index, error) {
			return smart.Open(cn, smart.Options{Name: treeName, RetryBudget: budget})
		},
		verify: func(ctx context.Context, idx smart.Index) error { return idx.(*smart.Tree).Verify(ctx) },
		// A leaf's lock; a leaf torn by an in-place write killed midway
		// (under that lock); or the revMoving flag (bit 63, so memory node
		// 32768 and up as printed) a split sets on the reverse pointer of
		// the object it moves and clears once the move is published: a
		// split killed between the two leaves it set.
		crashLeft: func(err error) bool {
			if strings.Contains(err.Error(), "lock held") || strings.Contains(err.Error(), "bad checksum or lengths") {
				return true
			}
			m := movingRev.FindStringSubmatch(err.Error())
			if m == nil {
				return false
			}
			mn, err := strconv.Atoi(m[1])
			return err == nil && mn >= 1<<15
		},
	},
	{
		name: "sherman",
		open: func(cn *remote.ComputeNode, budget int) (smart.Index, error) {
			return sherman.Open(cn, sherman.Options{Name: treeName, RetryBudget: budget})
		},
		verify: func(ctx context.Context, idx smart.Index) error { return idx.(*sherman.Tree).Verify(ctx) },
		// A page's global lock, or a page torn by a write killed midway
		// (under that lock): readers retry until their budget runs out.
		crashLeft: func(err error) bool {
			return strings.Contains(err.Error(), "global lock") || strings.Contains(err.Error(), "torn or invalid page")
		},
	},
}

// movingRev matches SMART's Verify report of a reverse pointer that is not
// the slot the leaf or node hangs from; its group is the pointer's memory
// node.
var movingRev = regexp.MustCompile(`(?:leaf|node) \S+: reverse pointer (\d+):0x[0-9a-f]+, (?:parent )?slot is `)

// kindByName returns the index kind called name.
func kindByName(name string) (indexKind, error) {
	for _, k := range kinds {
		if k.name == name {
			return k, nil
		}
	}
	return indexKind{}, fmt.Errorf("unknown index %q", name)
}

// poolConfig is the configuration of the pool the first process creates in
// dir; later ones adopt the files whatever they ask.
func poolConfig(dir string) remote.Config {
	return remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20, ChunkBytes: 64 << 10, Shm: &remote.ShmConfig{Dir: dir}}
}

// openTree opens a pool of cfg and the tree of kind k on it; close
// releases both.
func openTree(k indexKind, cfg remote.Config, retryBudget int) (idx smart.Index, pool *remote.Pool, close func(), err error) {
	pool, err = remote.NewPool(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	idx, err = k.open(pool.NewComputeNode(), retryBudget)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return idx, pool, func() { idx.Close(); pool.Close() }, nil
}

// The keys of the tests are 8-byte images of ids under an odd multiplier,
// so that the ids of different writers interleave in key order and share
// leaves. Values are 8 bytes: id (36 bits), version (20 bits) and a check
// byte, so that a torn or misplaced value is seen.

// keyOf returns the key of id.
func keyOf(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id*0x9e3779b97f4a7c15) }

// valueOf returns the value of version ver of id.
func valueOf(id uint64, ver int) []byte {
	v := id<<28 | uint64(ver)<<8
	return binary.BigEndian.AppendUint64(nil, v|uint64(checkByte(v)))
}

// checkByte is the check byte of a value's other bits.
func checkByte(v uint64) byte {
	v >>= 8
	v ^= v >> 31
	v *= 0x9e3779b97f4a7c15
	return byte(v >> 56)
}

// decodeValue returns the id and version of a value made by valueOf.
func decodeValue(v []byte) (id uint64, ver int, err error) {
	if len(v) != 8 {
		return 0, 0, fmt.Errorf("value of %d bytes", len(v))
	}
	w := binary.BigEndian.Uint64(v)
	if checkByte(w) != byte(w) {
		return 0, 0, fmt.Errorf("value %#x fails its check", w)
	}
	return w >> 28, int(w >> 8 & (1<<20 - 1)), nil
}

// childArg is the argument of TestChild.
type childArg struct {
	Mode  string // "insert" or "crash"
	Index string // the index kind
	Dir   string // the pool's directory
	Ctl   string // the directory of the flag files
	Child int    // the child's number, from 0
	Seed  uint64

	// insert: the child inserts the ids i in [0, Procs×PerChild) with
	// i%Procs == Child, with Workers goroutines.
	Procs, PerChild, Workers int
}

// startChild starts TestChild with a.
func startChild(t *testing.T, a childArg, files ...*os.File) *childtest.Child {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return childtest.Start(t, childtest.Options{Test: "TestChild", Arg: string(b), Files: files, Timeout: 3 * childLimit})
}

// TestChild is the child process of the tests of this package.
func TestChild(t *testing.T) {
	arg, ok := childtest.Arg()
	if !ok {
		t.Skip("run by the multi-process tests")
	}
	var a childArg
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		t.Fatal(err)
	}
	k, err := kindByName(a.Index)
	if err != nil {
		t.Fatal(err)
	}
	switch a.Mode {
	case "insert":
		err = insertChild(k, a)
	case "crash":
		err = crashChild(k, a)
	default:
		err = fmt.Errorf("unknown mode %q", a.Mode)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// isBlocked reports whether err is an operation that gave up waiting:
// the retry budget or the caller's deadline ran out.
func isBlocked(err error) bool {
	return errors.Is(err, smart.ErrContention) || errors.Is(err, context.DeadlineExceeded)
}
