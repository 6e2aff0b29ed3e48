//go:build unix

package childproc

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/term"
)

// fileLineEnd says where the child left f, a file it was given as it is:
// a regular file is read back at the byte before where the next write
// goes (the end for one opened to append, else the offset the child and
// this process share); a terminal's column, or what went into a pipe,
// socket or other device, cannot be read back.
func fileLineEnd(f *os.File) LineEnd {
	st, err := f.Stat()
	if err != nil {
		return LineUnseen
	}
	if !st.Mode().IsRegular() {
		if term.IsTerminal(int(f.Fd())) {
			return LineTerminal
		}
		return LineUnseen
	}
	fd := int(f.Fd())
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return LineUnseen
	}
	next := st.Size()
	if flags&syscall.O_APPEND == 0 {
		if next, err = syscall.Seek(fd, 0, io.SeekCurrent); err != nil {
			return LineUnseen
		}
	}
	if next == 0 {
		return LineStart
	}
	b := make([]byte, 1)
	if n, err := syscall.Pread(fd, b, next-1); n == 1 && err == nil {
		return lineEndOf(b[0], true)
	}
	// Open for writing only: read it through another description.
	r, err := os.Open(fmt.Sprintf("/dev/fd/%d", fd))
	if err != nil {
		return LineUnseen
	}
	defer r.Close()
	if n, err := r.ReadAt(b, next-1); n == 1 && (err == nil || err == io.EOF) {
		return lineEndOf(b[0], true)
	}
	return LineUnseen
}
