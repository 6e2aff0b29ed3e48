//go:build linux

package osthread

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

const limit = 20 * time.Second

func TestAThreadRunsEverythingOnOneOSThread(t *testing.T) {
	bound := 0
	th, err := Start(func() error { bound = syscall.Gettid(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var tid int
		if err := th.Run(func() error { tid = syscall.Gettid(); return nil }); err != nil || tid != bound {
			t.Fatalf("run %d on thread %d (%v), bound on %d", i, tid, err, bound)
		}
	}
	want := errors.New("from the thread")
	if err := <-th.Go(func() error { return want }); err != want {
		t.Fatalf("Go gave %v", err)
	}
	th.Stop()
	select {
	case <-th.Exited():
	case <-time.After(limit):
		t.Fatalf("the thread did not exit within %v", limit)
	}
}

func TestAFailedBindEndsTheThread(t *testing.T) {
	want := errors.New("no device")
	if _, err := Start(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Start = %v", err)
	}
}

func TestSubmitToABusyThreadGivesUp(t *testing.T) {
	th, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer th.Stop()
	release := make(chan struct{})
	busy := th.Go(func() error { <-release; return nil })
	expired := make(chan time.Time)
	close(expired)
	if _, taken := th.Submit(func() {}, expired); taken {
		t.Fatal("a busy thread took more work")
	}
	close(release)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	done, taken := th.Submit(func() {}, nil)
	if !taken {
		t.Fatal("an idle thread refused work")
	}
	<-done
}
