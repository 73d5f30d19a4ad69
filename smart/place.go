package smart

import (
	"context"

	"github.com/dmindex/dmindex/remote"
)

// Publication of new objects (docs/smart-protocol.md, I3): the WRITEs of a
// new object and the CAS that links it share one batch only when they go to
// one memory node, where verbs execute in posting order. Verbs to different
// memory nodes are not ordered, neither by RDMA nor by the simulator's Skew
// mode, so then the WRITEs complete in a round trip of their own first.

// onNode reports whether every verb of ops goes to memory node mn.
func onNode(ops []remote.Op, mn int) bool {
	for i := range ops {
		if ops[i].Addr.MN() != mn {
			return false
		}
	}
	return true
}

// link executes ops, the writes (and marks) that pub publishes, then pub,
// whose verbs all go to one memory node: in one batch if every verb of ops
// goes to that node too (posting order), otherwise ops first, in a round
// trip of their own. It returns the batch that executed pub, pub's verbs
// last.
func (s *session) link(ctx context.Context, ops []remote.Op, pub ...remote.Op) ([]remote.Op, error) {
	if !onNode(ops, pub[0].Addr.MN()) {
		if err := s.do(ctx, ops); err != nil {
			return ops, err
		}
		ops = s.batch()
	}
	ops = append(ops, pub...)
	return ops, s.do(ctx, ops)
}
