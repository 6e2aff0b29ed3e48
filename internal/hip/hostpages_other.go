//go:build !unix

package hip

import "errors"

// MapHostPages is not available on this system: miotool's GPU backends
// run on Linux.
func MapHostPages(bytes int) (b []byte, unmap func() error, err error) {
	return nil, nil, errors.New("mapping host pages is supported on Unix systems only")
}
