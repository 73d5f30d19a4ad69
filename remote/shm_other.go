//go:build !unix

package remote

import "fmt"

func (p *Pool) openShm(ShmConfig) error {
	return fmt.Errorf("%w: the shm transport needs a unix system", ErrBadRequest)
}

// RemoveShm deletes the memory-node files of a shared-memory pool in dir.
func RemoveShm(dir string) error {
	return fmt.Errorf("%w: the shm transport needs a unix system", ErrBadRequest)
}

func openNodeFile(string, Config) (*memNode, func(), error) {
	return nil, nil, fmt.Errorf("%w: memory-node files need a unix system", ErrBadRequest)
}
