// Package osthread runs work on goroutines locked to their OS threads,
// because the GPU runtimes keep per-thread state: the capture mode, "the
// thread that began a capture" and the current device.
package osthread

import (
	"fmt"
	"runtime"
	"time"
)

// Thread runs functions in order on one goroutine locked to its OS thread.
type Thread struct {
	jobs   chan func()
	exited chan struct{}
}

// Start starts a thread and runs bind on it first (when bind is set), e.g.
// to make a device current there. A failed bind ends the thread.
func Start(bind func() error) (*Thread, error) {
	t := &Thread{jobs: make(chan func()), exited: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(t.exited)
		if bind != nil {
			if err := bind(); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		for job := range t.jobs {
			job()
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("binding the device to a thread: %w", err)
	}
	return t, nil
}

// Go queues fn and returns where its error will arrive. It blocks while
// the thread is busy with earlier work.
func (t *Thread) Go(fn func() error) <-chan error {
	errc := make(chan error, 1)
	t.jobs <- func() { errc <- fn() }
	return errc
}

// Submit hands fn to the thread, and reports whether the thread took it
// before cancel fired (a thread still busy with earlier work does not).
// done closes when fn has returned.
func (t *Thread) Submit(fn func(), cancel <-chan time.Time) (done <-chan struct{}, taken bool) {
	d := make(chan struct{})
	select {
	case t.jobs <- func() { defer close(d); fn() }:
		return d, true
	case <-cancel:
		return d, false
	}
}

// Run runs fn on the thread and waits for it.
func (t *Thread) Run(fn func() error) error { return <-t.Go(fn) }

// Stop ends the thread once its queued work is done.
func (t *Thread) Stop() { close(t.jobs) }

// Exited is closed when the thread's goroutine has returned.
func (t *Thread) Exited() <-chan struct{} { return t.exited }

// Run runs fn once on a fresh goroutine locked to its OS thread and waits
// for it.
func Run(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- fn()
	}()
	return <-errc
}
