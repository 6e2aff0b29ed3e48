package stress

// stress-threads as a user runs it: the built binary, a clean environment,
// the user's files compared before and after.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
)

// Bad input is exit 2 with one clear line, before any run starts, and
// leaves the user's config file as it was; the internal child mode is
// reached by none of a flag, a config key or a MIOTOOL_* variable.
func TestStressBinaryBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "miotool.yaml")
	childConfig := filepath.Join(dir, "child.yaml")
	badRuns := filepath.Join(dir, "runs.yaml")
	for path, text := range map[string]string{
		config:      "# mine\nstress-threads:\n  threads: 2\n",
		childConfig: "stress-threads:\n  child: true\n",
		badRuns:     "stress-threads:\n  runs: -4\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	notDir := filepath.Join(dir, "a-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{config, childConfig, badRuns, notDir}
	for _, tt := range []struct {
		name  string
		env   []string
		args  []string
		first string // the first line of stderr starts with this
	}{
		{"threads 0", nil, []string{"--threads", "0"}, "miotool: --threads 0: want 1 to 1024"},
		{"runs past the bound", nil, []string{"--runs", "100000"}, "miotool: --runs 100000: want 1 to 10000"},
		{"jobs past the bound", nil, []string{"--jobs", "1000"}, "miotool: --jobs 1000: want 1 to 256"},
		{"trials past the bound", nil, []string{"--trials", "1000000"}, "miotool: --trials 1000000: want 1 to 100"},
		{"a run's work past the bound", nil, []string{"--threads", "1024", "--trials", "100"},
			"miotool: --threads 1024 x --iters 1000 x --trials 100 is 102400000 convolutions per run: want at most 1000000"},
		{"iters past the input", nil, []string{"--iters", "5000"}, "miotool: --iters 5000: want 1 to 2047"},
		{"race window of an hour", nil, []string{"--race-window", "1h"}, "miotool: --race-window 1h0m0s: want 0 (off) up to 10s"},
		{"race window past the watchdog", nil, []string{"--race-window", "5s", "--run-timeout", "2s"}, "miotool: --race-window 5s: want less than --run-timeout 2s"},
		{"watchdog of 100 hours", nil, []string{"--run-timeout", "100h"}, "miotool: --run-timeout 100h0m0s: want a positive duration up to 24h0m0s"},
		{"model dir a file", nil, []string{"--model-dir", notDir}, "miotool: --model-dir " + notDir + ": not a directory"},
		{"the child flag", nil, []string{"--child", "--cache=unlocked"}, "miotool: unknown flag: --child"},
		{"the child config key", nil, []string{"--config", childConfig, "--cache=unlocked"}, `miotool: config file ` + childConfig + `: line 2: unknown key "stress-threads.child"`},
		{"runs from the config", nil, []string{"--config", badRuns}, "miotool: --runs -4: want 1 to 10000 (from runs: -4 in " + badRuns + " line 2)"},
		{"the private variable by hand", []string{stressscen.ChildEnv + "=1:" + stressscen.NewChildToken()}, []string{"--cache=unlocked"},
			"miotool: " + stressscen.ChildEnv + " is set, but not by this process's parent"},
		{"the private variable garbled", []string{stressscen.ChildEnv + "=true"}, []string{"--cache=unlocked"},
			"miotool: " + stressscen.ChildEnv + `="true" is not a value miotool sets`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := cmdtest.Snapshot(t, files...)
			args := append([]string{"--backend", "sim", "stress-threads"}, tt.args...)
			r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir, tt.env...), time.Minute, args...)
			cmdtest.WantRefused(t, r, tt.first)
			cmdtest.Unchanged(t, tt.name, before)
		})
	}
}

// MIOTOOL_STRESS_THREADS_CHILD is no setting at all: the command runs as
// itself, with --format, and the pre-fix cache's race is a FAIL result,
// never raw lines with exit 0.
func TestStressBinaryChildVariableIsNoSetting(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir, "MIOTOOL_STRESS_THREADS_CHILD=true"), 2*time.Minute,
		"--backend", "sim", "--format", "json", "--no-progress", "stress-threads", "--cache=unlocked", "--iters", "2", "--trials", "1")
	if r.Code != 1 || strings.Contains(r.Stdout, stressscen.RunLinePrefix) {
		t.Fatalf("exit %d, stdout %q; want a FAIL result (exit 1)", r.Code, r.Stdout)
	}
	res, err := report.ReadJSON(strings.NewReader(r.Stdout))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.Counter("race detected"); res.Verdict != report.Fail || n != 1 || res.ExitCode() != r.Code {
		t.Errorf("verdict %s, exit_code %d, races %d: %s", res.Verdict, res.ExitCode(), n, res.Summary)
	}
}

// SIGINT and SIGTERM once a run has finished and the next is going: exit
// 130 or 143 within 2 s, an INTERRUPTED result that holds the finished
// run, the killed run counted as interrupted and in no other row, and the
// document's exit_code the process's own.
func TestStressBinarySignals(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := cmdtest.StartBinary(t, bin, dir, cmdtest.Env(dir), "--backend", "sim", "--format", "json", "--no-progress", "--verbose",
				"stress-threads", "--cache=unlocked", "--iters", "20", "--trials", "1", "--runs", "1000")
			p.WaitForLine("run 1: ", time.Minute)
			code, took, stdout := p.Signal(tt.sig, 2*time.Second)
			if code != tt.code {
				t.Errorf("exit %d after %v, want %d", code, tt.sig, tt.code)
			}
			t.Logf("exited %v after %v", took, tt.sig)
			var doc struct {
				Verdict  string           `json:"verdict"`
				ExitCode int              `json:"exit_code"`
				Summary  string           `json:"summary"`
				Counters map[string]int64 `json:"counters"`
			}
			if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
			}
			c := doc.Counters
			if doc.Verdict != "INTERRUPTED" || doc.ExitCode != code {
				t.Errorf("verdict %s, exit_code %d; the process exited %d", doc.Verdict, doc.ExitCode, code)
			}
			finished := c["runs"] - c["interrupted"]
			if finished < 1 || c["interrupted"] > 1 || !strings.HasPrefix(doc.Summary, "interrupted by "+map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[tt.sig]) {
				t.Errorf("counters %v, summary %q", c, doc.Summary)
			}
			// The unlocked cache's race is recorded in every finished run,
			// and only in those.
			if c["race_detected"] != finished {
				t.Errorf("race detected in %d runs, %d finished: an interrupted run shows in another row (%v)", c["race_detected"], finished, c)
			}
		})
	}
}
