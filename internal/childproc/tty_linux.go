package childproc

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/term"
)

// foregroundTTY says whether the child should get the terminal: its
// standard input is a terminal whose foreground group is this process's.
func foregroundTTY(stdin *os.File) (int, bool) {
	if stdin == nil {
		return 0, false
	}
	fd := int(stdin.Fd())
	if !term.IsTerminal(fd) {
		return 0, false
	}
	pgrp, err := tcgetpgrp(fd)
	if err != nil || pgrp != syscall.Getpgrp() {
		return 0, false
	}
	return fd, true
}

// inForeground has the child's group put in the foreground of terminal tty
// as it starts.
func inForeground(attr *syscall.SysProcAttr, tty int) { attr.Foreground, attr.Ctty = true, tty }

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, e
	}
	return int(pgrp), nil
}

var foregroundMu sync.Mutex

// restoreForeground gives the terminal back to this process's group.
// Setting it from a background group raises SIGTTOU, which is ignored
// meanwhile, as shells do.
func restoreForeground(fd int) {
	foregroundMu.Lock()
	defer foregroundMu.Unlock()
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&pgrp)))
}
