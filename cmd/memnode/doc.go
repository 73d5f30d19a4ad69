// Command memnode serves one memory node of a dmindex pool over TCP: it
// maps a region (anonymous memory, or a file whose contents survive
// restarts), listens on an address, authenticates every connection with a
// shared secret, and executes the verbs and allocation requests of compute
// nodes that use remote.Config{TCP: ...}. The memory node's CPU carries out
// the one-sided verbs (an emulation of RDMA for development and ordinary
// networks); docs/deploy.md describes deployments.
//
//	DMINDEX_TOKEN=secret memnode --listen 10.0.0.5:7707 --bytes 8G
//
// It prints one line, "memnode: ready on HOST:PORT ...", once it accepts
// connections, logs connections, refusals and errors with log/slog on
// standard error, and exits cleanly on SIGINT or SIGTERM.
package main
