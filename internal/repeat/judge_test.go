package repeat

import (
	"math"
	"sync"
	"testing"

	"miotool/internal/stats"
)

// facts are the facts of builds with these counts, every run finished.
func facts(counts ...stats.Count) *Facts {
	f := &Facts{}
	for i, c := range counts {
		b := newBuildFacts(Build{Label: []string{"Patched", "Unpatched"}[i]}, c.N, nil)
		b.Passed, b.Crashed = c.N-c.K, c.K
		f.Builds = append(f.Builds, b)
	}
	return f
}

func TestJudge(t *testing.T) {
	ref := stats.Count{K: 3, N: 220}
	for _, c := range []struct {
		name     string
		f        *Facts
		baseline *stats.Count
		verdict  Verdict
		reason   Reason
	}{
		{"every run passed", facts(stats.Count{K: 0, N: 220}), nil, Pass, AllPassed},
		{"one run failed", facts(stats.Count{K: 1, N: 220}), nil, Fail, SomeFailed},
		{"3 of 220 before, 0 of 220 after: not yet shown", facts(stats.Count{K: 0, N: 220}), &ref, NotShown, NotYet},
		{"the same against a build run beside it", facts(stats.Count{K: 0, N: 220}, ref), nil, NotShown, NotYet},
		{"12 of 400 before, 0 of 400 after: shown", facts(stats.Count{K: 0, N: 400}), &stats.Count{K: 12, N: 400}, Pass, Shown},
		{"fails more often than before", facts(stats.Count{K: 5, N: 220}), &ref, Fail, NotBetter},
		{"fails as often as before", facts(stats.Count{K: 3, N: 220}), &ref, Fail, NotBetter},
		{"the unfixed build never failed", facts(stats.Count{K: 0, N: 220}), &stats.Count{K: 0, N: 220}, Fail, NothingToImprove},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := Judge(c.f, c.baseline, 0.95)
			if j.Verdict != c.verdict || j.Reason != c.reason {
				t.Errorf("verdict %s (%s), want %s (%s)", j.Verdict, j.Reason, c.verdict, c.reason)
			}
			if (c.baseline != nil || len(c.f.Builds) > 1) != (j.Comparison != nil) {
				t.Errorf("comparison %+v", j.Comparison)
			}
		})
	}
}

// TestTheDoneWhenFigures: 3 of 220 before and 0 of 220 after is not shown
// at 95% (p = 0.1241), and about 340 runs per build would show it half the
// time.
func TestTheDoneWhenFigures(t *testing.T) {
	c := Compare(stats.Count{K: 3, N: 220}, stats.Count{K: 0, N: 220}, 0.95)
	if c.Shown || !c.Better || math.Round(c.P*1e4)/1e4 != 0.1241 {
		t.Errorf("shown %v, better %v, p %.5f: want not shown, better, 0.1241", c.Shown, c.Better, c.P)
	}
	if stats.About(c.Half) != 340 || c.MostTimes <= c.Half {
		t.Errorf("runs per build to show it: %d half the time, %d four times in five; want about 340, then more", c.Half, c.MostTimes)
	}
	// At 90% confidence, the same counts are still not shown (p > 0.1).
	if Compare(stats.Count{K: 3, N: 220}, stats.Count{K: 0, N: 220}, 0.90).Shown {
		t.Error("shown at 90% with p = 0.124")
	}
	// At 80% they are.
	if !Compare(stats.Count{K: 3, N: 220}, stats.Count{K: 0, N: 220}, 0.80).Shown {
		t.Error("not shown at 80% with p = 0.124")
	}
}

func TestCompareNeverShowsAnIncrease(t *testing.T) {
	// More runs after than before can make "after" a lower rate with more
	// failures; a higher rate is never shown, whatever p says.
	c := Compare(stats.Count{K: 1, N: 10}, stats.Count{K: 40, N: 100}, 0.95)
	if c.Shown || c.Better || c.Half != 0 {
		t.Errorf("an increase: %+v", c)
	}
}

