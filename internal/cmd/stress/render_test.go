package stress

import (
	"strings"
	"testing"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
)

func TestFillStressVerdicts(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 1000, Trials: 3, Size: stressscen.InputSize, Runs: 4, Jobs: 2, Policy: cache.Unlocked,
		Cache: "unlocked: pre-fix pattern", Models: "the model embedded in miotool", Arch: "miotool", Timeout: time.Minute}
	passed := func(i int) stressscen.RunOutcome {
		return stressscen.RunOutcome{Index: i, Kind: stressscen.RunPassed, Wall: time.Duration(i+1) * time.Second,
			Run: &stressscen.RunResult{Expected: 1098304, Solvers: map[string]int{"ConvImplicitGemmTiledFwd": 6000}, CacheStats: cache.Stats{Replaced: uint64(i % 2)}}}
	}
	crashed := func(i int, name string) stressscen.RunOutcome {
		return stressscen.RunOutcome{Index: i, Kind: stressscen.RunCrashed, Crash: name, Detail: "fatal error: fault", Wall: time.Second, StderrTail: "fatal error: fault\n[signal SIGSEGV]"}
	}
	for _, tt := range []struct {
		name    string
		runs    []stressscen.RunOutcome
		verdict report.Verdict
		status  string // the checklist's
		summary []string
	}{
		{"all passed", []stressscen.RunOutcome{passed(0), passed(1), passed(2), passed(3)}, report.Pass, "Passed (4/4 runs)",
			[]string{"all 4 runs passed", "1098304"}},
		{"one run passed", []stressscen.RunOutcome{passed(0)}, report.Pass, "Passed (1/1 run)", []string{"the run passed"}},
		{"crashes by signal", []stressscen.RunOutcome{passed(0), crashed(1, "SIGSEGV"), crashed(2, "SIGSEGV"), crashed(3, "fatal error: concurrent map writes")},
			report.Fail, "Failed (3/4 runs failed)", []string{"3 of 4 runs failed", "SIGSEGV 2", "fatal error: concurrent map writes 1"}},
		{"wrong and hung", []stressscen.RunOutcome{passed(0), {Index: 1, Kind: stressscen.RunWrong, Detail: "1 of 6 sums wrong"}, {Index: 2, Kind: stressscen.RunHung}, {Index: 3, Kind: stressscen.RunError}},
			report.Fail, "Failed (3/4 runs failed)", []string{"1 gave a wrong result", "1 hung", "1 failed to run"}},
		{"errors only", []stressscen.RunOutcome{passed(0), {Index: 1, Kind: stressscen.RunError, Detail: "exited with status 3: no device"}},
			report.Error, "Error (1/2 runs errored): 1 of 2 runs could not run: run 2: exited with status 3: no device",
			[]string{"1 of 2 runs could not run", "run 2: exited with status 3: no device"}},
		{"nothing ran", nil, report.Error, "Error (1/1 run errored): no run happened", []string{"no run"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("stress-threads", "miotool stress-threads --cache=unlocked --runs 4", time.Unix(0, 0))
			Fill(r, setup, tt.runs, time.Unix(10, 0))
			// The checklist's status: the verdict's word, and the runs
			// that gave it of those run when there are several.
			if status := r.ChecklistRow()[3]; r.Verdict != tt.verdict || status != tt.status {
				t.Errorf("verdict %s status %q; want %s %q", r.Verdict, status, tt.verdict, tt.status)
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
				if o.Kind != stressscen.RunPassed {
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
	setup := Setup{Threads: 2, Iters: 1000, Trials: 3, Size: stressscen.InputSize, Runs: 3, Jobs: 1, Policy: cache.Unlocked,
		RaceWindow: time.Millisecond, Cache: "unlocked: pre-fix; race window widened by 1ms", Models: "/opt/rocm/share/miopen/db ($ROCM_PATH)", Arch: "gfx942", Timeout: time.Minute}
	runs := []stressscen.RunOutcome{
		{Index: 0, Kind: stressscen.RunPassed, Wall: 3 * time.Second, Run: &stressscen.RunResult{Solvers: map[string]int{"A": 2, "B": 5}, CacheStats: cache.Stats{Replaced: 1}}},
		{Index: 1, Kind: stressscen.RunPassed, Wall: 1 * time.Second, Run: &stressscen.RunResult{Solvers: map[string]int{"A": 7}}},
		{Index: 2, Kind: stressscen.RunCrashed, Crash: "SIGSEGV", Wall: 100 * time.Millisecond, Excerpt: "fatal error: fault | at fdeep.dense"},
		{Index: 3, Kind: stressscen.RunError, Wall: 100 * time.Millisecond, StderrTail: "loading the model\nno such file"},
	}
	r := report.New("stress-threads", "cmd", time.Unix(0, 0))
	Fill(r, setup, runs, time.Unix(1, 0))
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"race window is widened on purpose", "TunaNet gfx942 from /opt/rocm/share/miopen/db", "B 5, A 2",
		"(2048 - 1000)^2 = 1098304", "run 3 crashed: fatal error: fault | at fdeep.dense", "run 4 (error) standard error ends: loading the model | no such file"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	times := r.Tables[1]
	if got := strings.Join(times.Rows[0].Cells, " "); got != "completed 2 2000.000 1000.000 3000.000" {
		t.Errorf("completed times %q", got)
	}
	if got := strings.Join(times.Rows[1].Cells, " "); got != "all 4 550.000 100.000 3000.000" {
		t.Errorf("all times %q", got)
	}
	if n, _ := r.Counter("runs with a model replaced"); n != 1 {
		t.Errorf("replaced counter %d, want 1", n)
	}
}

// record is a cache record of kind k made by thread 2 after thread 1.
func record(k cache.Kind) *cache.Record {
	return &cache.Record{Kind: k, Cache: "TunaNet", Key: "gfx942", Thread: cache.Thread{ID: 7, Name: "thread 2"},
		Other: cache.Thread{ID: 6, Name: "thread 1"}, Access: "write", Location: "map", OtherAccess: "read",
		Since: 3 * time.Microsecond, Readers: 1}
}

// detected is a run that passed its sums but whose caches recorded k.
func detected(i int, k cache.Kind) stressscen.RunOutcome {
	o := stressscen.RunOutcome{Index: i, Kind: stressscen.RunPassed, Run: &stressscen.RunResult{Expected: 1098304}}
	switch k {
	case cache.KindRace:
		o.Detections.Races = cache.Tally{Count: 40, First: record(k)}
	case cache.KindDestroyed:
		o.Detections.Destroyed = cache.Tally{Count: 1, First: record(k)}
	case cache.KindUseAfterFree:
		o.Detections.UseAfterFree = cache.Tally{Count: 1, First: record(k)}
	}
	return o
}

// Every row of the outcome table counts its runs and names the first; a
// run whose caches recorded anything is not passed, and fails the result.
func TestFillStressRows(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 100, Trials: 1, Size: stressscen.InputSize, Runs: 1, Jobs: 1, Policy: cache.Unlocked, Timeout: time.Minute}
	for _, tt := range []struct {
		name    string
		run     stressscen.RunOutcome
		row     string
		first   string
		verdict report.Verdict
	}{
		{"crashed by signal", stressscen.RunOutcome{Kind: stressscen.RunCrashed, Crash: "SIGSEGV", Detail: "killed by SIGSEGV"}, "crashed: SIGSEGV", "run 1: killed by SIGSEGV", report.Fail},
		{"use-after-free", detected(0, cache.KindUseAfterFree), "use-after-free", "run 1: thread 2 (goroutine 7) released the gfx942 model of the TunaNet cache while 1 reader held it", report.Fail},
		{"published model destroyed", detected(0, cache.KindDestroyed), "published model destroyed", "run 1: thread 2 (goroutine 7)'s insert of gfx942 into the TunaNet cache destroyed the model thread 1 (goroutine 6) had published", report.Fail},
		{"race", detected(0, cache.KindRace), "race detected", "run 1: thread 2 (goroutine 7) wrote the TunaNet cache's map (key gfx942) 3µs after thread 1 (goroutine 6) read it", report.Fail},
		{"wrong result", stressscen.RunOutcome{Kind: stressscen.RunWrong, Detail: "1 of 2 sums wrong"}, "wrong result", "run 1: 1 of 2 sums wrong", report.Fail},
		{"hung", stressscen.RunOutcome{Kind: stressscen.RunHung, Detail: "killed by the watchdog"}, "hung (killed by the watchdog)", "run 1: killed by the watchdog", report.Fail},
		{"interrupted", stressscen.RunOutcome{Kind: stressscen.RunInterrupted, Detail: "killed when miotool was interrupted"}, "interrupted", "run 1: killed when miotool was interrupted", report.Interrupted},
		{"passed", stressscen.RunOutcome{Kind: stressscen.RunPassed, Run: &stressscen.RunResult{Expected: 1098304}}, "passed", "every sum", report.Pass},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("stress-threads", "cmd", time.Unix(0, 0))
			Fill(r, setup, []stressscen.RunOutcome{tt.run}, time.Unix(1, 0))
			if r.Verdict != tt.verdict {
				t.Errorf("verdict %s, want %s (%s)", r.Verdict, tt.verdict, r.Summary)
			}
			counts := map[string]string{}
			for _, row := range r.Tables[0].Rows {
				counts[row.Cells[0]] = row.Cells[1]
				if row.Cells[0] == tt.row && !strings.HasPrefix(row.Cells[2], tt.first) {
					t.Errorf("%s first seen %q, want it to start %q", tt.row, row.Cells[2], tt.first)
				}
			}
			for _, label := range []string{"use-after-free", "published model destroyed", "race detected", "wrong result", "hung (killed by the watchdog)", "interrupted", "passed"} {
				want := "0"
				if label == tt.row {
					want = "1"
				}
				if counts[label] != want {
					t.Errorf("row %q counts %q, want %s (rows %v)", label, counts[label], want, counts)
				}
			}
			if tt.row == "crashed: SIGSEGV" && counts["crashed: SIGSEGV"] != "1" {
				t.Errorf("crash row %v", counts)
			}
			if tt.verdict == report.Fail && r.Tables[0].Flagged() == 0 {
				t.Error("the failing row is not flagged")
			}
		})
	}
}

// Each kind's first record becomes a note naming the run that showed it;
// the runs of a policy that records nothing pass.
func TestFillStressDetectionNotes(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 100, Trials: 1, Size: stressscen.InputSize, Runs: 3, Jobs: 1, Policy: cache.Unlocked, Timeout: time.Minute}
	runs := []stressscen.RunOutcome{detected(0, cache.KindRace), detected(1, cache.KindDestroyed), detected(2, cache.KindRace)}
	r := report.New("stress-threads", "cmd", time.Unix(0, 0))
	Fill(r, setup, runs, time.Unix(1, 0))
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"run 1 first showed race: thread 2 (goroutine 7) wrote", "run 2 first showed published model destroyed: thread 2 (goroutine 7)'s insert"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "replaced (and released)") {
		t.Errorf("the old replaced note is still there:\n%s", notes)
	}
	if r.Verdict != report.Fail || !strings.Contains(r.Summary, "3 of 3 runs failed") || !strings.Contains(r.Summary, "2 recorded a race") {
		t.Errorf("verdict %s: %s", r.Verdict, r.Summary)
	}
	if n, _ := r.Counter("race detected"); n != 2 {
		t.Errorf("race counter %d, want 2", n)
	}
}

