//go:build !unix

package childproc

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p; there are no process groups to reach its children.
func killGroup(p *os.Process) { _ = p.Kill() }

var signalNames = map[syscall.Signal]string{}
