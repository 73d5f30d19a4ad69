package sherman

import (
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/internal/testseed"
	"github.com/dmindex/dmindex/remote"
)

// TestLeaseTooShort: with an Options.Lease far below a round trip every
// write under a global lock is past its deadline. Puts and Deletes must
// still return, each done or failed with index.ErrContention, instead of
// checking the lock again for ever (a lease of a nanosecond hung them that
// way); a write that gives up gives its lock back, so that another compute
// node's tree then verifies and reads back every acknowledged change.
func TestLeaseTooShort(t *testing.T) {
	p := simPool(t, remote.InOrder, 1)
	healthy := openTree(t, p, Options{Span: 8})
	late := openTree(t, p, Options{Span: 8, Lease: time.Nanosecond})
	known := indextest.LateOps(t, late, testseed.Seed(t), false)
	verify(t, healthy)
	indextest.CheckAcknowledged(t, healthy, known)
}