// An interrupted set of runs reports those that finished, counts the
// killed one as interrupted (never as a crash) and says INTERRUPTED.
func TestFillStressInterrupted(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 100, Trials: 1, Size: stressscen.InputSize, Runs: 5, Jobs: 1, Policy: cache.Locked, Timeout: time.Minute,
		Interrupted: "interrupted by SIGINT"}
	// The killed run had recorded a race before it was killed: it still
	// counts as interrupted and in no other row.
	killed := detected(1, cache.KindRace)
	killed.Kind, killed.Detail = stressscen.RunInterrupted, "killed when miotool was interrupted"
	runs := []stressscen.RunOutcome{{Index: 0, Kind: stressscen.RunPassed, Run: &stressscen.RunResult{}}, killed}
	r := report.New("stress-threads", "cmd", time.Unix(0, 0))
	Fill(r, setup, runs, time.Unix(1, 0))
	if r.Verdict != report.Interrupted || r.Summary != "interrupted by SIGINT: 1 of 5 runs finished, 1 stopped while it ran, 3 not started" {
		t.Errorf("verdict %s: %s", r.Verdict, r.Summary)
	}
	if !strings.HasPrefix(r.Tables[0].Title, "2 of 5 runs (interrupted)") {
		t.Errorf("title %q", r.Tables[0].Title)
	}
	if n, _ := r.Counter("crashed"); n != 0 {
		t.Errorf("crashed %d", n)
	}
	if n, _ := r.Counter("interrupted"); n != 1 {
		t.Errorf("interrupted %d", n)
	}
	for _, row := range r.Tables[0].Rows {
		if row.Cells[0] != "interrupted" && row.Cells[1] != "0" && row.Cells[0] != "passed" {
			t.Errorf("the interrupted run shows in row %v", row.Cells)
		}
	}
	if n, _ := r.Counter("race detected"); n != 0 {
		t.Errorf("race detected %d, want 0", n)
	}
	var md strings.Builder
	if err := report.Render(&md, report.Markdown, r, report.Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "INTERRUPTED") {
		t.Errorf("Markdown does not say INTERRUPTED:\n%s", md.String())
	}
}

