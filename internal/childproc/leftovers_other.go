//go:build !linux

package childproc

import "time"

// Without Linux's subreaper and /proc, a descendant that left the child's
// group cannot be found: the group's kill is all there is.
func becomeSubreaper() {}

func endLeftovers(pgid int, token string, deadline time.Time) int { return 0 }

// watcher: there is no death signal to complete here either.
type watcher struct{}

func startWatcher(token, leftover string) *watcher { return nil }
func (w *watcher) watch(pgid int)                  {}
func (w *watcher) release()                        {}
