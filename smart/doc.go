// Package smart implements SMART (OSDI'23), an adaptive radix tree on
// disaggregated memory, and defines Index, the interface every index of this
// module implements.
//
// SMART's internal nodes are lock-free: each 8-byte slot carries a partial
// key, a leaf flag, the child's node type or leaf size class and a 48-bit
// address, so every structural change (normal insert, leaf split, header
// split, node type switch) is a single 8-byte CAS. Leaves are updated in
// place under a rear-embedded lock and checked by checksum. See
// docs/layouts.md and docs/smart-protocol.md.
//
// Beyond the paper: internal nodes are allocated by size class and move to
// a larger type when full (Options.PaperNodes keeps the paper's), scans can
// be told their length (ScanLimit), read runs of leaves that lie next to
// one another with one READ, and Compact lays leaves out in key order so
// that they do.
package smart
