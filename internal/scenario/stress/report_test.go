package stress

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/report"
	"miotool/internal/scenario"
)

func TestFillStressVerdicts(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 1000, Trials: 3, Size: InputSize, Runs: 4, Jobs: 2, Policy: cache.Unlocked,
		Cache: "unlocked: pre-fix pattern", Models: "the model embedded in miotool", Arch: "miotool", Timeout: time.Minute}
	passed := func(i int) RunOutcome {
		return RunOutcome{Index: i, Kind: RunPassed, Wall: time.Duration(i+1) * time.Second,
			Run: &RunResult{Expected: 1098304, Solvers: map[string]int{"ConvImplicitGemmTiledFwd": 6000}, CacheStats: cache.Stats{Replaced: uint64(i % 2)}}}
	}
	crashed := func(i int, name string) RunOutcome {
		return RunOutcome{Index: i, Kind: RunCrashed, Crash: name, Detail: "fatal error: fault", Wall: time.Second, StderrTail: "fatal error: fault\n[signal SIGSEGV]"}
	}
	for _, tt := range []struct {
		name    string
		runs    []RunOutcome
		verdict report.Verdict
		status  string
		summary []string
	}{
		{"all passed", []RunOutcome{passed(0), passed(1), passed(2), passed(3)}, report.Pass, "Passed (4/4)",
			[]string{"all 4 runs passed", "1098304"}},
		{"one run passed", []RunOutcome{passed(0)}, report.Pass, "", []string{"the run passed"}},
		{"crashes by signal", []RunOutcome{passed(0), crashed(1, "SIGSEGV"), crashed(2, "SIGSEGV"), crashed(3, "fatal error: concurrent map writes")},
			report.Fail, "Failed (3/4)", []string{"3 of 4 runs failed", "SIGSEGV 2", "fatal error: concurrent map writes 1"}},
		{"wrong and hung", []RunOutcome{passed(0), {Index: 1, Kind: RunWrong, Detail: "1 of 6 sums wrong"}, {Index: 2, Kind: RunHung}, {Index: 3, Kind: RunError}},
			report.Fail, "Failed (2/4)", []string{"1 gave a wrong sum", "1 hung", "1 failed to run"}},
		{"errors only", []RunOutcome{passed(0), {Index: 1, Kind: RunError, Detail: "exited with status 3: no device"}},
			report.Error, "", []string{"1 of 2 runs could not run", "run 2: exited with status 3: no device"}},
		{"nothing ran", nil, report.Error, "", []string{"no run"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("stress-threads", "miotool stress-threads --cache=unlocked --runs 4", time.Unix(0, 0))
			Fill(r, setup, tt.runs, testWords, time.Unix(10, 0))
			if r.Verdict != tt.verdict || r.Status != tt.status {
				t.Errorf("verdict %s status %q; want %s %q", r.Verdict, r.Status, tt.verdict, tt.status)
			}
			for _, s := range tt.summary {
				if !strings.Contains(r.Summary, s) {
					t.Errorf("summary %q lacks %q", r.Summary, s)
				}
			}
			if n, _ := r.Counter("runs"); n != int64(len(tt.runs)) {
				t.Errorf("runs counter %d, want %d", n, len(tt.runs))
			}
			if len(r.Tables) != 2 {
				t.Fatalf("%d tables, want the outcomes and the wall times", len(r.Tables))
			}
			flagged := 0
			for _, o := range tt.runs {
				if o.Kind != RunPassed {
					flagged++
				}
			}
			if flagged > 0 && r.Tables[0].Flagged() == 0 {
				t.Error("failed runs are not flagged in the outcome table")
			}
		})
	}
}

func TestFillStressNotesAndTimes(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 1000, Trials: 3, Size: InputSize, Runs: 3, Jobs: 1, Policy: cache.Unlocked,
		RaceWindow: time.Millisecond, Cache: "unlocked: pre-fix; race window widened by 1ms", Models: "/opt/rocm/share/miopen/db ($ROCM_PATH)", Arch: "gfx942", Timeout: time.Minute}
	runs := []RunOutcome{
		{Index: 0, Kind: RunPassed, Wall: 3 * time.Second, Run: &RunResult{Solvers: map[string]int{"A": 2, "B": 5}, CacheStats: cache.Stats{Replaced: 1}}},
		{Index: 1, Kind: RunPassed, Wall: 1 * time.Second, Run: &RunResult{Solvers: map[string]int{"A": 7}}},
		{Index: 2, Kind: RunCrashed, Crash: "SIGSEGV", Wall: 100 * time.Millisecond, Excerpt: "fatal error: fault | at fdeep.dense"},
		{Index: 3, Kind: RunError, Wall: 100 * time.Millisecond, StderrTail: "loading the model\nno such file"},
	}
	r := report.New("stress-threads", "cmd", time.Unix(0, 0))
	Fill(r, setup, runs, testWords, time.Unix(1, 0))
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"race window is widened on purpose", "TunaNet gfx942 from /opt/rocm/share/miopen/db", "B 5, A 2",
		"replaced", "in 1 of the 2 runs that finished", "(2048 - 1000)^2 = 1098304", "run 3 crashed: fatal error: fault | at fdeep.dense", "run 4 (error) standard error ends: loading the model | no such file"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	times := r.Tables[1]
	if got := strings.Join(times.Rows[0].Cells, " "); got != "passed 2 2s 1s 3s" {
		t.Errorf("passed times %q", got)
	}
	if got := strings.Join(times.Rows[1].Cells, " "); got != "all 4 550ms 100ms 3s" {
		t.Errorf("all times %q", got)
	}
	if n, _ := r.Counter("runs with a model replaced"); n != 1 {
		t.Errorf("replaced counter %d, want 1", n)
	}
}

// testWords spell the cache policy and race window as the command line does.
var testWords = scenario.Words{
	Cache:      func(p cache.Policy) string { return "--cache=" + string(p) },
	RaceWindow: func(d time.Duration) string { return fmt.Sprintf("--race-window %v", d) },
}
