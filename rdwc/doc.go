// Package rdwc implements SMART's read delegation and write combining (RDWC,
// OSDI'23 §4.4.2): a compute-node-local table of hash-slotted local locks
// through which the clients of one compute node share the remote I/O of
// concurrent operations on the same key.
//
//   - Read delegation: the first reader of a key becomes the delegate and runs
//     the read; readers of the same key arriving while its window is open wait
//     and receive a copy of the delegate's result without remote I/O.
//   - Write combining: the first writer of a key becomes the leader and runs
//     the write; writers of the same key arriving while its window is open
//     leave their value in the write-combining buffer and wait; the leader
//     publishes the latest buffered value and every combined writer returns
//     the leader's outcome.
//
// Readers and writers of a key share one time window: a reader never joins a
// write window nor a writer a read window; they queue in arrival order and
// the oldest waiter opens the next window. Each slot records the key of its
// open window (the unique key); an operation on a different key that hashes
// to a busy slot runs on its own (a collision), which is correct but not
// shared.
//
// # Linearizability
//
// The callback that runs the shared operation calls Window.Seal (for a write,
// Window.Value, which seals and returns the combined value) immediately before
// the verb at which the operation linearizes: the leaf READ of a search, the
// verb that publishes a write. After Seal no operation joins the window, so
// every joiner arrived before the shared verb and returns after it: it is
// linearized at that verb. A callback that returns without sealing shares
// nothing: its joiners compete again. docs/rdwc.md gives the full argument.
//
// # Use
//
// A Table is created per compute node and index; every client passed to it
// must belong to that compute node. An index wraps its search and its update
// paths:
//
//	v, found, err := t.Read(ctx, c, key, func(ctx context.Context, w *rdwc.Window) ([]byte, bool, error) {
//		leaf := traverse(ctx, c, w.Key()) // cache, internal nodes
//		w.Seal()                      // immediately before the leaf READ
//		return readLeaf(ctx, c, leaf, w.Key())
//	})
//
//	err := t.Write(ctx, c, key, value, func(ctx context.Context, w *rdwc.Window) error {
//		leaf := traverseAndLock(ctx, c, w.Key())
//		return writeLeafAndUnlock(ctx, c, leaf, w.Value()) // combined value
//	})
//
// Deletes are not combined: they return whether the key was present, which
// differs between the writers of a combined window. An index runs them
// directly; that is linearizable on its own.
//
// Waiting goes through remote.Client.Wait and remote.Client.Signal only, so
// the simulator's scheduler sees every blocked client; the table's mutexes are
// never held across a wait, a verb or a callback. A waiting client tolerates
// spurious wake-ups and never leaves a permit behind that it did not find.
package rdwc
