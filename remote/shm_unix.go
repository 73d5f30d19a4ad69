//go:build unix

package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// shm is the shared-file transport: the local transport's verbs on memory
// nodes mapped from files. Close unmaps the files, so every access holds a
// read lock that Close waits for.
type shm struct {
	*local
	mu     sync.RWMutex
	unmaps []func()
	closed bool
}

// shmFile returns the path of memory node i's file.
func shmFile(dir string, i int) string { return filepath.Join(dir, "mn-"+strconv.Itoa(i)) }

// openShm maps the memory-node files of cfg.Dir, creating the missing ones.
func (p *Pool) openShm(cfg ShmConfig) error {
	if cfg.Dir == "" {
		return fmt.Errorf("%w: ShmConfig.Dir is empty", ErrBadRequest)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("%w: ShmConfig.Dir: %v", ErrBadRequest, err)
	}
	n, fixed := p.cfg.MemoryNodes, shmNodeCount(cfg.Dir)
	switch {
	case n == 0 && fixed > 0:
		n = fixed
	case n == 0:
		for n < MaxMemoryNodes {
			if _, err := os.Stat(shmFile(cfg.Dir, n)); err != nil {
				break
			}
			n++
		}
		n = max(n, 1)
	case fixed > 0 && fixed != n:
		return fmt.Errorf("%w: %s is node 0 of a pool of %d memory node(s), this pool lists %d", ErrBadNode, shmFile(cfg.Dir, 0), fixed, n)
	case fixed == 0:
		if _, err := os.Stat(shmFile(cfg.Dir, n)); err == nil {
			return fmt.Errorf("%w: %s holds more than the %d memory nodes asked (%s exists)", ErrBadNode, cfg.Dir, n, shmFile(cfg.Dir, n))
		}
	}
	if err := shmRoom(cfg.Dir, n, p.cfg); err != nil {
		return err
	}
	t := &shm{local: newLocal(p)}
	fail := func(err error) error {
		t.unmap()
		return err
	}
	pool := rand.Uint64() | 1
	// The first pool that comes up on the directory fixes its node count in
	// every node's header, once all its nodes have joined (as joinNodes
	// does). Node 0 is joined first, so a pool asking for another count is
	// refused before it creates or stamps any other node.
	for i := 0; i < n; i++ {
		m, unmap, err := openNodeFile(shmFile(cfg.Dir, i), p.cfg)
		if err != nil {
			return fail(fmt.Errorf("memory node %d (%s): %w", i, shmFile(cfg.Dir, i), err))
		}
		t.unmaps = append(t.unmaps, unmap)
		if _, nodes := nodePlace(atomic.LoadUint64(&m.main[hdrIndex])); i == 0 && p.cfg.MemoryNodes == 0 && nodes > 0 {
			n = nodes // adopt the count the directory was created with
		}
		if pool, err = nodeJoin(m.main, pool, i == 0, i, n, true, false); err != nil {
			return fail(fmt.Errorf("memory node %d (%s): %w", i, shmFile(cfg.Dir, i), err))
		}
		p.mns = append(p.mns, m)
		p.geom = append(p.geom, m.geom)
	}
	for i, m := range p.mns {
		if _, err := nodeJoin(m.main, pool, false, i, n, false, true); err != nil {
			return fail(fmt.Errorf("memory node %d (%s): %w", i, shmFile(cfg.Dir, i), err))
		}
	}
	if err := p.adoptGeometry(); err != nil {
		return fail(err)
	}
	p.t = t
	return nil
}

// shmNodeCount returns the number of memory nodes that the header of dir's
// memory node 0 records for its pool, or 0 if it records none (or there is
// no such node, or it is not one: opening it tells why). It only reads.
func shmNodeCount(dir string) int {
	f, err := os.Open(shmFile(dir, 0))
	if err != nil {
		return 0
	}
	defer f.Close()
	var hdr [dirFirstWord * 8]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0
	}
	var words [dirFirstWord]uint64
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(hdr[8*i:])
	}
	if words[hdrMagic] != nodeMagic || words[hdrVersion] != nodeVersion {
		return 0
	}
	_, nodes := nodePlace(words[hdrIndex])
	return min(nodes, MaxMemoryNodes)
}

// shmRoom checks that the file system of dir has room for the memory-node
// files a pool of n nodes of cfg's geometry must create, together: the
// files are sparse, so each new file leaves the free space as it was and
// checking each node against it alone would let a pool promise more memory
// than the file system holds (and its writes die of SIGBUS). Files that
// exist already need nothing new. A file system that cannot say how much
// room it has is not refused.
func shmRoom(dir string, n int, cfg Config) error {
	cfg.defaultGeometry()
	size := uint64(cfg.NodeBytes) + cfg.onChipRegion()
	var need uint64
	missing := 0
	for i := range n {
		if _, err := os.Stat(shmFile(dir, i)); errors.Is(err, os.ErrNotExist) {
			need += size
			missing++
		}
	}
	if need == 0 {
		return nil
	}
	if free, ok := fsFree(dir); ok && free < need {
		return fmt.Errorf("%w: the file system of %s has %d bytes free, the %d memory node(s) to create need %d (%d each)",
			ErrOutOfMemory, dir, free, missing, need, size)
	}
	return nil
}

// fsFree returns the bytes an unprivileged process may still write in the
// file system of dir, and false if it cannot tell.
func fsFree(dir string) (uint64, bool) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, false
	}
	return uint64(fs.Bavail) * uint64(fs.Bsize), true
}

