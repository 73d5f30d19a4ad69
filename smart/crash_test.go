package smart_test

import (
	"testing"
	"time"

	"github.com/dmindex/dmindex/internal/indextest"
	"github.com/dmindex/dmindex/smart"
)

// TestCrash runs the crash batteries (docs/recovery.md; invariant I9): every
// fault point of each kind of write, random crashes under concurrency
// against an oracle and porcupine, a compute node that goes silent holding
// locks, recovered by another after the lease, and clients paused past the
// lease at random (indextest.RunStalls).
func TestCrash(t *testing.T) {
	const lease = time.Millisecond
	for name, opts := range map[string]smart.Options{
		"smart":           {Lease: lease},
		"locked-internal": {Lease: lease, LockedInternal: true},
		"reclaim":         {Reclaim: true, ReclaimInterval: lease / 10},
	} {
		t.Run(name, func(t *testing.T) {
			tg := target("smart-"+name, opts)
			tg.Lease = lease
			t.Run("points", func(t *testing.T) { indextest.RunCrashPoints(t, tg) })
			t.Run("random", func(t *testing.T) { indextest.RunCrashRandom(t, tg) })
			t.Run("silent", func(t *testing.T) { indextest.RunSilentNode(t, tg) })
			t.Run("stalls", func(t *testing.T) { indextest.RunStalls(t, tg) })
		})
	}
}
