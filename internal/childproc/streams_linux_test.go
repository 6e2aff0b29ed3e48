package childproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal and returns its terminal end (what a
// program on a terminal has) and its controlling end; both are closed when
// t ends. What is written to the terminal is read and dropped. It skips
// where there is none.
func openPTY(t *testing.T) (tty, ctl *os.File) {
	t.Helper()
	tty, ctl = openPTYBare(t)
	// What the child writes to the terminal is read and dropped, so that
	// it never blocks on a full terminal.
	go func() { _, _ = io.Copy(io.Discard, ctl) }()
	return tty, ctl
}

// openPTYBare is openPTY with nothing reading the controlling end.
func openPTYBare(t *testing.T) (tty, ctl *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	var unlock int32
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ctl.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlocking the pseudo-terminal: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ctl.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Skipf("naming the pseudo-terminal: %v", e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty, ctl
}

// failingWriter fails every write, as a reader that has gone.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("the reader has gone") }

// The child gets miotool's own streams as they are, so that it sees what
// it would see without miotool; only where a caller gives a writer that is
// no file does a copy stand in between, and then a failed copy is a reader
// gone for the child too.
func TestStreamsReachTheChildAsTheyAre(t *testing.T) {
	t.Run("a pipe whose reader has gone", func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pr.Close()
		defer pw.Close()
		spec := fake("yes")
		spec.Stdout, spec.Timeout = pw, limit
		res, err := Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if sig, _ := res.Signal(); sig != syscall.SIGPIPE || res.TimedOut || res.StdoutEnd != LineUnseen {
			t.Fatalf("%s, timed out %v, stdout end %v; want SIGPIPE at once, the end unseen", res.ExitText(), res.TimedOut, res.StdoutEnd)
		}
	})
	t.Run("a writer that fails", func(t *testing.T) {
		spec := fake("yes")
		spec.Stdout, spec.Timeout = failingWriter{}, limit
		res, err := Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if sig, _ := res.Signal(); sig != syscall.SIGPIPE || res.TimedOut {
			t.Fatalf("%s, timed out %v; want SIGPIPE at once", res.ExitText(), res.TimedOut)
		}
	})
	t.Run("a terminal stays a terminal", func(t *testing.T) {
		tty, _ := openPTY(t)
		spec := fake("isatty")
		spec.Stdin, spec.Stdout, spec.Foreground = tty, tty, true
		res, err := Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Stderr.Data); got != "stdin true stdout true\n" || res.StdoutEnd != LineTerminal {
			t.Fatalf("the child said %q, stdout end %v", got, res.StdoutEnd)
		}
	})
	t.Run("a reader and a writer are copied", func(t *testing.T) {
		var out bytes.Buffer
		in := "line one\n\x00binary\xff"
		spec := fake("cat")
		spec.Stdin, spec.Stdout = strings.NewReader(in), &out
		res, err := Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if out.String() != in || res.StdoutEnd != LineOpen || len(res.Stdout.Data) != 0 {
			t.Fatalf("copied %q, stdout end %v, captured %q", out.String(), res.StdoutEnd, res.Stdout.Data)
		}
	})
	t.Run("a file the child is given is the caller's", func(t *testing.T) {
		in, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		spec := fake("drain-stdin")
		spec.Stdin = in
		if res, err := Run(context.Background(), spec); err != nil || res.ExitCode() != 0 {
			t.Fatalf("%v %s", err, res.ExitText())
		}
		// The child read the caller's own file description: its offset
		// moved to the end.
		off, err := in.Seek(0, io.SeekCurrent)
		st, _ := in.Stat()
		if err != nil || off != st.Size() {
			t.Fatalf("offset %d (%v), want the file's end %d", off, err, st.Size())
		}
	})
}

