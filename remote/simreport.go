package remote

import "fmt"

// deadlockError is the ErrDeadlock of an empty agenda.
func deadlockError(parked, live int) error {
	return fmt.Errorf("%w: no event pending, %d client(s) parked in Wait, %d goroutine(s) started by Pool.Go not returned",
		ErrDeadlock, parked, live)
}

// report returns the virtual time elapsed, the load of every NIC as a share
// of its limits over that time, and the batch latencies of every client that
// completed a signaled batch.
func (s *sim) report() Report {
	var clients []*Client
	cns := s.p.ComputeNodes()
	for _, cn := range cns {
		clients = append(clients, cn.Clients()...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Report{Transport: "sim", Profile: s.prof.Name, Elapsed: psDur(s.clock)}
	sec := float64(s.clock) / 1e12
	util := func(n uint64, rate float64) float64 {
		if sec == 0 {
			return 0
		}
		return float64(n) / (sec * rate)
	}
	nicReport := func(n nic, iops float64) NICReport {
		return NICReport{
			Verbs: n.verbs, TxBytes: n.txBytes, RxBytes: n.rxBytes,
			IOPSUtil: util(n.verbs, iops),
			TxUtil:   util(n.txBytes, s.prof.Bandwidth),
			RxUtil:   util(n.rxBytes, s.prof.Bandwidth),
		}
	}
	for _, m := range s.mns {
		r.MemoryNodes = append(r.MemoryNodes, nicReport(m.nic, s.prof.MNIOPS))
	}
	for i := range cns {
		var n nic
		if i < len(s.cns) {
			n = s.cns[i]
		}
		r.ComputeNodes = append(r.ComputeNodes, nicReport(n, s.prof.CNIOPS))
	}
	for _, c := range clients {
		sc := c.sim
		if sc == nil || sc.batches == 0 {
			continue
		}
		r.Clients = append(r.Clients, ClientReport{
			ComputeNode: c.cn.id, Client: c.id, Batches: sc.batches,
			Mean: psDur(sc.latSum / int64(sc.batches)), Max: psDur(sc.latMax),
		})
	}
	return r
}
