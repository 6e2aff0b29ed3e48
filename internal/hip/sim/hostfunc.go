package sim

import (
	"fmt"
	"sync"
	"time"

	"miotool/internal/hip"
)

// callbackRunner is the one goroutine that runs every host function of
// every simulated device, one at a time, as the real runtimes' single
// callback thread does. It lives while any device is open.
type callbackRunner struct {
	calls  chan hostCall
	quit   chan struct{}
	exited chan struct{}
}

type hostCall struct {
	dev  *Device
	fn   func()
	done chan struct{}
}

var callbacks struct {
	mu     sync.Mutex
	refs   int
	runner *callbackRunner
}

func acquireCallbackRunner() *callbackRunner {
	callbacks.mu.Lock()
	defer callbacks.mu.Unlock()
	if callbacks.refs == 0 {
		r := &callbackRunner{calls: make(chan hostCall), quit: make(chan struct{}), exited: make(chan struct{})}
		go r.loop()
		callbacks.runner = r
	}
	callbacks.refs++
	return callbacks.runner
}

// releaseCallbackRunner drops a device's reference; the last one stops the
// goroutine and waits for it to exit.
func releaseCallbackRunner() {
	callbacks.mu.Lock()
	defer callbacks.mu.Unlock()
	callbacks.refs--
	if callbacks.refs > 0 {
		return
	}
	close(callbacks.runner.quit)
	<-callbacks.runner.exited
	callbacks.runner = nil
}

func (r *callbackRunner) loop() {
	defer close(r.exited)
	for {
		select {
		case c := <-r.calls:
			c.dev.runHostCall(c)
		case <-r.quit:
			return
		}
	}
}

// call runs fn on the callback goroutine and returns when it has returned.
// Channel senders are served in arrival order, so host functions run in
// the order their streams reach them.
func (r *callbackRunner) call(d *Device, fn func()) {
	done := make(chan struct{})
	r.calls <- hostCall{dev: d, fn: fn, done: done}
	<-done
}

// runHostCall applies the injected holds and delays, then calls fn. Both
// end early when the device closes, so Close cannot hang on them.
func (d *Device) runHostCall(c hostCall) {
	defer close(c.done)
	d.faults.waitHostGates(d.closeCh)
	if delay := d.faults.hostDelay(); delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-d.closeCh:
			t.Stop()
		}
	}
	defer func() {
		if r := recover(); r != nil {
			d.setSticky(hip.ErrLaunchFailure, fmt.Sprintf("host function panicked: %v", r))
		}
	}()
	c.fn()
}

// LaunchHostFunc queues fn on s. It runs on the process-wide callback
// goroutine when s reaches it, and holds s (and its hardware queue) until
// it returns. On a capturing stream it becomes a host node of the graph.
func (d *Device) LaunchHostFunc(s hip.Stream, fn func()) error {
	const op = "LaunchHostFunc"
	if fn == nil {
		return d.newErr(op, hip.ErrInvalidValue, "host function is nil")
	}
	return d.submit(op, s, &node{kind: nodeHostFunc, fn: fn})
}