func TestJudgeInterruptedAndNotStartedComeFirst(t *testing.T) {
	f := facts(stats.Count{K: 0, N: 50})
	f.Interrupted = true
	if j := Judge(f, nil, 0.95); j.Verdict != Interrupted || j.Reason != Stopped {
		t.Errorf("interrupted with every finished run passing: %s (%s), want interrupted", j.Verdict, j.Reason)
	}
	f = facts(stats.Count{K: 0, N: 400})
	f.Interrupted = true
	j := Judge(f, &stats.Count{K: 12, N: 400}, 0.95)
	if j.Verdict != Interrupted || j.Comparison == nil || !j.Comparison.Shown {
		t.Errorf("interrupted after enough runs to show it: %s, comparison %+v; want interrupted, with the comparison over the finished runs", j.Verdict, j.Comparison)
	}
	f = facts(stats.Count{K: 0, N: 50})
	f.Builds[0].NotStarted = 1
	if j := Judge(f, nil, 0.95); j.Verdict != Error || j.Reason != StartFailed {
		t.Errorf("a run that could not start: %s (%s), want error", j.Verdict, j.Reason)
	}
}

func TestJudgeNoRunFinished(t *testing.T) {
	f := facts(stats.Count{K: 0, N: 0})
	if j := Judge(f, nil, 0.95); j.Verdict == Pass {
		t.Errorf("no run finished: %s", j.Verdict)
	}
}

func TestDeviceOutliers(t *testing.T) {
	b := newBuildFacts(Build{Label: "x"}, 200, []string{"0", "1", "2", "3"})
	for i, d := range []DeviceTally{{"0", 50, 0}, {"1", 50, 1}, {"2", 50, 12}, {"3", 50, 0}} {
		b.Devices[i] = d
		b.Passed += d.Finished - d.NotPassed
		b.Crashed += d.NotPassed
	}
	f := &Facts{Builds: []*BuildFacts{b}}
	j := Judge(f, nil, 0.95)
	if len(j.Outliers) != 1 || len(j.Outliers[0]) != 1 || j.Outliers[0][0] != 2 {
		t.Errorf("outliers %v, want device 2 alone", j.Outliers)
	}
	// Even counts: none stands out.
	for i := range b.Devices {
		b.Devices[i].NotPassed = 3
	}
	b.Crashed = 12
	b.Passed = 188
	if j := Judge(f, nil, 0.95); len(j.Outliers[0]) != 0 {
		t.Errorf("outliers %v among even devices", j.Outliers)
	}
}

// fakeCrashes is a crash source that reports, for every run asked about,
// a crash in libMIOpen reached from Python.
type fakeCrashes struct {
	mu    sync.Mutex
	asked map[string]bool
}

func (f *fakeCrashes) Env(run string) []string { return []string{"FAKE_CRASH_RUN=" + run} }

func (f *fakeCrashes) Crashes(run string) []Crash {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[run] = true
	c := ctypesCrash(0x1000, 12)
	c.PID = 0
	return []Crash{c}
}

func TestCrashReportsGroupRuns(t *testing.T) {
	src := &fakeCrashes{asked: map[string]bool{}}
	m := &recordingMany{}
	const runs = 12
	f := run(t, Options{Builds: []Build{flaky(t, "x", "segv", "500", "5")}, Runs: runs, Crashes: src, Many: m.many})
	b := f.Builds[0]
	if !f.CrashReports || len(b.Groups) != 1 {
		t.Fatalf("crash reports %v, groups %+v", f.CrashReports, b.Groups)
	}
	g := b.Groups[0]
	if g.Source != FromCrashReport || g.Signal != "SIGSEGV" || len(g.Native) != 3 || g.Native[0] != "libMIOpen.so.1(fdeep::model::predict)" || g.Thread != "conv-worker" {
		t.Errorf("group %+v: want the crash report's frames", g)
	}
	// Every run's reports are taken (and so forgotten), each run with its
	// own token in its environment.
	for i, s := range m.specs {
		tok := envOf(s, "FAKE_CRASH_RUN")
		if tok != token(i) || !src.asked[tok] {
			t.Errorf("process %d: token %q in its environment, asked %v", i, tok, src.asked[tok])
		}
	}
	if len(src.asked) != runs {
		t.Errorf("asked for %d runs' crashes, want %d", len(src.asked), runs)
	}
}