// mapShmNode maps the memory-node file at path, creating it with the
// geometry of cfg if it does not exist. An existing file is validated from
// its header before it is mapped writable, and never modified when refused.
func mapShmNode(path string, cfg Config) ([]byte, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			b, created, err := createShmNode(path, cfg)
			if err != nil || created {
				return b, err
			}
			continue // another process created it first: open theirs
		}
		if errors.Is(err, unix.EISDIR) {
			return nil, fmt.Errorf("%w: a directory, not a memory-node file", ErrBadNode)
		}
		if err != nil {
			return nil, err
		}
		b, err := mapExisting(f, cfg)
		f.Close()
		return b, err
	}
}

// mapExisting validates and maps an existing memory-node file.
func mapExisting(f *os.File, cfg Config) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, reservedBytes)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("%w: %d bytes is too short for a memory node", ErrBadNode, st.Size())
	}
	words := make([]uint64, reservedBytes/8)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(hdr[8*i:])
	}
	g, err := checkHeader(words)
	if err != nil {
		return nil, err
	}
	switch {
	case uint64(st.Size()) != g.main+g.onChip:
		return nil, fmt.Errorf("%w: file of %d bytes, its header says %d + %d", ErrBadNode, st.Size(), g.main, g.onChip)
	case cfg.NodeBytes != 0 && uint64(cfg.NodeBytes) != g.main:
		return nil, fmt.Errorf("%w: the node has %d bytes, NodeBytes asks %d", ErrBadNode, g.main, cfg.NodeBytes)
	case cfg.OnChipBytes > 0 && uint64((cfg.OnChipBytes+7)&^7) != g.onChip, cfg.OnChipBytes < 0 && g.onChip != 0:
		return nil, fmt.Errorf("%w: the node has %d on-chip bytes, OnChipBytes asks %d", ErrBadNode, g.onChip, cfg.OnChipBytes)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping %d bytes: %v", ErrOutOfMemory, st.Size(), err)
	}
	return b, nil
}

// createShmNode creates a memory-node file under a temporary name, sizes and
// initialises it, and links it into place only if no other process did so
// first, so two first openers never both initialise one node.
func createShmNode(path string, cfg Config) (b []byte, created bool, err error) {
	cfg.defaultGeometry()
	g := nodeGeom{main: uint64(cfg.NodeBytes), onChip: cfg.onChipRegion()}
	// The file is sparse: pages are backed when first written, and a write
	// to a page the file system cannot back kills the process (SIGBUS), so
	// the file system must have room for the whole node from the start.
	if free, ok := fsFree(filepath.Dir(path)); ok && free < g.main+g.onChip {
		return nil, false, fmt.Errorf("%w: the file system has %d bytes free, the memory node needs %d",
			ErrOutOfMemory, free, g.main+g.onChip)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".creating-"+filepath.Base(path)+"-*")
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Truncate(int64(g.main + g.onChip)); err != nil {
		return nil, false, fmt.Errorf("%w: sizing the file to %d bytes: %v", ErrOutOfMemory, g.main+g.onChip, err)
	}
	b, err = unix.Mmap(int(f.Fd()), 0, int(g.main+g.onChip), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, false, fmt.Errorf("%w: mapping %d bytes: %v", ErrOutOfMemory, g.main+g.onChip, err)
	}
	initNode(wordsOf(b), g)
	if err := os.Link(f.Name(), path); err != nil {
		unix.Munmap(b)
		if errors.Is(err, os.ErrExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return b, true, nil
}

func (t *shm) exec(ctx context.Context, c *Client, ops []Op, signaled bool) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return ErrClosed
	}
	return t.local.exec(ctx, c, ops, signaled)
}

func (t *shm) rpc(ctx context.Context, c *Client, mn int, req *rpcRequest) (rpcReply, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return rpcReply{}, ErrClosed
	}
	return t.local.rpc(ctx, c, mn, req)
}

func (t *shm) used(ctx context.Context, mn int) (uint64, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return 0, ErrClosed
	}
	return t.local.used(ctx, mn)
}

func (t *shm) report() Report {
	r := t.local.report()
	r.Transport = "shm"
	return r
}

// close wakes parked clients, waits for accesses in progress and unmaps.
func (t *shm) close() {
	t.local.close()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.unmap()
}

func (t *shm) unmap() {
	for _, f := range t.unmaps {
		f()
	}
	t.unmaps = nil
}

// RemoveShm deletes the memory-node files of a shared-memory pool in dir
// (the files mn-<i>), and dir itself if it is then empty. Trees stored in
// them are lost. Processes that still map them keep their mappings until
// they close their pools.
func RemoveShm(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, "mn-"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				if err := os.Remove(filepath.Join(dir, name)); err != nil {
					return err
				}
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// openNodeFile maps the memory-node file at path (created with the
// geometry of cfg if missing) as one memory node, and returns the function
// that unmaps it.
func openNodeFile(path string, cfg Config) (*memNode, func(), error) {
	b, err := mapShmNode(path, cfg)
	if err != nil {
		return nil, nil, err
	}
	words := wordsOf(b)
	g, err := checkHeader(words)
	if err != nil {
		unix.Munmap(b)
		return nil, nil, err
	}
	return &memNode{geom: g, main: words[:g.main/8], onChip: words[g.main/8:]}, func() { unix.Munmap(b) }, nil
}
