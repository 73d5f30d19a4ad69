package registry

import "fmt"

// The registry's regions on memory node 0. The header (named RegionName,
// headerBytes):
//
//	offset 0   geometry: magic:16 | blocks:24 | clients per block:24
//	offset 8   the global epoch E
//
// The blocks (named RegionName + "/blocks", sized by the geometry, created
// once the geometry word matched):
//
//	offset 32·b                 block b's header: owner, heartbeat, epoch,
//	                            redo directory (redo.go)
//	offset 32·B + 8·(b·K + k)   client k of block b: incarnation:62 | state:2
//
// owner is incarnation:63 | claimed:1; a block is free while claimed is 0.
const (
	// RegionName is the name of the registry's header region.
	RegionName = "dmindex/registry"

	magic        = 0x5247 // "RG"
	headerBytes  = 64
	blockBytes   = 32
	epochOff     = 8
	hbOff        = 8  // heartbeat, in a block header
	pubOff       = 16 // published epoch, in a block header
	maxClients   = 1 << clientBits
	maxBlocks    = 1 << blockBits
	clientBits   = 8
	blockBits    = 16
	incBits      = 30
	clientShift  = incBits
	blockShift   = incBits + clientBits
	incMask      = 1<<incBits - 1
	tagBit       = 1 << 62
	tagFieldMask = 1<<(blockShift+blockBits) - 1
)

// Client states, in the low two bits of a client word.
const (
	stateFree = 0
	stateLive = 1
	stateDead = 2
)

// geometry is the registry's first word for b blocks of k clients.
func geometry(b, k int) uint64 { return magic<<48 | uint64(b)<<24 | uint64(k) }

// parseGeometry returns the blocks and clients per block of a geometry word.
func parseGeometry(w uint64) (blocks, clients int, err error) {
	if w>>48 != magic {
		return 0, 0, fmt.Errorf("registry: region %q holds %#x, not a registry", RegionName, w)
	}
	return int(w >> 24 & (1<<24 - 1)), int(w & (1<<24 - 1)), nil
}

// blocksBytes is the size of the blocks region for b blocks of k clients.
func blocksBytes(b, k int) int { return blockBytes*b + 8*b*k }

// tag is the lock tag of client k of block b in incarnation inc.
func tag(b, k int, inc uint64) uint64 {
	return tagBit | uint64(b)<<blockShift | uint64(k)<<clientShift | inc&incMask
}

// IsTag reports whether a lock word holds a tag of this registry (other bits
// of the word, such as a repair flag, are ignored).
func IsTag(w uint64) bool { return w&tagBit != 0 }

// parseTag returns the block, client and incarnation a tag names.
func parseTag(w uint64) (b, k int, inc uint64) {
	w &= tagFieldMask
	return int(w >> blockShift), int(w >> clientShift & (maxClients - 1)), w & incMask
}
