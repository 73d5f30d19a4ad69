package remote

// Skew mode (SimConfig.Skew).
//
// RDMA orders the verbs of one queue pair, that is of one client to one
// memory node, and nothing else: two verbs of one doorbell batch to different
// memory nodes may take effect in either order (a congested path to one of
// them suffices). The NIC model alone hardly ever shows it, because a batch's
// verbs leave in posting order over symmetric paths, so a protocol that
// publishes on one memory node, in the same batch, data it writes on another
// looks correct. In Skew mode one verb in four, drawn independently, has its
// memory access delayed by a pseudo-random time in [0, Skew] before the
// ordering rule is applied: verbs of one batch to different memory nodes then
// land in either order, while a client's verbs to one memory node still land
// in posting order. Most verbs are not delayed, so an observer usually reads
// fast enough to see the state between the two verbs of a reordered batch.
//
// The delay is a hash of the seed and the event sequence number at posting
// time (unique per verb, since every verb pushes an event), so a run stays
// deterministic, and the mode draws nothing from the random stream of Strict
// line orders: with Skew zero the model is exactly the one without it.

// skewDelay returns the Skew-mode delay of the verb being posted, in
// picoseconds; 0 when the mode is off.
func (s *sim) skewDelay() int64 {
	cfg := s.p.cfg.Sim
	if cfg.Skew <= 0 {
		return 0
	}
	h := s.seq*0x9e3779b97f4a7c15 ^ cfg.Seed
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	if h&3 != 0 {
		return 0
	}
	return int64((h >> 2) % uint64(durPS(cfg.Skew)+1))
}
