package childproc

import "syscall"

// sysProcAttr puts the child in a process group of its own, so that the
// group's kill reaches what it starts, and has the kernel kill it when the
// thread that started it dies: a child never outlives miotool.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
