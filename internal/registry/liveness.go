package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/dmindex/dmindex/remote"
)

// Watch is a waiter's record of the holder of one lock, kept across the
// waiter's retries. The zero value is ready.
type Watch struct {
	word   uint64 // the lock word judged
	owner  uint64 // the holder's block owner word when first seen
	hb     uint64 // its heartbeat then
	client uint64 // its client word then
	since  time.Duration
	set    bool
	by     time.Duration // ActBy
}

// NoDeadline is the deadline of a judgement that does not expire.
const NoDeadline = time.Duration(math.MaxInt64)

// ActBy returns the deadline (remote.Client.DoBy) of the takeover CAS that
// acts on the judgement Dead last returned true for: half a lease after
// the judging read was posted if the judgement came from a heartbeat that
// stood still (a holder's Node.LockedAt counts on takeovers landing within
// that of the read they were decided on), NoDeadline if it came from the
// holder's client word (closed, marked dead or renewed: that does not
// change back).
func (w *Watch) ActBy() time.Duration { return w.by }

// Dead judges the holder of a lock whose word is word (a Tag, possibly with
// other flag bits), for a waiter that has already retried the lock for a
// while; each call costs one round trip, so a waiter calls it every so many
// retries. It reports true if the tag's client slot was closed, marked dead
// (Member.MarkDead) or taken by a new incarnation, or its block released;
// and true if the same word has been seen, with the holder's block
// heartbeat and client word unchanged, for a Lease on c's clock. A changed
// word or a moving heartbeat restarts the watch. A word that is not a tag
// is never judged dead.
func (n *Node) Dead(ctx context.Context, c *remote.Client, w *Watch, word uint64) (bool, error) {
	if !IsTag(word) {
		return false, nil
	}
	b, k, inc := parseTag(word)
	if b >= n.opts.Blocks || k >= n.opts.Clients {
		return false, fmt.Errorf("registry: lock word %#x names client %d of block %d (registry has %d blocks of %d)",
			word, k, b, n.opts.Blocks, n.opts.Clients)
	}
	var hdr [16]byte
	var cw [8]byte
	before := c.Now()
	if err := c.Do(ctx, []remote.Op{remote.Read(n.blockAddr(b), hdr[:]), remote.Read(n.clientAddr(b, k), cw[:])}); err != nil {
		return false, fmt.Errorf("registry: %w", err)
	}
	owner := binary.LittleEndian.Uint64(hdr[:])
	hb := binary.LittleEndian.Uint64(hdr[hbOff:])
	client := binary.LittleEndian.Uint64(cw[:])
	if owner&1 == 0 || client&3 != stateLive || (client>>2)&incMask != inc {
		w.by = NoDeadline
		return true, nil
	}
	now := c.Now()
	if w.set && w.word == word && w.owner == owner && w.hb == hb && w.client == client {
		w.by = before + n.opts.Lease/2
		return now-w.since >= n.opts.Lease, nil
	}
	*w = Watch{word: word, owner: owner, hb: hb, client: client, since: now, set: true}
	return false, nil
}
