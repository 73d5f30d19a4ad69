package remote_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dmindex/dmindex/remote"
)

// Allocate remote memory and use it with one-sided verbs.
func Example() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 2, NodeBytes: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c := pool.NewComputeNode().NewClient()

	a, err := c.Alloc(ctx, 64)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Write(ctx, a, []byte("hello, memory node")); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 18)
	if err := c.Read(ctx, a, buf); err != nil {
		log.Fatal(err)
	}
	counter := a.Add(24) // 8-byte aligned words for atomics
	if _, err := c.FAA(ctx, counter, 5); err != nil {
		log.Fatal(err)
	}
	old, err := c.CAS(ctx, counter, 5, 42)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, counter was %d\n", buf, old)
	fmt.Println(c.Stats())
	// Output:
	// hello, memory node, counter was 5
	// reads=1 (18 B) writes=1 (18 B) cas=1 (0 failed) faa=1 round_trips=4 unsignaled=0 rpcs=1 alloc=64 B freed=0 B
}

// In the simulator, clients started with Pool.Go run in virtual time: the
// same configuration always gives the same clock and statistics.
func Example_simulator() {
	ctx := context.Background()
	pool, err := remote.NewPool(remote.Config{MemoryNodes: 1, NodeBytes: 64 << 20, Sim: &remote.SimConfig{Seed: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	cn := pool.NewComputeNode()
	var opErr error
	pool.Go(func() {
		c := cn.NewClient()
		a, err := c.Alloc(ctx, 8)
		if err != nil {
			opErr = err
			return
		}
		for range 10 {
			if _, err := c.FAA(ctx, a, 1); err != nil {
				opErr = err
				return
			}
		}
	})
	if err := pool.Wait(); err != nil {
		log.Fatal(err)
	}
	if opErr != nil {
		log.Fatal(opErr)
	}
	fmt.Println(pool.Stats())
	fmt.Println("virtual time:", pool.Now())
	// Output:
	// reads=0 (0 B) writes=0 (0 B) cas=0 (0 failed) faa=10 round_trips=10 unsignaled=0 rpcs=1 alloc=8 B freed=0 B
	// virtual time: 26.956µs
}
