package childproc

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// A child's death signal fires when the thread that started it ends, not
// the process. The Go runtime ends a thread when a goroutine that locked
// it returns: were the goroutine that started the child to leave its
// thread, the next such goroutine to run there would kill the child. Here
// goroutines lock and end the threads they land on, one after another,
// while the child runs: the first ones as the child has just started and
// the goroutine that started it waits for them (a thread it left would
// take them first), more after. The child must still be running when they
// are gone, and end as it would have: status 0, once its input ends.
func TestEndingOtherThreadsLeavesTheChildRunning(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	var ended []int
	// endAThread ends the thread that a new goroutine lands on, and
	// returns its id.
	endAThread := func() int {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread()
			tid <- syscall.Gettid()
			// Returning while locked ends this thread.
		}()
		return <-tid
	}
	spec := fake("drain-stdin")
	spec.Stdin, spec.Timeout = pr, limit
	started := make(chan int, 1)
	spec.Started = func(pid int) {
		for range 16 {
			ended = append(ended, endAThread())
		}
		started <- pid
	}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(context.Background(), spec)
		done <- outcome{res, err}
	}()
	select {
	case pid := <-started:
		killAtCleanup(t, pid)
	case <-time.After(limit):
		t.Fatalf("the child did not start within %v", limit)
	}
	pr.Close() // the child has its own
	for range 32 {
		ended = append(ended, endAThread())
	}
	// The kernel sends the death signals as each thread exits: wait for
	// them all to be gone from this process.
	deadline := time.Now().Add(limit)
	for _, tid := range ended {
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d still there after %v", tid, limit)
			}
			time.Sleep(time.Millisecond)
		}
	}
	pw.Close() // the end of the child's input: it exits 0
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if sig, ok := o.res.Signal(); ok || o.res.ExitCode() != 0 {
			t.Fatalf("the child ended with %s (%v) when %d threads of this process ended", o.res.ExitText(), sig, len(ended))
		}
	case <-time.After(limit):
		t.Fatalf("the child did not end within %v of its input's end", limit)
	}
}
