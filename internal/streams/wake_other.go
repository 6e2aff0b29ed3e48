//go:build !linux

package streams

import (
	"sync/atomic"
	"time"
)

// Without futexes the sleeping thread polls its word: correct, slower.
func futexWait(word *atomic.Uint32, d time.Duration) {
	if d <= 0 || d > time.Millisecond {
		d = time.Millisecond
	}
	if word.Load() == 0 {
		time.Sleep(d)
	}
}

func futexWake(*atomic.Uint32) {}

func preciseSleeps() (restore func()) { return func() {} }
