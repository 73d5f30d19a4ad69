// Package index holds the contract every range index of this module
// implements: the Index interface, the KV pair its scans yield and the
// sentinel errors its methods wrap. It is a leaf package, so code written
// against the contract (a YCSB runner, a test battery, an application)
// needs neither tree. Package smart re-exports every name (smart.Index,
// smart.ErrClosed, ...) for code that imports SMART anyway.
//
// # Limits
//
// The indexes behind the interface differ in what they accept; a call
// outside the limits fails with ErrEmptyKey, ErrKeyTooLong or
// ErrValueTooLarge and changes nothing.
//
//	index    keys                                  values
//	SMART    1..255 bytes (smart.MaxKeyLen)        0..64 KiB (smart.MaxValueLen)
//	Sherman  1..Options.KeySize bytes              0..Options.ValueSize bytes
//	         (default 32, at most 255)             (default 64, at most 4096)
//
// Sherman's entries have a fixed size, chosen when a tree is created and
// shared by every compute node that opens it; SMART sizes each leaf for
// its pair.
//
// # Optional interfaces
//
// An index may implement more than Index: LimitScanner (scans told how
// many pairs the caller takes, which then read no further; ScanLimit and
// ReverseScanLimit use it and fall back to stopping the scan), Recoverer
// (recovery of what crashed clients left behind) and Compacter (a new
// layout of a key range's remote memory for cheaper scans). Both trees
// are LimitScanners and Recoverers; SMART is a Compacter.
//
// # No Len
//
// There is no count of keys. An exact count on disaggregated memory needs
// either a full scan (every leaf read over the network) or a counter word
// that every insert and delete of every compute node updates with a FAA:
// one more verb per write, all of them on one word of one memory node,
// which serialises the writers of the whole pool on a single NIC's atomic
// unit. Neither fits an index whose point is to spread work over memory
// nodes. Count with Scan when you need the number (it costs a scan), or
// keep a count in your application if your writes already go through one
// place.
package index
