package cli

import (
	"context"
	"time"
)

// InterruptGrace is how long an interrupted command waits for its device
// to close (a handle's teardown, the runtime's own) before it exits
// anyway: the process's exit ends what closing waited for, such as an
// abandoned kernel still running, and the command ends within two seconds
// of the signal.
const InterruptGrace = 500 * time.Millisecond

// CloseUnlessInterrupted runs closeFn and waits for it; once ctx has
// ended, it waits at most InterruptGrace and leaves closeFn running. It
// reports whether closeFn finished, and its error when it did.
func CloseUnlessInterrupted(ctx context.Context, closeFn func() error) (finished bool, err error) {
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return true, err
	case <-time.After(InterruptGrace):
		return false, nil
	}
}
