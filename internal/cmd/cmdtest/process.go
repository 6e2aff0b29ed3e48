package cmdtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// UserFiles is what a user has beside a run of the built binary: a
// working directory with a miotool.yaml, a find-db folder with a db file
// of their own, and a private temporary folder (MIOpen-style lock files go
// to $TMPDIR/miopen-lockfiles). A run must leave the config and the db as
// they were, by bytes, mode and inode, unless it is one that writes a
// find-db record.
type UserFiles struct {
	Dir, Config, DBDir, DB, Tmp string
}

// NewUserFiles makes the files under t.TempDir(). dbFile is the name of
// the user db file in the db folder (e.g. finddb.UserFile's base name).
func NewUserFiles(t *testing.T, dbFile string) *UserFiles {
	t.Helper()
	root := t.TempDir()
	u := &UserFiles{Dir: filepath.Join(root, "work"), DBDir: filepath.Join(root, "db"), Tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{u.Dir, u.DBDir, u.Tmp, filepath.Join(root, "config")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u.Config = filepath.Join(u.Dir, "miotool.yaml")
	u.DB = filepath.Join(u.DBDir, dbFile)
	write := func(path, data string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(u.Config, "# mine\nbackend: sim\n", 0o640)
	write(u.DB, "# my notes=keep\r\nkey=ConvImplicitGemmTiledFwd:notanumber,0,x;Mine:1,0\r\n", 0o600)
	return u
}

// Env is the environment a run sees: nothing of the machine's but PATH,
// the user's folders, and MIOPEN_NAIVE_TIMEOUT=10 as in ScenarioEnv, with
// extra ("NAME=value") over it.
func (u *UserFiles) Env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Dir(u.Dir),
		"XDG_CONFIG_HOME=" + filepath.Join(filepath.Dir(u.Dir), "config"),
		"TMPDIR=" + u.Tmp,
		"MIOPEN_USER_DB_PATH=" + u.DBDir,
		"MIOPEN_NAIVE_TIMEOUT=10",
	}
	return append(env, extra...)
}

// FileState is a file's bytes, mode and inode.
type FileState struct {
	Path  string
	Data  []byte
	Mode  os.FileMode
	Inode uint64
}

// States reads the state of each path.
func States(t *testing.T, paths ...string) []FileState {
	t.Helper()
	out := make([]FileState, len(paths))
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = FileState{Path: p, Data: data, Mode: info.Mode()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			out[i].Inode = st.Ino
		}
	}
	return out
}

// CheckUnchanged fails for each file whose bytes, mode or inode differ
// from before.
func CheckUnchanged(t *testing.T, before []FileState) {
	t.Helper()
	paths := make([]string, len(before))
	for i, b := range before {
		paths[i] = b.Path
	}
	for i, now := range States(t, paths...) {
		b := before[i]
		switch {
		case !bytes.Equal(now.Data, b.Data):
			t.Errorf("%s changed:\n was %q\n now %q", b.Path, b.Data, now.Data)
		case now.Mode != b.Mode:
			t.Errorf("%s: mode %v, was %v", b.Path, now.Mode, b.Mode)
		case now.Inode != b.Inode:
			t.Errorf("%s: inode %d, was %d (replaced)", b.Path, now.Inode, b.Inode)
		}
	}
}

// CheckNoLockFiles fails when a run left a lock file in the user's
// temporary folder or beside the db.
func (u *UserFiles) CheckNoLockFiles(t *testing.T) {
	t.Helper()
	for _, pattern := range []string{filepath.Join(u.Tmp, "miopen-lockfiles", "*"), filepath.Join(u.DBDir, "*.lock")} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("lock files left behind: %v", left)
		}
	}
}

// Process is a run of the built binary.
type Process struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	lines          chan string // stderr, line by line
	done           chan struct{}
	exitCode       int
	signalled      time.Time
}

// Start starts bin with args in dir and env; t.Cleanup kills what is left
// of it.
func Start(t *testing.T, bin, dir string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout = &p.stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.done
		}
	})
	go func() {
		sc := bufio.NewScanner(io.TeeReader(errPipe, &p.stderr))
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // a test that waits for no line does not block the run
			}
		}
		_, _ = io.Copy(io.Discard, errPipe)
		err := p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		if ee, ok := err.(*exec.ExitError); ok {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.exitCode = 128 + int(ws.Signal())
			}
		}
		close(p.lines)
		close(p.done)
	}()
	return p
}

// WaitLine waits until a line of stderr contains substr, or fails the
// test at the deadline or when the process ends first.
func (p *Process) WaitLine(t *testing.T, substr string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("the run ended (exit %d) before a stderr line with %q\nstdout:\n%s\nstderr:\n%s", p.exitCode, substr, p.stdout.String(), p.stderr.String())
			}
			if strings.Contains(l, substr) {
				return
			}
		case <-deadline:
			t.Fatalf("no stderr line with %q within %s\nstderr:\n%s", substr, within, p.stderr.String())
		}
	}
}

// WaitStdout waits until stdout contains substr, or fails the test at the
// deadline or when the process ends first.
func (p *Process) WaitStdout(t *testing.T, substr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.stdout.String(), substr) {
		select {
		case <-p.done:
			if strings.Contains(p.stdout.String(), substr) {
				return
			}
			t.Fatalf("the run ended (exit %d) before %q on stdout\nstdout:\n%s\nstderr:\n%s", p.exitCode, substr, p.stdout.String(), p.stderr.String())
		case <-tick.C:
			if time.Now().After(deadline) {
				t.Fatalf("no %q on stdout within %s\nstdout:\n%s", substr, within, p.stdout.String())
			}
		}
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.signalled = time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Wait waits for the process to end, at most within, and returns its exit
// status (128+signal when a signal killed it) and how long after Signal
// it ended. Past the deadline it kills the process and fails the test.
func (p *Process) Wait(t *testing.T, within time.Duration) (code int, afterSignal time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Fatalf("the run did not end within %s; killed\nstdout:\n%s\nstderr:\n%s", within, p.stdout.String(), p.stderr.String())
	}
	if !p.signalled.IsZero() {
		afterSignal = time.Since(p.signalled)
	}
	return p.exitCode, afterSignal
}

// Stdout and Stderr are what the process wrote.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote to stderr.
func (p *Process) Stderr() string { return p.stderr.String() }

// Run runs bin to its end (within a minute) and returns its exit status,
// stdout and stderr.
func Run(t *testing.T, bin, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := Start(t, bin, dir, env, args...)
	code, _ = p.Wait(t, time.Minute)
	return code, p.Stdout(), p.Stderr()
}

// FirstLine is s's first line.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// LastLine is s's last non-empty line.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// ResultJSON is the part of a miotool/result document the tests read.
type ResultJSON struct {
	Check    string           `json:"check"`
	Verdict  string           `json:"verdict"`
	ExitCode int              `json:"exit_code"`
	Status   string           `json:"status"`
	Summary  string           `json:"summary"`
	Counters map[string]int64 `json:"counters"`
	Tables   []struct {
		Title string `json:"title"`
		Rows  []struct {
			Cells []string `json:"cells"`
		} `json:"rows"`
	} `json:"tables"`
}

// ParseResult decodes one result document.
func ParseResult(t *testing.T, out string) ResultJSON {
	t.Helper()
	var r ResultJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not a result document: %v\n%s", err, out)
	}
	return r
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
