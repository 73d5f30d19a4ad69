package ycsb_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/dmindex/dmindex/ycsb"
	"github.com/dmindex/dmindex/ycsb/ycsbtest"
)

// Run YCSB A on two compute nodes of four clients each in the simulator.
// In a real benchmark Open opens SMART or Sherman (see cmd/dmbench).
func ExampleRun() {
	w, _ := ycsb.Preset("a")
	res, err := ycsb.Run(context.Background(), ycsb.Config{
		Index: "mem", Open: ycsbtest.NewOpener(), Workload: w, Keys: ycsb.KeyInt,
		Records: 1000, Ops: 2000, MemoryNodes: 1, ComputeNodes: 2, ClientsPerCN: 4, Seed: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d operations, %d errors, %.1f round trips per operation\n", res.Completed, res.Errors, res.RTTPerOp)
	for _, o := range res.Operations {
		fmt.Println(o.Name, o.Returns)
	}
	// Output:
	// 2000 operations, 0 errors, 1.0 round trips per operation
	// READ [{OK 1031}]
	// UPDATE [{OK 969}]
}

func ExampleKeyType() {
	for _, n := range []uint64{0, 1, 2} {
		v := ycsb.FNVHash64(n) // YCSB's hashed insert order names record n by this number
		fmt.Printf("%x %s\n", ycsb.KeyInt.AppendKey(nil, v), ycsb.KeyEmail.AppendKey(nil, v))
	}
	// Output:
	// 573807cdd7e5c63b com.qq@rebecca1ofk0frvfxt
	// 7632ced6e2d5105c cn.163@susan29wasjvgk78
	// 194279bbc20731f9 uk.co.bt@deborahhi2g7kp7f0
}

func ExampleWriteTrace() {
	ops, _ := ycsb.ReadTrace(strings.NewReader("INSERT 7\nREAD 7\nSCAN 7 10\n"), ycsb.KeyInt)
	ycsb.WriteTrace(os.Stdout, ycsb.KeyInt, ops)
	// Output:
	// INSERT 7
	// READ 7
	// SCAN 7 10
}
