//go:build !unix

package childproc

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// signalGroup kills p; there are no process groups to reach its children,
// nor signals to forward.
func signalGroup(p *os.Process, _ syscall.Signal) { _ = p.Kill() }

var signalNames = map[syscall.Signal]string{}
