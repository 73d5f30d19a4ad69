package shmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/childtest"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// childLimit bounds each phase of a child's run.
const childLimit = time.Minute

// TestTwoProcessesInsert has two processes open one fresh pool and one tree
// by name at the same time, insert disjoint, interleaved keys concurrently
// (several goroutines each), and then each read every key of both and scan
// and verify the whole tree. Once both have exited, a third opener (this
// process, adopting the files' geometry) finds every key.
func TestTwoProcessesInsert(t *testing.T) {
	const procs, workers = 2, 2
	perChild := 3000
	if testing.Short() {
		perChild = 1000
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			dir, ctl := t.TempDir(), t.TempDir()
			children := make([]*childtest.Child, procs)
			var ready []string
			for c := range children {
				children[c] = startChild(t, childArg{Mode: "insert", Index: k.name, Dir: dir, Ctl: ctl, Child: c,
					Procs: procs, PerChild: perChild, Workers: workers})
				ready = append(ready, filepath.Join(ctl, fmt.Sprintf("ready-%d", c)))
			}
			if err := childtest.Await(childLimit, ready...); err != nil {
				t.Fatal(err)
			}
			if err := childtest.Signal(filepath.Join(ctl, "go")); err != nil {
				t.Fatal(err)
			}
			for _, c := range children {
				if err := c.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			for c, ch := range children {
				t.Logf("child %d: %s", c, ch.Lines("CHECKED "))
			}

			idx, pool, closeTree, err := openTree(k, remote.Config{Shm: &remote.ShmConfig{Dir: dir}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer closeTree()
			if pool.MemoryNodes() != 2 || pool.Config().NodeBytes != poolConfig(dir).NodeBytes {
				t.Errorf("reopened pool: %d nodes of %d bytes", pool.MemoryNodes(), pool.Config().NodeBytes)
			}
			if err := checkInserted(context.Background(), k, idx, procs*perChild); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// insertChild is the child of TestTwoProcessesInsert: it opens the pool
// and the tree once the parent says go, inserts its share of the ids,
// waits until every child has inserted its own, and checks the whole tree.
func insertChild(k indexKind, a childArg) error {
	if err := childtest.Signal(filepath.Join(a.Ctl, fmt.Sprintf("ready-%d", a.Child))); err != nil {
		return err
	}
	if err := childtest.Await(childLimit, filepath.Join(a.Ctl, "go")); err != nil {
		return err
	}
	idx, _, closeTree, err := openTree(k, poolConfig(a.Dir), 0)
	if err != nil {
		return err
	}
	defer closeTree()
	ctx := context.Background()
	n := a.Procs * a.PerChild
	errs := make([]error, a.Workers)
	var wg sync.WaitGroup
	for w := range a.Workers {
		wg.Go(func() {
			for id := a.Child + a.Procs*w; id < n; id += a.Procs * a.Workers {
				if err := idx.Put(ctx, keyOf(uint64(id)), valueOf(uint64(id), 1)); err != nil {
					errs[w] = fmt.Errorf("child %d: Put(id %d): %w", a.Child, id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := childtest.Signal(filepath.Join(a.Ctl, fmt.Sprintf("inserted-%d", a.Child))); err != nil {
		return err
	}
	var all []string
	for c := range a.Procs {
		all = append(all, filepath.Join(a.Ctl, fmt.Sprintf("inserted-%d", c)))
	}
	if err := childtest.Await(childLimit, all...); err != nil {
		return err
	}
	if err := checkInserted(ctx, k, idx, n); err != nil {
		return fmt.Errorf("child %d: %w", a.Child, err)
	}
	fmt.Printf("CHECKED %d keys\n", n)
	return nil
}

// checkInserted checks that idx holds exactly the ids [0, n) at version
// 1: by Get, by a full scan, and by Verify.
func checkInserted(ctx context.Context, k indexKind, idx smart.Index, n int) error {
	var errs []error
	for id := range n {
		v, found, err := idx.Get(ctx, keyOf(uint64(id)))
		if err != nil || !found || !bytes.Equal(v, valueOf(uint64(id), 1)) {
			errs = append(errs, fmt.Errorf("Get(id %d) = %x, %v, %v", id, v, found, err))
		}
		if len(errs) >= 10 {
			break
		}
	}
	seen := 0
	var prev []byte
	for kv, err := range idx.Scan(ctx, nil, nil) {
		if err != nil {
			errs = append(errs, fmt.Errorf("Scan: %w", err))
			break
		}
		id, ver, err := decodeValue(kv.Value)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("Scan: key %x: %w", kv.Key, err))
		case !bytes.Equal(kv.Key, keyOf(id)) || ver != 1 || id >= uint64(n):
			errs = append(errs, fmt.Errorf("Scan: key %x holds the value of id %d version %d", kv.Key, id, ver))
		case prev != nil && bytes.Compare(prev, kv.Key) >= 0:
			errs = append(errs, fmt.Errorf("Scan: key %x after %x", kv.Key, prev))
		}
		prev = kv.Key
		seen++
	}
	if seen != n {
		errs = append(errs, fmt.Errorf("Scan yielded %d pairs, want %d", seen, n))
	}
	if err := k.verify(ctx, idx); err != nil {
		errs = append(errs, fmt.Errorf("Verify: %w", err))
	}
	return errors.Join(errs...)
}
