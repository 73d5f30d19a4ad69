package remote

import (
	"testing"
	"time"
)

// TestReplyAfterStall: a call whose timeout fires long after the call was
// due (its process was stopped or paused, and the link's reader with it)
// waits stallGrace more for a reply that may be waiting in the socket, and
// takes it; a timeout that fires on time, or a reply that does not come
// within the grace, leaves the call to fail. Without the grace, a compute
// node stopped for longer than Timeout judged its healthy memory nodes down
// when it continued (a new-user pass: 4,611 to 4,926 operations failed in
// the second after SIGCONT, and its writers' clients crashed).
func TestReplyAfterStall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		due     time.Duration // when the call was due, from now
		replyIn time.Duration // when its reply comes (< 0: never)
		came    bool
	}{
		{"stalled, reply waiting", -time.Second, 10 * time.Millisecond, true},
		{"stalled, no reply", -time.Second, -1, false},
		{"on time, reply later", -time.Millisecond, 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := newTCPCall()
			call.by = time.Now().Add(tc.due)
			if tc.replyIn >= 0 {
				time.AfterFunc(tc.replyIn, func() { call.done <- nil })
			}
			start := time.Now()
			came, err := call.replyAfterStall()
			took := time.Since(start)
			if came != tc.came || err != nil {
				t.Fatalf("replyAfterStall() = %v, %v; want %v, nil", came, err, tc.came)
			}
			switch {
			case !came && !stalled(call.by) && took > stallGrace/2:
				t.Errorf("a timeout on time waited %v", took)
			case !came && stalled(call.by) && took < stallGrace*9/10:
				t.Errorf("a stalled call gave its reply %v, want about %v", took, stallGrace)
			}
		})
	}
}
