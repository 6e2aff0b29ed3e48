package cmdtest

// The built binary as a user runs it: a clean environment in a folder of
// its own, a deadline on every run, signals, and the user's files compared
// before and after.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env is a clean environment for the binary: PATH, a HOME and user config
// folder inside dir (so no user's miotool.yaml or find-db is read), and
// extra's KEY=VALUE entries.
func Env(dir string, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "TMPDIR=" + os.TempDir()}
	return append(env, extra...)
}

// Ran is how one run of the binary ended.
type Ran struct {
	Code           int
	Stdout, Stderr string
}

// FirstLine is the first line of s.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// RunBinary runs bin with args in dir, with env, and waits at most limit:
// a run still going then is killed and fails the test.
func RunBinary(t *testing.T, bin, dir string, env []string, limit time.Duration, args ...string) Ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after %v; killed\nstdout %s\nstderr %s", args, limit, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return Ran{Code: cmd.ProcessState.ExitCode(), Stdout: out.String(), Stderr: errOut.String()}
}

// Started is the binary running in the background, for a test that
// signals it.
type Started struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout bytes.Buffer
	lines  chan string   // standard error's lines, as they come
	done   chan struct{} // closed when standard error has ended
	waited bool
	mu     sync.Mutex
	stderr strings.Builder
}

// StartBinary starts bin with args in its own process group; the test's
// cleanup kills the group and reaps the process if it still runs.
func StartBinary(t *testing.T, bin, dir string, env []string, args ...string) *Started {
	t.Helper()
	s := &Started{t: t, cmd: exec.Command(bin, args...), lines: make(chan string, 1<<14), done: make(chan struct{})}
	s.cmd.Dir, s.cmd.Env = dir, env
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stdout = &s.stdout
	errPipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
		if !s.waited {
			_ = s.cmd.Wait()
		}
	})
	go func() {
		defer close(s.done)
		defer close(s.lines)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default: // nobody waits for so many lines; Stderr keeps them
			}
		}
		_, _ = io.Copy(io.Discard, errPipe)
	}()
	return s
}

// WaitForLine waits at most limit for a line of standard error holding
// marker, and fails the test without one.
func (s *Started) WaitForLine(marker string, limit time.Duration) {
	s.t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("the process ended before it printed %q:\n%s", marker, s.Stderr())
			}
			if strings.Contains(line, marker) {
				return
			}
		case <-deadline:
			s.t.Fatalf("no line with %q within %v:\n%s", marker, limit, s.Stderr())
		}
	}
}

// Stderr is what the process printed on standard error so far.
func (s *Started) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// Signal sends sig and waits at most limit for the process to exit; it
// returns the exit status, how long the exit took, and standard output.
// A process still running after limit fails the test.
func (s *Started) Signal(sig syscall.Signal, limit time.Duration) (code int, took time.Duration, stdout string) {
	s.t.Helper()
	start := time.Now()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(limit):
		s.t.Fatalf("still running %v after %v\nstderr %s", limit, sig, s.Stderr())
	}
	_ = s.cmd.Wait()
	s.waited = true
	return s.cmd.ProcessState.ExitCode(), time.Since(start), s.stdout.String()
}

// FileState is a file as a run must leave it: its bytes, mode and inode.
type FileState struct {
	Path     string
	Data     []byte
	Mode     fs.FileMode
	Dev, Ino uint64
}

// Snapshot records the files at paths.
func Snapshot(t *testing.T, paths ...string) []FileState {
	t.Helper()
	var out []FileState
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		out = append(out, FileState{Path: p, Data: data, Mode: info.Mode(), Dev: uint64(st.Dev), Ino: st.Ino})
	}
	return out
}

// Unchanged fails the test for every file that is not as Snapshot found it.
func Unchanged(t *testing.T, what string, before []FileState) {
	t.Helper()
	for _, b := range before {
		now := Snapshot(t, b.Path)[0]
		switch {
		case !bytes.Equal(now.Data, b.Data):
			t.Errorf("%s: %s changed its bytes", what, b.Path)
		case now.Mode != b.Mode:
			t.Errorf("%s: %s changed its mode from %v to %v", what, b.Path, b.Mode, now.Mode)
		case now.Dev != b.Dev || now.Ino != b.Ino:
			t.Errorf("%s: %s was replaced (inode %d, was %d)", what, b.Path, now.Ino, b.Ino)
		}
	}
}

// WantUsageError fails t unless r exited 2 (a usage error) with a first
// line on standard error that starts with first, and no stack trace.
func WantUsageError(t *testing.T, r Ran, first string) {
	t.Helper()
	if r.Code != 2 || !strings.HasPrefix(FirstLine(r.Stderr), first) {
		t.Errorf("exit %d, stderr %q; want 2 and a first line starting %q", r.Code, r.Stderr, first)
	}
	if strings.Contains(r.Stderr, "goroutine ") {
		t.Errorf("a refusal printed a stack trace:\n%s", r.Stderr)
	}
}

// WantRefused is WantUsageError with nothing on standard output.
func WantRefused(t *testing.T, r Ran, first string) {
	t.Helper()
	WantUsageError(t, r, first)
	if r.Stdout != "" {
		t.Errorf("a refused command printed on stdout: %q", r.Stdout)
	}
}
