// Package hiptest runs a test's work on goroutines locked to their OS
// threads, where the runtimes keep per-thread state, with every wait
// bounded so that a stuck thread fails the test instead of hanging it.
// Only tests import it.
package hiptest

import (
	"testing"
	"time"

	"miotool/internal/hip/osthread"
)

// Limit bounds every wait: wide enough for a loaded machine under the race
// detector, short enough that a stuck thread fails the test.
const Limit = 30 * time.Second

// Thread is a goroutine locked to one OS thread that runs what it is given.
type Thread struct {
	th *osthread.Thread
}

// StartThread starts a locked goroutine and stops it when the test ends.
func StartThread(t testing.TB) *Thread {
	t.Helper()
	th, err := osthread.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		th.Stop()
		wait(t, th.Exited(), "a test thread to exit", t.Errorf)
	})
	return &Thread{th: th}
}

// Do runs fn on the thread and waits for it.
func (th *Thread) Do(t testing.TB, what string, fn func()) {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	done, taken := th.th.Submit(fn, timer.C)
	if !taken {
		t.Fatalf("%s: the thread stayed busy for %v", what, Limit)
	}
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not finish within %v", what, Limit)
	}
}

// OnLockedThread runs fn on a new goroutine locked to its OS thread and
// waits for it.
func OnLockedThread(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = osthread.Run(func() error { fn(); return nil })
	}()
	wait(t, done, "work on another OS thread", t.Fatalf)
}

// wait reports through fail unless ch closes within Limit.
func wait(t testing.TB, ch <-chan struct{}, what string, fail func(string, ...any)) {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		fail("timed out after %v waiting for %s", Limit, what)
	}
}
