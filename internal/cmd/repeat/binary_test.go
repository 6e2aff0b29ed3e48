//go:build linux

package repeat

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/repeat/repeattest"
	"miotool/internal/report"
)

// The built-binary tests run miotool itself, built for the test, on the
// kit's programs. They skip without gcc or go.

// gate is a FIFO a hanging flaky run writes its line to: reading it waits,
// without a sleep, until the run hangs.
type gate struct {
	path string
	line chan string
}

func newGate(t *testing.T, dir string) *gate {
	t.Helper()
	g := &gate{path: filepath.Join(dir, "gate"), line: make(chan string, 1)}
	if err := syscall.Mkfifo(g.path, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.Open(g.path) // waits for the writer
		if err != nil {
			g.line <- "error: " + err.Error()
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		g.line <- line
	}()
	t.Cleanup(func() {
		// A reader still waiting for a writer is let go.
		if f, err := os.OpenFile(g.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return g
}

// wait is the hanging run's process id, once it hangs.
func (g *gate) wait(t *testing.T, s *cmdtest.Started) int {
	t.Helper()
	select {
	case line := <-g.line:
		var run, pid int
		if _, err := fmt.Sscanf(line, "run %d hangs as process %d", &run, &pid); err != nil {
			t.Fatalf("the gate said %q: %v", line, err)
		}
		return pid
	case <-time.After(repeattest.Limit):
		t.Fatalf("no run hung within %v\nstderr %s", repeattest.Limit, s.Stderr())
	}
	return 0
}

// wantGone fails t unless process pid is gone within the limit: a killed
// process takes a moment to be reaped.
func wantGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(repeattest.Limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie no one has reaped yet that is no longer running.
		if err != nil || strings.Contains(string(data), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still runs after miotool ended", pid)
		}
		<-tick.C
	}
}

func TestBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	k := repeattest.Shared(t)
	bin := cmdtest.BuildMiotool(t)
	t.Run("an interrupt keeps the finished runs", func(t *testing.T) { interruptKeepsFinishedRuns(t, bin, k) })
	t.Run("the program's output never reaches stdout", func(t *testing.T) { programOutputNeverReachesStdout(t, bin) })
}

// interruptKeepsFinishedRuns: runs 0 to 2 pass and run 3 hangs; a signal
// then ends miotool with the signal's status, the hanging run is killed,
// and the result says INTERRUPTED with the three finished runs'
// statistics, in the file as on stdout.
func interruptKeepsFinishedRuns(t *testing.T, bin string, k *repeattest.Kit) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			g := newGate(t, dir)
			out := filepath.Join(dir, "result.json")
			s := cmdtest.StartBinary(t, bin, dir, cmdtest.Env(dir, "FLAKY_GATE="+g.path),
				"repeat", "--runs", "10", "--jobs", "1", "--export-json", out, "--", k.Flaky, "at:3h")
			pid := g.wait(t, s)
			code, _, stdout := s.Signal(c.sig, repeattest.Limit)
			if code != c.code {
				t.Fatalf("exit %d after %s, want %d\nstdout %s\nstderr %s", code, c.name, c.code, stdout, s.Stderr())
			}
			wantGone(t, pid)
			want := fmt.Sprintf("repeat: INTERRUPTED - interrupted by %s: 3 of 10 runs finished, 1 stopped while it ran, 6 not started; so far 0 of 3 runs failed (below 63.2%% at 95%% confidence)", c.name)
			if !strings.HasPrefix(stdout, want) {
				t.Errorf("stdout begins %q, want %q", cmdtest.FirstLine(stdout), want)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			r, err := report.ReadJSON(strings.NewReader(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != report.Interrupted || r.ExitCode() != c.code {
				t.Errorf("the file says %s, exit_code %d; want INTERRUPTED, %d", r.Verdict, r.ExitCode(), c.code)
			}
			for name, want := range map[string]int64{"runs": 3, "passed": 3, "interrupted": 1, "not run": 6} {
				if v, _ := r.Counter(name); v != want {
					t.Errorf("counter %s = %d, want %d", name, v, want)
				}
			}
		})
	}
}

// programOutputNeverReachesStdout: what the runs print is kept apart from
// miotool's result, which alone is on standard output.
func programOutputNeverReachesStdout(t *testing.T, bin string) {
	dir := t.TempDir()
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), repeattest.Limit,
		"repeat", "--runs", "3", "--format", "json", "--", "sh", "-c", "printf 'out%sput\\n' ted; printf 'err%sor\\n' ted >&2")
	// The command line is in the result; what it prints is not.
	if r.Code != 0 || strings.Contains(r.Stdout, "outtedput") || strings.Contains(r.Stderr, "errtedor") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := report.ReadJSON(strings.NewReader(r.Stdout)); err != nil {
		t.Errorf("stdout is not the result alone: %v", err)
	}
}
