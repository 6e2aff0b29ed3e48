//go:build linux

package childproc

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// The watchdog ends a hung child: Run returns well within a bound far past
// the timeout. Without the watchdog's kill the test kills the child itself
// at that bound and fails, instead of waiting for the child for ever.
func TestTheWatchdogEndsAHangWithinABound(t *testing.T) {
	const bound = 10 * time.Second // 50 times the timeout
	pids := make(chan int, 1)
	spec := fake("hang")
	spec.Timeout = 200 * time.Millisecond
	spec.Started = func(pid int) { pids <- pid }
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(context.Background(), spec)
		done <- outcome{res, err}
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if !o.res.TimedOut {
			t.Fatalf("the child ended (%s) but not by the watchdog", o.res.ExitText())
		}
	case <-timer.C:
		pid := <-pids
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		t.Fatalf("the child was still running %v after its %v watchdog", bound, spec.Timeout)
	}
}
