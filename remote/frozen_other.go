//go:build !linux

package remote

// frozen is a read-only copy of a region's words; regions started from it
// copy it (Linux shares its pages instead, frozen_linux.go).
type frozen struct{ w []uint64 }

// freeze copies src.
func freeze(src []uint64) (*frozen, error) {
	f := &frozen{w: make([]uint64, len(src))}
	copyWords(f.w, src)
	return f, nil
}

// thaw returns a region of n ≥ len(f.w) words of owner that starts as a
// copy of f and whose rest is zero.
func thaw(owner *memNode, f *frozen, n int) ([]uint64, error) {
	words, err := newWords(owner, n)
	if err != nil {
		return nil, err
	}
	copyWords(words, f.w)
	return words, nil
}
