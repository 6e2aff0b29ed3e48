//go:build unix

package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// watchResize calls resized whenever the terminal's size changes
// (SIGWINCH) until the returned stop is called.
func watchResize(resized func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-ch:
				resized()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
		<-finished
	}
}
