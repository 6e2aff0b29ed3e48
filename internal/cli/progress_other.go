//go:build !unix

package cli

// watchResize does nothing where there is no SIGWINCH: the width is still
// read before every redraw.
func watchResize(func()) (stop func()) { return func() {} }
