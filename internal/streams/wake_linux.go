package streams

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Linux futex operations, private to the process.
const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

// futexWait sleeps while *word == 0, for at most d (forever when d <= 0).
// It goes through syscall.Syscall6, so the Go runtime knows the thread is
// in a blocking call and may run other goroutines on its P meanwhile.
func futexWait(word *atomic.Uint32, d time.Duration) {
	var ts *syscall.Timespec
	if d > 0 {
		t := syscall.NsecToTimespec(d.Nanoseconds())
		ts = &t
	}
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitPrivate, 0,
		uintptr(unsafe.Pointer(ts)), 0, 0)
}

// futexWake wakes the thread sleeping on word. It is a raw system call: it
// never blocks and needs nothing from the Go scheduler, so it is safe on a
// runtime's callback thread.
func futexWake(word *atomic.Uint32) {
	_, _, _ = syscall.RawSyscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakePrivate, 1, 0, 0, 0)
}

// PR_SET_TIMERSLACK / PR_GET_TIMERSLACK.
const (
	prSetTimerSlack = 29
	prGetTimerSlack = 30
)

// preciseSleeps makes the calling OS thread's timed sleeps end close to
// their deadline (Linux adds up to 50 µs of slack by default), and returns
// what puts the thread back. The caller is locked to its thread.
func preciseSleeps() (restore func()) {
	prev, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	if errno != 0 {
		return func() {}
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0); errno != 0 {
		return func() {}
	}
	return func() { _, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, prev, 0) }
}
