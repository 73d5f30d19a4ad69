// Package depot hands memory from a compute node that leaves a structure
// to the next one that opens it.
//
// A compute node keeps some of the memory it was given in its own process:
// the unused rest of its clients' chunks (remote.Client.Leftovers), and,
// for structures that reclaim memory, the objects it retired and has not
// freed yet (registry.Node.Drain) and those it freed and has not reused.
// Without a hand-over all of it is lost when the node closes the
// structure. A depot is one word of the structure's region, the head of a
// stack of records that list such memory: Push, run by a node that leaves,
// publishes a chain of records with one CAS; Take, run by a node that
// opens the structure, empties the stack with one CAS and reads the
// records.
//
// # Records
//
// A record is an object of 16+24·capacity bytes:
//
//	word 0      the next record's address, 0 for the last
//	word 1      the number of entries in the low 32 bits, the capacity in
//	            the high 32 bits (the record's allocation is 16+24·capacity)
//	entries     3 words each: the address, the size in the low 56 bits and
//	            the kind in the top byte, and Tau (Retired and Free)
//
// # Why it is safe
//
// Push writes its records, and only after the WRITE completed links the
// first into the head by CAS from the value it last read, after setting its
// last record's next word to that value; a failed CAS rewrites that word
// and tries again. Take swaps the whole stack out (CAS to 0), so no record
// is ever unlinked from inside a stack and the pushing CAS cannot suffer
// ABA: if the head holds the value the pusher read, the pusher's chain
// ends in the stack that is there. Records are read only by the node whose
// CAS took them, which then frees their memory to its compute node.
//
// A node that stops between its allocation and its CAS, or between a Take
// and the hand-over of what it took, loses that memory, as it would have
// without a depot. Memory a killed process held is lost too: its lists
// lived in the process.
package depot
