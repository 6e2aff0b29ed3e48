package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// roundTrip is s as another process reads it from its JSON file.
func roundTrip(t *testing.T, s *SuiteResult) *SuiteResult {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSuiteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSuiteJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// A suite that ran nothing passed nothing: its verdict is SKIP (exit 4),
// never PASS.
func TestSuiteWithoutRunsIsNotPass(t *testing.T) {
	empty := NewSuiteResult("empty", suiteStart)
	skipped := NewSuiteResult("skipped", suiteStart)
	skipped.Checks = []*SuiteCheck{{Name: "a", Command: "miotool find", Expect: Pass, Skip: "needs a GPU"}}
	for _, tc := range []struct {
		s       *SuiteResult
		summary string
	}{
		{empty, "the suite has no checks"},
		{skipped, "no check ran; 1 not run"},
	} {
		if v := tc.s.Verdict(); v != Skip || tc.s.ExitCode() != ExitSkipped || tc.s.Summary() != tc.summary {
			t.Errorf("%s: verdict %s exit %d summary %q", tc.s.Suite, v, tc.s.ExitCode(), tc.s.Summary())
		}
	}
}

func TestMergeRefusesResultsThatRanNothing(t *testing.T) {
	good := hostSuite("node1", h200, Pass)
	empty := NewSuiteResult("pr12265", suiteStart)
	skipped := hostSuite("node2", h200)
	skipped.Checks[0].Skip = "needs a GPU"
	unrun := hostSuite("node3", h200)
	for _, tc := range []struct {
		bad  *SuiteResult
		want string
	}{
		{empty, "results/empty.json: the suite result has no checks"},
		{skipped, "results/empty.json: no check of the suite result ran (1 checks, none with a run)"},
		{unrun, "results/empty.json: no check of the suite result ran"},
	} {
		_, err := MergeSuites([]*SuiteResult{good, tc.bad}, []string{"results/good.json", "results/empty.json"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want one containing %q", err, tc.want)
		}
	}
}

func TestMergeRefusesTheSameRunTwice(t *testing.T) {
	a := hostSuite("node1", h200, Pass)
	b := hostSuite("node2", h200, Pass)
	merged, err := MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.MergedRuns) != 2 || merged.RunID == "" || merged.RunID == a.RunID || merged.MergedRuns[0].RunID != a.RunID || merged.MergedRuns[1].File != "b.json" {
		t.Fatalf("merged runs %+v, run id %q", merged.MergedRuns, merged.RunID)
	}
	mergedBack := roundTrip(t, merged)
	for _, tc := range []struct {
		name    string
		inputs  []*SuiteResult
		sources []string
		want    string
	}{
		{"one file twice", []*SuiteResult{a, roundTrip(t, a)}, []string{"a.json", "a.json"},
			"a.json holds twice the same suite run (run id " + a.RunID + ", on node1, started 2026-12-01T09:00:00Z)"},
		{"a copy of a file", []*SuiteResult{a, roundTrip(t, a)}, []string{"a.json", "copy.json"}, "a.json and copy.json hold the same suite run"},
		{"a merged result and one of its inputs", []*SuiteResult{mergedBack, b}, []string{"m.json", "b.json"}, "m.json and b.json hold the same suite run (run id " + b.RunID},
		{"two merges of one run", []*SuiteResult{merged, mergedBack}, []string{"m1.json", "m2.json"}, "m1.json and m2.json hold the same suite run"},
	} {
		_, err := MergeSuites(tc.inputs, tc.sources)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "count its runs twice") {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Distinct runs merge, again and again.
	c := hostSuite("node3", h200, Pass)
	again, err := MergeSuites([]*SuiteResult{mergedBack, c}, []string{"m.json", "c.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.MergedRuns) != 3 || len(again.Checks[0].Runs) != 3 || again.MergedRuns[0].File != "a.json" {
		t.Errorf("re-merge: runs %+v, %d check runs", again.MergedRuns, len(again.Checks[0].Runs))
	}
}

// Results written before run ids existed are told apart by their runs, so
// a v1 file read twice is refused too.
func TestMergeRecognisesAVersion1FileReadTwice(t *testing.T) {
	v1 := func(started string) *SuiteResult {
		doc := `{"schema":"miotool/suite/v1","suite":"s","hosts":["n1"],"started":"` + started + `","checks":[{"name":"a","command":"miotool find","expect":"PASS",
			"runs":[{"host":"n1","iteration":1,"order":1,"verdict":"PASS","started":"` + started + `","duration_ms":5}]}]}`
		s, err := ReadSuiteJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := MergeSuites([]*SuiteResult{v1("2026-12-01T09:00:00Z"), v1("2026-12-01T09:00:00Z")}, []string{"x.json", "y.json"}); err == nil ||
		!strings.Contains(err.Error(), "run id sha256:") {
		t.Errorf("the same v1 run twice: err = %v", err)
	}
	m, err := MergeSuites([]*SuiteResult{v1("2026-12-01T09:00:00Z"), v1("2026-12-02T09:00:00Z")}, []string{"x.json", "y.json"})
	if err != nil || len(m.Checks[0].Runs) != 2 {
		t.Errorf("two v1 runs: %v", err)
	}
}

func TestMergedRunsSurviveJSON(t *testing.T) {
	a := hostSuite("node1", h200, Pass)
	a.Started = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	m, err := MergeSuites([]*SuiteResult{a, hostSuite("node2", h200, Pass)}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, m)
	if back.RunID != m.RunID || len(back.MergedRuns) != 2 || back.MergedRuns[0].RunID != a.RunID ||
		!back.MergedRuns[0].Started.Equal(a.Started) || strings.Join(back.MergedRuns[0].Hosts, ",") != "node1" {
		t.Errorf("merged runs after JSON: %+v", back.MergedRuns)
	}
	if _, err := ReadSuiteJSON(strings.NewReader(`{"schema":"miotool/suite/v2","merged_runs":[{"hosts":["x"]}]}`)); err == nil ||
		!strings.Contains(err.Error(), "merged_runs[0] has no run_id") {
		t.Errorf("a merged run without an id: %v", err)
	}
}

// A result whose runs are all written twice (same host, iteration, order
// and start) would count each run twice: merge refuses it, as it refuses
// the same suite run in two files.
func TestMergeRefusesARunHeldTwice(t *testing.T) {
	dup := hostSuite("node1", h200, Pass)
	dup.Checks[0].Runs = append(dup.Checks[0].Runs, dup.Checks[0].Runs[0])
	_, err := MergeSuites([]*SuiteResult{roundTrip(t, dup)}, []string{"dup.json"})
	want := "dup.json holds run 1 of capture-global-worker on node1 (order 1, started 2026-12-01T09:00:01Z) twice"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "count") {
		t.Errorf("err = %v, want one containing %q", err, want)
	}
	// The same run in two files under different run ids is refused too.
	a := hostSuite("node1", h200, Pass)
	b := roundTrip(t, a)
	b.RunID = NewRunID()
	_, err = MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err == nil || !strings.Contains(err.Error(), "a.json and b.json both hold run 1 of capture-global-worker on node1") {
		t.Errorf("err = %v", err)
	}
	// Repetitions are not duplicates: they differ in iteration, order and start.
	if _, err := MergeSuites([]*SuiteResult{hostSuite("node1", h200, Pass, Pass, Fail)}, []string{"ok.json"}); err != nil {
		t.Errorf("three repetitions refused: %v", err)
	}
}
