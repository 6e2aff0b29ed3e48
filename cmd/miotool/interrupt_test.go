//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/testutil"
)

// processLimit bounds every wait of these tests: wide for a loaded
// machine, and a failure rather than a hang.
const processLimit = 60 * time.Second

// procEntry is one live process as /proc/PID/stat has it.
type procEntry struct{ pid, ppid, pgrp int }

// liveProcesses lists the processes that are not zombies.
func liveProcesses(t *testing.T) []procEntry {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []procEntry
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // it ended while we looked
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s[:i])[0])
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		out = append(out, procEntry{pid, ppid, pgrp})
	}
	return out
}

// waitForChild waits, within processLimit, until parent has a live child
// process, and returns its pid.
func waitForChild(t *testing.T, parent int) int {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	deadline := time.Now().Add(processLimit)
	for {
		for _, p := range liveProcesses(t) {
			if p.ppid == parent {
				return p.pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("miotool (pid %d) started no child within %v", parent, processLimit)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
	}
}

// wantNoSurvivor fails t unless, within processLimit, no live process is
// in process group pgrp or has pid.
func wantNoSurvivor(t *testing.T, pgrp, pid int) {
	t.Helper()
	deadline := time.Now().Add(processLimit)
	for {
		var left []procEntry
		for _, p := range liveProcesses(t) {
			if p.pgrp == pgrp || p.pid == pid {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running %v after miotool was killed: %+v", processLimit, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// miotoolRun is a started miotool; its Wait runs on a goroutine of its
// own from the start, whose result arrives on exited.
type miotoolRun struct {
	*exec.Cmd
	exited chan error
}

// startMiotool starts the built binary in the module root with an
// environment of its own. When the test ends, the process is killed and
// its waiting goroutine joined.
func startMiotool(t *testing.T, bin string, args ...string) (*miotoolRun, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Dir = testutil.ModuleRoot(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := &miotoolRun{Cmd: cmd, exited: make(chan error, 1)}
	waited := testutil.Go(t, processLimit, func() { run.exited <- cmd.Wait() })
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	return run, &out, &errOut
}

// waitExit waits for run within processLimit and returns its exit status.
func waitExit(t *testing.T, run *miotoolRun, errOut *bytes.Buffer) int {
	t.Helper()
	select {
	case err := <-run.exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return run.ProcessState.ExitCode()
	case <-time.After(processLimit):
		t.Fatalf("miotool did not exit within %v of the signal; stderr:\n%s", processLimit, errOut)
	}
	return -1
}

var suiteArgs = []string{"report", "--suite", "configs/suites/pr12265.yaml", "--repeat", "3", "--backend", "sim", "--no-progress"}

// SIGINT once the suite's first check runs: exit 130, a result that says
// INTERRUPTED, and the checks never reached not run, in every format.
func TestSIGINTDuringTheSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	bin := cmdtest.BuildMiotool(t)
	junit := filepath.Join(t.TempDir(), "junit.xml")
	for _, format := range []string{"markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			args := append(append([]string{}, suiteArgs...), "--format", format)
			if format == "json" {
				args = append(args, "--junit", junit)
			}
			cmd, out, errOut := startMiotool(t, bin, args...)
			child := waitForChild(t, cmd.Process.Pid)
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, errOut); code != 130 {
				t.Fatalf("exit %d, want 130; stderr:\n%s", code, errOut)
			}
			wantNoSurvivor(t, child, child)
			switch format {
			case "markdown":
				head, _, _ := strings.Cut(out.String(), "\n")
				if head != "### Suite pr12265: INTERRUPTED" {
					t.Errorf("Markdown headline %q", head)
				}
			case "json":
				var res struct {
					Verdict     string `json:"verdict"`
					ExitCode    int    `json:"exit_code"`
					Interrupted string `json:"interrupted"`
					Totals      struct {
						NotRun      int `json:"not_run"`
						Met         int `json:"met"`
						Unmet       int `json:"unmet"`
						Interrupted int `json:"interrupted"`
					} `json:"totals"`
				}
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					t.Fatalf("%v:\n%s", err, out)
				}
				if res.Verdict != "INTERRUPTED" || res.ExitCode != 130 || res.Interrupted != "interrupted by SIGINT" || res.Totals.NotRun == 0 ||
					res.Totals.Interrupted != 1 {
					t.Errorf("result %+v", res)
				}
				data, err := os.ReadFile(junit)
				if err != nil {
					t.Fatal(err)
				}
				// The check that was running is an error, so that no CI
				// reads the suite as green; those never reached are skipped.
				var doc struct {
					XMLName xml.Name
					Errors  int `xml:"errors,attr"`
					Skipped int `xml:"skipped,attr"`
				}
				if err := xml.Unmarshal(data, &doc); err != nil {
					t.Fatal(err)
				}
				if doc.XMLName.Local != "testsuite" || doc.Errors != 1 || doc.Skipped == 0 || !bytes.Contains(data, []byte(`type="interrupted"`)) ||
					!bytes.Contains(data, []byte(`name="miotool.verdict" value="INTERRUPTED"`)) {
					t.Errorf("JUnit <%s>: %d errors, %d skipped:\n%s", doc.XMLName.Local, doc.Errors, doc.Skipped, data)
				}
			}
		})
	}
}

// SIGINT during stress-threads: exit 130; the run it killed is counted as
// interrupted, not as a crash.
func TestSIGINTDuringStress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	bin := cmdtest.BuildMiotool(t)
	cmd, out, errOut := startMiotool(t, bin, "stress-threads", "--backend", "sim", "--cache=locked", "--runs", "3", "--iters", "100",
		"--format", "json", "--no-progress")
	child := waitForChild(t, cmd.Process.Pid)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, errOut); code != 130 {
		t.Fatalf("exit %d, want 130; stderr:\n%s", code, errOut)
	}
	wantNoSurvivor(t, child, child)
	var res struct {
		Verdict  string           `json:"verdict"`
		Counters map[string]int64 `json:"counters"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if res.Verdict != "INTERRUPTED" || res.Counters["interrupted"] < 1 || res.Counters["crashed"] != 0 {
		t.Errorf("verdict %s, counters %v", res.Verdict, res.Counters)
	}
}

// SIGKILL of miotool, which cannot be caught: its children die with it
// (Pdeathsig), and so does whatever they started (their process group).
func TestSIGKILLLeavesNoChild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"suite", append(append([]string{}, suiteArgs...), "--format", "json")},
		{"stress", []string{"stress-threads", "--backend", "sim", "--cache=locked", "--runs", "3", "--iters", "100", "--no-progress"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd, _, errOut := startMiotool(t, bin, tt.args...)
			child := waitForChild(t, cmd.Process.Pid)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, errOut); code != -1 {
				t.Errorf("exit %d, want death by SIGKILL", code)
			}
			wantNoSurvivor(t, child, child)
		})
	}
}
