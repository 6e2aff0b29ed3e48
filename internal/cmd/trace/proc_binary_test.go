//go:build linux

package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"miotool/internal/trace/tracetest"
)

// The program gets miotool's own standard output, as it is, so that it
// sees what it would see without miotool: a reader that has gone ends it
// with SIGPIPE (`miotool trace -- prog | head -1` ends at once), and a
// terminal is a terminal.
func TestTraceBinaryGivesTheProgramItsOwnStdout(t *testing.T) {
	b := newBinary(t)
	t.Run("a reader that has gone", func(t *testing.T) {
		export := filepath.Join(t.TempDir(), "result.json")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		cmd := b.command("trace", "--export-json", export, "--", "/bin/sh", "-c", "while :; do echo y; done")
		cmd.Stdout = pw
		done := b.startCmd(t, cmd)
		pw.Close()
		// As head -1 does: one line, then the reader goes.
		if line, err := bufio.NewReader(pr).ReadString('\n'); line != "y\n" || err != nil {
			t.Fatalf("first line %q (%v)", line, err)
		}
		pr.Close()
		b.waitCmd(t, cmd, done)
		data, err := os.ReadFile(export)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte("SIGPIPE")) {
			t.Errorf("the program did not end by SIGPIPE:\n%s", data)
		}
	})
	t.Run("a terminal stays a terminal", func(t *testing.T) {
		tty, ctl := openPTY(t)
		cmd := b.command("trace", "--", "/bin/sh", "-c", `if [ -t 1 ]; then echo "stdout is a terminal"; else echo "stdout is no terminal"; fi`)
		cmd.Stdout = tty
		var screen bytes.Buffer
		read := make(chan struct{})
		go func() { defer close(read); _, _ = io.Copy(&screen, ctl) }()
		done := b.startCmd(t, cmd)
		b.waitCmd(t, cmd, done)
		tty.Close() // the terminal's last writer: the reader gets what is left, then the end
		select {
		case <-read:
		case <-time.After(tracetest.Limit):
			t.Fatalf("the terminal's output did not end within %v", tracetest.Limit)
		}
		if got := screen.String(); !strings.Contains(got, "stdout is a terminal\r\n") {
			t.Errorf("the program saw no terminal:\n%q", got)
		}
	})
}

// A descendant that left the program's group, for a session or a group of
// its own, does not outlive the trace. The program (sh) says its process
// id once it has left, and then exits.
func TestTraceBinaryLeavesNoDescendant(t *testing.T) {
	b := newBinary(t)
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skipf("no perl to leave the group with: %v", err)
	}
	for _, tt := range []struct{ name, leave string }{
		{"a session of its own", "use POSIX; POSIX::setsid() or die"},
		{"a group of its own", "setpgrp(0, 0) or die"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			script := `pid=$(perl -e '` + tt.leave + `; print "$$\n"; close STDOUT; exec "sleep", "1000"' 2>/dev/null </dev/null &); echo "$pid"`
			r := b.run(t, "", nil, "trace", "--", "/bin/sh", "-c", script)
			first, _, _ := strings.Cut(r.stdout, "\n")
			pid, err := strconv.Atoi(first)
			if err != nil {
				t.Fatalf("exit %d, no process id first on stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			tracetest.KillOnCleanup(t, pid, pid)
			tracetest.WantPIDGone(t, pid)
		})
	}
}

// command is the built miotool with args, in its environment and folder,
// reading the null device.
func (b *binary) command(args ...string) *exec.Cmd {
	cmd := exec.Command(b.bin, args...)
	cmd.Env, cmd.Dir = append([]string{}, b.env...), b.home
	return cmd
}

// startCmd starts cmd, killed when t ends, and returns what its Wait
// returns.
func (b *binary) startCmd(t *testing.T, cmd *exec.Cmd) <-chan error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return done
}

// waitCmd fails t unless cmd ends within the limit.
func (b *binary) waitCmd(t *testing.T, cmd *exec.Cmd, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(tracetest.Limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("miotool %v did not end within %v", cmd.Args[1:], tracetest.Limit)
	}
}

// openPTY opens a pseudo-terminal and returns its terminal end and its
// controlling end, closed when t ends; it skips where there is none.
func openPTY(t *testing.T) (tty, ctl *os.File) {
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

// An output that would replace the program or what it reads is refused
// before anything runs (exit 2), and the file is left as it was: the
// program as the program's $PATH finds it, a file an argument names, also
// after --opt=, and the file that is standard input, by another name too.
func TestTraceBinaryRefusesAnOutputThatTheProgramReads(t *testing.T) {
	b := newBinary(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, in, alias := filepath.Join(bin, "prog"), filepath.Join(dir, "in.txt"), filepath.Join(dir, "alias.txt")
	const script = "#!/bin/sh\ncat \"$@\"\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, alias); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + bin + ":" + os.Getenv("PATH")
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"the program on its $PATH", "", []string{"--junit", prog, "--", "prog"}, "is the program prog as $PATH finds it"},
		{"an argument", "", []string{"--export-json", in, "--", "prog", in}, "is the file " + in + " the argument names"},
		{"after --opt=", "", []string{"--junit", in, "--", "prog", "--in=" + in}, "the argument --in=" + in + " names"},
		{"standard input", in, []string{"--junit", in, "--", "prog"}, "is the file open as standard input"},
		{"standard input by another name", in, []string{"--export-markdown", alias, "--", "prog"}, "is the file open as standard input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := b.command(append([]string{"trace"}, tt.args...)...)
			cmd.Env = append(cmd.Env, path)
			if tt.stdin != "" {
				f, err := os.Open(tt.stdin)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdin = f
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			b.waitCmd(t, cmd, b.startCmd(t, cmd))
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if code := cmd.ProcessState.ExitCode(); code != 2 || stdout.Len() != 0 || !strings.Contains(first, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout.String(), stderr.String(), tt.want)
			}
		})
	}
	for f, want := range map[string]string{prog: script, in: "input\n"} {
		if data, err := os.ReadFile(f); err != nil || string(data) != want {
			t.Errorf("%s holds %q (%v), want %q", f, data, err, want)
		}
	}
}
