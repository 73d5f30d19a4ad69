package sherman_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dmindex/dmindex/index"
	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/sherman"
)

// Open a Sherman tree sized for keys of up to 16 bytes and values of up to
// 32 bytes (Sherman's entries have a fixed size, unlike SMART's), on two
// compute nodes that share it.
func Example() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	opts := sherman.Options{KeySize: 16, ValueSize: 32}
	a, err := sherman.Open(pool.NewComputeNode(), opts)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := sherman.Open(pool.NewComputeNode(), opts) // the same tree, seen from another compute node
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := a.Put(ctx, []byte("key"), []byte("value")); err != nil {
		log.Fatal(err)
	}
	v, found, err := b.Get(ctx, []byte("key"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %v\n", v, found)
	if err := a.Put(ctx, []byte("other"), []byte("x")); err != nil {
		log.Fatal(err)
	}
	for kv, err := range b.ReverseScan(ctx, nil, nil) { // every key, descending
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}

	err = a.Put(ctx, []byte("a key longer than 16 bytes"), nil)
	fmt.Println(errors.Is(err, index.ErrKeyTooLong))
	// Output:
	// "value" true
	// other = x
	// key = value
	// true
}
