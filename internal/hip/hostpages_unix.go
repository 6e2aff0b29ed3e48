//go:build unix

package hip

import "syscall"

// MapHostPages maps bytes of zeroed, page-aligned host memory outside the
// Go heap, for HostRegister: a runtime that registers memory keeps its
// address, which the Go collector could otherwise reuse. unmap gives it
// back; it must not be registered then.
func MapHostPages(bytes int) (b []byte, unmap func() error, err error) {
	b, err = syscall.Mmap(-1, 0, bytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
