package smart_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dmindex/dmindex/remote"
	"github.com/dmindex/dmindex/smart"
)

// Open a SMART tree on a compute node of an in-process pool, then write,
// read, scan and delete keys.
func Example() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	tree, err := smart.Open(pool.NewComputeNode(), smart.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()

	for _, k := range []string{"apple", "banana", "cherry"} {
		if err := tree.Put(ctx, []byte(k), []byte("fruit "+k)); err != nil {
			log.Fatal(err)
		}
	}
	v, found, err := tree.Get(ctx, []byte("banana"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("banana: %q %v\n", v, found)
	for kv, err := range tree.Scan(ctx, []byte("b"), nil) { // keys >= "b"
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	for kv, err := range tree.ReverseScan(ctx, nil, []byte("c")) { // keys < "c", descending
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	found, err = tree.Delete(ctx, []byte("apple"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted apple:", found)
	// Output:
	// banana: "fruit banana" true
	// banana = fruit banana
	// cherry = fruit cherry
	// banana = fruit banana
	// apple = fruit apple
	// deleted apple: true
}
