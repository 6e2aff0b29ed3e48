//go:build unix

package childproc

import (
	"os"
	"syscall"
)

// signalGroup sends sig to the process group p leads, or to p alone when
// there is no such group.
func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		_ = p.Signal(sig)
	}
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGILL: "SIGILL", syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGPIPE: "SIGPIPE", syscall.SIGHUP: "SIGHUP",
}
