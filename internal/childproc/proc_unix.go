//go:build unix && !linux

package childproc

import "syscall"

// sysProcAttr puts the child in a process group of its own, so that the
// group's kill reaches what it starts.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
