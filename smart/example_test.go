package smart_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"

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

// A scan told how many pairs it will yield reads only what those need,
// where a scan the caller stops has already read ahead.
func ExampleTree_ScanLimit() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	tree, err := smart.Open(pool.NewComputeNode(), smart.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()
	for i := range 1000 {
		if err := tree.Put(ctx, fmt.Appendf(nil, "user%04d", i), []byte("v")); err != nil {
			log.Fatal(err)
		}
	}
	// The three keys from "user0500" up.
	for kv, err := range tree.ScanLimit(ctx, []byte("user0500"), nil, 3) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", kv.Key)
	}
	// Output:
	// user0500
	// user0501
	// user0502
}

// Compact lays the leaves of a range out in key order, beside the tree's
// other operations; scans then read many leaves with one READ. A second
// Compact finds the leaves in place and moves none.
func ExampleTree_Compact() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	cn := pool.NewComputeNode()
	tree, err := smart.Open(cn, smart.Options{Reclaim: true}) // the moved leaves' memory is reused
	if err != nil {
		log.Fatal(err)
	}
	defer tree.Close()
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(1000) {
		if err := tree.Put(ctx, fmt.Appendf(nil, "user%04d", i), []byte("v")); err != nil {
			log.Fatal(err)
		}
	}
	reads := func() uint64 {
		before := cn.Stats().Reads
		for _, err := range tree.ScanLimit(ctx, []byte("user0500"), nil, 100) {
			if err != nil {
				log.Fatal(err)
			}
		}
		return cn.Stats().Reads - before
	}
	scattered := reads()
	moved, err := tree.Compact(ctx, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	again, err := tree.Compact(ctx, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("moved:", moved, "then", again)
	fmt.Println("a scan of 100 pairs reads less:", reads() < scattered/4)
	// Output:
	// moved: 1000 then 0
	// a scan of 100 pairs reads less: true
}
