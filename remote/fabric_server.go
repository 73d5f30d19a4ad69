//go:build fabric

package remote

import (
	"fmt"

	"github.com/dmindex/dmindex/internal/fabric"
)

// listenFabric registers the node's regions with libfabric and opens its
// passive endpoint; the address and keys are handed out by frameFabric.
func (s *Server) listenFabric(cfg FabricServerConfig) error {
	regions := [][]byte{wordBytes(s.node.main)}
	if len(s.node.onChip) > 0 {
		regions = append(regions, wordBytes(s.node.onChip))
	}
	fs, err := fabric.Listen(fabric.ServerConfig{Provider: cfg.Provider, Addr: cfg.Addr, Domain: cfg.Domain}, regions)
	if err != nil {
		return fmt.Errorf("%w: fabric endpoint: %v", ErrBadRequest, err)
	}
	e := fabricEndpoint{Provider: fs.Provider(), Addr: fs.Addr()}
	for _, r := range fs.Regions() {
		e.Regions = append(e.Regions, [3]uint64{r.Base, r.Key, r.Len})
	}
	s.fabricInfo = appendFabricEndpoint(nil, &e)
	s.fabricDesc = fmt.Sprintf("fabric %s endpoint on %s", e.Provider, e.Addr)
	s.closeFabric = func() { fs.Close() }
	return nil
}
