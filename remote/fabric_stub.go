//go:build !fabric

package remote

import "fmt"

// errNoFabric is the error of the fabric transport in a build without it.
var errNoFabric = fmt.Errorf("%w: the fabric transport needs a build with -tags fabric (cgo and libfabric >= 1.17)", ErrBadRequest)

func (p *Pool) dialFabric(FabricConfig) error { return errNoFabric }

func (s *Server) listenFabric(FabricServerConfig) error { return errNoFabric }

// fabricClient is the fabric transport's client state; this build has none.
type fabricClient struct{}
