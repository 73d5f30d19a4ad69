//go:build !fabric

package remote

import "fmt"

func (p *Pool) dialFabric(FabricConfig) error {
	return fmt.Errorf("%w: the fabric transport needs a build with -tags fabric (cgo and libfabric >= 1.17)", ErrBadRequest)
}
