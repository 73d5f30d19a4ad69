package remote

// Placeholder replaced by the simulator implementation.
type simClient struct{}

func newSimulator(p *Pool, cfg SimConfig) transport { return newLocal(p) }