// A run whose caches recorded a race did all its work and failed: the wall
// time table must not call it passed.
func TestFillStressTimesDoNotCallADetectedRunPassed(t *testing.T) {
	setup := Setup{Threads: 2, Iters: 100, Trials: 1, Size: stressscen.InputSize, Runs: 1, Jobs: 1, Policy: cache.Unlocked, Timeout: time.Minute}
	r := report.New("stress-threads", "cmd", time.Unix(0, 0))
	Fill(r, setup, []stressscen.RunOutcome{detected(0, cache.KindRace)}, time.Unix(1, 0))
	if r.Verdict != report.Fail {
		t.Fatalf("verdict %s, want FAIL", r.Verdict)
	}
	times := r.Tables[len(r.Tables)-1]
	for _, row := range times.Rows {
		if row.Cells[0] == "passed" {
			t.Errorf("the wall-time table has a %q row for a run that failed: %v", row.Cells[0], row.Cells)
		}
	}
	if got := times.Rows[0].Cells[0]; got != "completed" {
		t.Errorf("first wall-time row %q, want completed", got)
	}
}

// A library target runs no miotool model cache: its PASS must not claim
// the caches were checked.
func TestFillStressLibraryTargetClaimsNoCacheCheck(t *testing.T) {
	for _, c := range []struct {
		library   string
		wantCache bool
	}{{"", true}, {"cuDNN 9.14", false}} {
		setup := Setup{Threads: 2, Iters: 100, Trials: 1, Size: stressscen.InputSize, Runs: 1, Jobs: 1, Policy: cache.Locked, Timeout: time.Minute, Library: c.library}
		r := report.New("stress-threads", "cmd", time.Unix(0, 0))
		Fill(r, setup, []stressscen.RunOutcome{{Kind: stressscen.RunPassed, Run: &stressscen.RunResult{Expected: 3794704}}}, time.Unix(1, 0))
		if r.Verdict != report.Pass {
			t.Fatalf("library %q: verdict %s (%s), want PASS", c.library, r.Verdict, r.Summary)
		}
		if got := strings.Contains(r.Summary, "caches"); got != c.wantCache {
			t.Errorf("library %q: summary %q mentions the caches: %v, want %v", c.library, r.Summary, got, c.wantCache)
		}
	}
}
