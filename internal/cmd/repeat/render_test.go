package repeat

import (
	"math"
	"testing"

	"miotool/internal/repeat"
	"miotool/internal/report"
	"miotool/internal/stats"
)

// TestNotShownIsNeverPass: each of repeat's verdicts as the result states
// it, and the exit status a CI sees; an improvement not yet shown fails.
func TestNotShownIsNeverPass(t *testing.T) {
	for v, want := range map[repeat.Verdict]report.Verdict{
		repeat.Pass: report.Pass, repeat.Fail: report.Fail, repeat.NotShown: report.Fail,
		repeat.Interrupted: report.Interrupted, repeat.Error: report.Error, "": report.Error,
	} {
		if got := reportVerdict(v); got != want {
			t.Errorf("reportVerdict(%q) = %s, want %s", v, got, want)
		}
	}
	if reportVerdict(repeat.NotShown).ExitCode() == 0 {
		t.Error("an improvement not yet shown exits 0")
	}
}

func TestWords(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "0%"}, {3.0 / 220, "1.36%"}, {0.0028, "0.28%"}, {0.0135, "1.35%"}, {0.26, "26%"}, {0.385, "38.5%"}, {0.00012, "0.012%"}, {1, "100%"}, {0.95, "95%"}, {0.99999, "99.999%"}} {
		if got := percent(c.x); got != c.want {
			t.Errorf("percent(%v) = %q, want %q", c.x, got, c.want)
		}
	}
	for _, c := range []struct {
		p    float64
		want string
	}{{0.12414578, "0.124"}, {0.000116, "0.000116"}, {1, "1"}, {0.99999, "1"}, {8.46e-18, "8.46e-18"}} {
		if got := pText(c.p); got != c.want {
			t.Errorf("pText(%v) = %q, want %q", c.p, got, c.want)
		}
	}
	if got := alphaText(0.95); got != "0.05" {
		t.Errorf("alphaText(0.95) = %q", got)
	}
	if got := rateText(stats.Count{K: 0, N: 220}, 0.95, "95%"); got != "below 1.35% at 95% confidence" {
		t.Errorf("rateText(0/220) = %q", got)
	}
	if got := rateText(stats.Count{K: 3, N: 220}, 0.95, "95%"); got != "1.36%, 95% interval 0.28%–3.93%" {
		t.Errorf("rateText(3/220) = %q", got)
	}
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{{"95", 0.95, true}, {"95%", 0.95, true}, {" 99.9 % ", 0.999, true}, {"0.9", 0.9, true}, {"49", 0, false}, {"100", 0, false}, {"x", 0, false}} {
		got, err := parseConfidence(c.in)
		if (err == nil) != c.ok || (c.ok && math.Abs(got-c.want) > 1e-12) {
			t.Errorf("parseConfidence(%q) = %v, %v", c.in, got, err)
		}
	}
	if got := programName([]string{"env", "-i", "LD_LIBRARY_PATH=/x", "/usr/bin/python3", "t.py"}); got != "python3" {
		t.Errorf("programName = %q", got)
	}
}

func TestEndings(t *testing.T) {
	b := &repeat.BuildFacts{Crashed: 3, Failed: 2, Hung: 1, Signals: map[string]int{"SIGSEGV": 2, "SIGABRT": 1}, Exits: map[int]int{3: 1, 139: 1}}
	if got := endings(b); got != "3 crashes — 2× SIGSEGV, 1× SIGABRT; 2 failed — 1× exit status 3, 1× exit status 139; 1 hung" {
		t.Errorf("endings = %q", got)
	}
	b = &repeat.BuildFacts{Failed: 1, Exits: map[int]int{3: 1}, Signals: map[string]int{}}
	if got := endings(b); got != "1 failed — 1× exit status 3" {
		t.Errorf("endings = %q", got)
	}
	if sig, ok := shellSignal(139); !ok || sig != "SIGSEGV" {
		t.Errorf("shellSignal(139) = %q, %v", sig, ok)
	}
	if _, ok := shellSignal(3); ok {
		t.Error("shellSignal(3) names a signal")
	}
}

func TestWhereText(t *testing.T) {
	for _, c := range []struct {
		name string
		g    repeat.Group
		want string
	}{
		{"faulthandler's frames", repeat.Group{Source: repeat.FromFaulthandler, Python: []string{"predict (race.py:20)", "worker (race.py:26)"}},
			"Python: predict (race.py:20) ← worker (race.py:26)"},
		{"a crash report with a thread", repeat.Group{Source: repeat.FromCrashReport, Native: []string{"libm.so(model_predict)"}, Thread: "conv-worker-1"},
			"libm.so(model_predict); thread conv-worker-1"},
		{"a report cut short names no place", repeat.Group{Source: repeat.FromFaulthandlerCut},
			"not known: faulthandler's report ended before it reached the crashing thread (a second crash cut it short)"},
		{"nothing", repeat.Group{Source: repeat.FromStderr}, "-"},
	} {
		if got := whereText(&c.g); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestProgressLabel(t *testing.T) {
	one := []repeat.Build{{Label: "This build"}}
	if got := progressLabel(one, repeat.Progress{Ended: 40, Total: 220, Finished: []int{40}, NotPassed: []int{3}}); got != "repeat: 3 failed (7.5%)" {
		t.Errorf("label %q", got)
	}
	if got := progressLabel(one, repeat.Progress{Ended: 1, Total: 220, Finished: []int{0}, NotPassed: []int{0}}); got != "repeat: 0 failed" {
		t.Errorf("label before any run finished %q", got)
	}
	two := []repeat.Build{{Label: "Patched"}, {Label: "Unpatched"}}
	if got := progressLabel(two, repeat.Progress{Ended: 80, Total: 440, Finished: []int{40, 40}, NotPassed: []int{0, 2}}); got != "repeat: 0 failed (0%), unpatched 2 failed (5%)" {
		t.Errorf("label %q", got)
	}
}