// Where the child left its standard output, so that what comes next can
// start a line of its own: read back from a regular file, whichever way it
// is open, seen by a copy, and said unknown for a pipe or a terminal.
func TestWhereTheChildLeftItsOutput(t *testing.T) {
	dir := t.TempDir()
	file := func(before string, flag int) func(t *testing.T) io.Writer {
		return func(t *testing.T) io.Writer {
			path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
			if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, flag, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if flag&os.O_APPEND == 0 {
				if _, err := f.Seek(0, io.SeekEnd); err != nil {
					t.Fatal(err)
				}
			}
			return f
		}
	}
	pipe := func(t *testing.T) io.Writer {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Close(); pw.Close() })
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		return pw
	}
	for _, tt := range []struct {
		name   string
		stdout func(t *testing.T) io.Writer // nil: captured
		print  string
		want   LineEnd
	}{
		{"captured, nothing", nil, "", LineStart},
		{"captured, a line", nil, "a line\n", LineStart},
		{"captured, an open line", nil, "no newline", LineOpen},
		{"copied, an open line", func(*testing.T) io.Writer { return &bytes.Buffer{} }, "no newline", LineOpen},
		{"copied, nothing", func(*testing.T) io.Writer { return &bytes.Buffer{} }, "", LineStart},
		{"a file, a line", file("", os.O_WRONLY), "a line\n", LineStart},
		{"a file, an open line", file("", os.O_WRONLY), "no newline", LineOpen},
		{"a file read and written, an open line", file("", os.O_RDWR), "no newline", LineOpen},
		{"a file appended to, an open line", file("before\n", os.O_WRONLY|os.O_APPEND), "no newline", LineOpen},
		{"a file appended to, a line", file("before", os.O_WRONLY|os.O_APPEND), "after\n", LineStart},
		{"a file whose line was open before, nothing", file("open", os.O_WRONLY), "", LineOpen},
		{"an empty file, nothing", file("", os.O_WRONLY), "", LineStart},
		{"a pipe", pipe, "a line\n", LineUnseen},
		{"a terminal", func(t *testing.T) io.Writer { tty, _ := openPTY(t); return tty }, "a line\n", LineTerminal},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := fake("print", "PRINT="+tt.print)
			if tt.stdout != nil {
				spec.Stdout = tt.stdout(t)
			}
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode() != 0 || res.StdoutEnd != tt.want {
				t.Fatalf("%s, stdout end %v, want %v", res.ExitText(), res.StdoutEnd, tt.want)
			}
		})
	}
}

// inForegroundOf says whether this process's group is the foreground group
// of the terminal tty.
func inForegroundOf(tty *os.File) bool {
	pgrp, err := tcgetpgrp(int(tty.Fd()))
	return err == nil && pgrp == syscall.Getpgrp()
}

// A child on miotool's terminal gets the terminal's foreground while it
// runs, as a shell gives it, and miotool gets it back when the child has
// ended. The parent here is a session leader with the terminal as its
// controlling one, as a shell's job is.
func TestTheChildGetsTheTerminalsForeground(t *testing.T) {
	tty, ctl := openPTYKeepingOutput(t)
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), fakeEnv+"=foreground-parent")
	parent.Stdin, parent.Stdout, parent.Stderr = tty, tty, tty
	parent.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, parent.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- parent.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the parent: %v", err)
		}
	case <-time.After(limit):
		t.Fatalf("the parent did not end within %v", limit)
	}
	tty.Close() // the terminal's last writer: its output ends
	got := ctl.output(t)
	for _, want := range []string{"child: in the foreground true\r\n", "parent: in the foreground true\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows %q, want %q in it", got, want)
		}
	}
}

// ptyOutput is what was written to a pseudo-terminal.
type ptyOutput struct {
	buf  bytes.Buffer
	done chan struct{}
}

// output is all that was written, once every terminal end is closed.
func (p *ptyOutput) output(t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("the terminal's output did not end within %v", limit)
	}
	return p.buf.String()
}

// openPTYKeepingOutput is openPTY, with what is written to the terminal
// kept.
func openPTYKeepingOutput(t *testing.T) (*os.File, *ptyOutput) {
	t.Helper()
	tty, ctl := openPTYBare(t)
	out := &ptyOutput{done: make(chan struct{})}
	go func() { defer close(out.done); _, _ = io.Copy(&out.buf, ctl) }()
	return tty, out
}
