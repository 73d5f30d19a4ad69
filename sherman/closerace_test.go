package sherman

import (
	"errors"
	"testing"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
)

// TestCloseRacesRegister: an operation that passed Close's check just
// before Close left the registry fails with an error that satisfies
// index.ErrClosed, not the registry's own ("registry: closed").
func TestCloseRacesRegister(t *testing.T) {
	p, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := Open(p.NewComputeNode(), Options{KeySize: 16, ValueSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.leaveRegistry() // Close's second half, with the operation already past the first
	if err := tr.Put(t.Context(), []byte("key"), []byte("value")); !errors.Is(err, index.ErrClosed) {
		t.Fatalf("Put after the registry was left: %v, want index.ErrClosed", err)
	}
}
