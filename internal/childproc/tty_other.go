//go:build !linux

package childproc

import (
	"os"
	"syscall"
)

// Only on Linux does a child get the terminal's foreground.
func foregroundTTY(stdin *os.File) (int, bool) { return 0, false }
func restoreForeground(fd int)                 {}
func inForeground(*syscall.SysProcAttr, int)   {}
