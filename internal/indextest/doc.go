// Package indextest is the contract test battery that every index of this
// module (SMART, Sherman, and any later one) must pass.
//
// The battery is written against the index.Index contract and the remote
// package only; it knows nothing about any implementation. An index package
// runs it from its own tests:
//
//	func TestIndexContract(t *testing.T) {
//		indextest.Run(t, indextest.Target{
//			Name: "smart",
//			Open: func(cn *remote.ComputeNode, name string) (index.Index, error) {
//				return smart.Open(cn, smart.Options{Name: name})
//			},
//			Verify: func(ctx context.Context, idx index.Index) error {
//				return idx.(*smart.Tree).Verify(ctx)
//			},
//			MaxKeyLen:   smart.MaxKeyLen,
//			MaxValueLen: smart.MaxValueLen,
//		})
//	}
//
// Run runs every battery as a subtest; each battery is also exported on its
// own (RunBasic, RunErrors, RunKeys, RunOracle, RunScan, RunConcurrent,
// RunSim, RunLinearizable) so that an index can run one of them alone, for
// example while debugging with -run. The crash-recovery batteries
// (RunCrashPoints, RunCrashRandom, RunSilentNode) are not part of Run: an
// index that implements index.Recoverer runs them itself.
//
// # What is checked
//
//   - RunBasic: every operation on its own (empty index, insert, overwrite
//     across value sizes, delete, delete then reinsert), ownership of the
//     slices passed in and returned, and that the indexes opened under one
//     name on several compute nodes are one structure.
//   - RunErrors: the sentinel errors (ErrEmptyKey, ErrKeyTooLong,
//     ErrValueTooLarge, ErrClosed) and context errors, and that a failed call
//     changes nothing.
//   - RunKeys: adversarial key sets (prefix chains, 0x00 and 0xFF bytes,
//     maximum-length keys, dense and sparse byte spreads, long shared
//     prefixes diverging at every position) inserted in several orders,
//     probed with neighbouring non-keys, partly deleted and reinserted.
//   - RunOracle: long random sequences of Put, Get, Delete and Scan over
//     several compute nodes, checked op by op against an ordered in-memory
//     oracle (google/btree), with Verify at intervals and a final full-scan
//     comparison.
//   - RunScan: scans with random bounds (nil, equal, inverted, non-keys,
//     prefixes of keys, bounds longer than any key) and early breaks against
//     the oracle, and that a scan stopped early does not read the rest of its
//     range (measured with remote.Stats).
//   - RunConcurrent: goroutines on several compute nodes in local mode
//     (meant for -race): disjoint inserts, same-key contention, concurrent
//     splits in a shared prefix region, deletes and reinserts, scans
//     concurrent with writers, many clients inserting into an empty index,
//     and a mixed workload checked against per-key knowledge.
//   - RunSim: the mixed workload with hundreds of simulated clients in both
//     ordering modes of the simulator (remote.InOrder, remote.Strict) and
//     in Skew mode (remote.SimConfig.Skew: verbs of one batch to different
//     memory nodes land in either order), checked per key and by
//     linearizability, and the determinism of a simulated run.
//   - RunLinearizable: histories of concurrent Get, Put and Delete on a
//     small hot key set, checked with porcupine, in local mode and in the
//     simulator.
//   - RunCrashPoints: single operations (insert, same-size and larger
//     updates, delete, inserts that change the structure) stopped at every
//     verb and every word of every WRITE (remote.Fault), in InOrder and
//     Strict: the key holds its old or its new value, nothing else changed,
//     the next writes succeed at once, Recover and Verify pass, and
//     Stats().Crashed and Recovered count what happened.
//   - RunCrashRandom: the mixed workload and hot-key histories under random
//     crash injection (remote.Pool.InjectCrashes), crashed calls having an
//     unknown outcome, checked per key and with porcupine, then Recover and
//     Verify.
//   - RunSilentNode: a compute node falls silent mid-operation (every one of
//     its clients stopped); another must take its locks over after the
//     lease (Target.Lease) and find the data intact.
//
// # Reproducing a failure
//
// Randomized tests log their seed; rerun with
//
//	go test -run 'TestX/oracle/binary' -seed=N
//
// Every subtest derives its own seed from N and its name, so a seed
// reproduces the failing subtest when it runs alone. Long parts skip or
// shrink under -short.
package indextest
