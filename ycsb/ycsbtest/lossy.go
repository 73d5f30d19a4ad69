package ycsbtest

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/ycsb"
)

// Loss is how the indexes of NewLossyOpener lose an acknowledged write.
type Loss uint8

const (
	// LossDrop deletes the write's key.
	LossDrop Loss = iota
	// LossStale puts back the value the write replaced (if it replaced
	// one).
	LossStale
	// LossTear flips the last byte of the key's value, as a torn write
	// would leave it.
	LossTear
)

// NewLossyOpener returns an Opener of in-memory indexes (NewOpener) with a
// recovery bug: Recover loses, once for every crash the index saw
// (an operation that returned remote.ErrCrashed), the last write the index
// acknowledged before that crash, as loss says. Tests use it to check
// that a crash run catches lost writes.
func NewLossyOpener(loss Loss) ycsb.Opener {
	open := NewOpener()
	return func(cn *remote.ComputeNode, cfg ycsb.IndexConfig) (index.Index, error) {
		ix, err := open(cn, cfg)
		if err != nil {
			return nil, err
		}
		return &lossy{Index: ix.(*Index), loss: loss}, nil
	}
}

// lossy is an Index whose Recover loses writes.
type lossy struct {
	*Index
	loss Loss

	mu      sync.Mutex
	key     []byte   // the last acknowledged Put's key
	prev    []byte   // the value it replaced (nil: none)
	pending [][]byte // per crash seen, the key and previous value to lose
}

// saw notes a crash if err is one.
func (x *lossy) saw(err error) {
	if !errors.Is(err, remote.ErrCrashed) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.key != nil {
		x.pending = append(x.pending, x.key, x.prev)
	}
}

func (x *lossy) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, found, err := x.Index.Get(ctx, key)
	x.saw(err)
	return v, found, err
}

// Put reads the value it replaces first, so that LossStale can put it back.
func (x *lossy) Put(ctx context.Context, key, value []byte) error {
	prev, _, err := x.Get(ctx, key)
	if err != nil {
		return err
	}
	err = x.Index.Put(ctx, key, value)
	x.saw(err)
	if err == nil {
		x.mu.Lock()
		x.key, x.prev = bytes.Clone(key), prev
		x.mu.Unlock()
	}
	return err
}

// Recover loses the writes noted by saw.
func (x *lossy) Recover(ctx context.Context) (int, error) {
	x.mu.Lock()
	pending := x.pending
	x.pending = nil
	x.mu.Unlock()
	for i := 0; i < len(pending); i += 2 {
		key, prev := pending[i], pending[i+1]
		var err error
		switch x.loss {
		case LossDrop:
			_, err = x.Index.Delete(ctx, key)
		case LossStale:
			if prev != nil {
				err = x.Index.Put(ctx, key, prev)
			}
		case LossTear:
			var v []byte
			if v, _, err = x.Index.Get(ctx, key); err == nil && len(v) > 0 {
				v[len(v)-1] ^= 0xff
				err = x.Index.Put(ctx, key, v)
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return x.Index.Recover(ctx)
}
