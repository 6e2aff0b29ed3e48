package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// suiteDoc is a suite document with one check and one run whose fields
// edit changes, as a file given to report merge holds it.
func suiteDoc(t *testing.T, edit func(doc, run map[string]any)) string {
	t.Helper()
	s := hostSuite("node1", h200, Pass)
	s.Options = SuiteOptions{Repeat: 2}
	s.Checks[0].Runs = append(s.Checks[0].Runs, run("node1", 2, Pass, "", time.Second))
	s.Checks[0].Runs[0].Cases = Cases{Passed: 24, Total: 24}
	var buf bytes.Buffer
	if err := WriteSuiteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	r := doc["checks"].([]any)[0].(map[string]any)["runs"].([]any)[0].(map[string]any)
	edit(doc, r)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// Every number a merge reads is one miotool can have written: a duration
// that would wrap around (1e308 ms became -9.2e12), a negative one, an
// iteration or order out of the file's range, counts that cannot be, and
// a run whose verdict contradicts its exit status are refused, naming the
// check, the run and the field; never turned into a table.
func TestMergeRefusesNumbersOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(doc, run map[string]any)
		want string
	}{
		{"a duration beyond any run", func(_, r map[string]any) { r["duration_ms"] = 1e308 },
			"check 1 (capture-global-worker) run 1: duration_ms: 1e+308 is out of range (0 to 31622400000 ms, 366 days)"},
		{"a negative duration", func(_, r map[string]any) { r["duration_ms"] = -5 }, "run 1: duration_ms: -5 is out of range"},
		{"the suite's duration", func(d, _ map[string]any) { d["duration_ms"] = 4e13 }, "duration_ms: 4e+13 is out of range"},
		{"iteration 0", func(_, r map[string]any) { r["iteration"] = 0 }, "run 1: iteration: 0 is out of range (1 to 2)"},
		{"an iteration past the repeat", func(_, r map[string]any) { r["iteration"] = 3 }, "run 1: iteration: 3 is out of range (1 to 2)"},
		{"order 0", func(_, r map[string]any) { r["order"] = 0 }, "run 1: order: 0 is out of range (1 to 2)"},
		{"an order past the runs", func(_, r map[string]any) { r["order"] = 99 }, "run 1: order: 99 is out of range (1 to 2)"},
		{"an exit code past 255", func(_, r map[string]any) { r["exit_code"] = 256 }, "run 1: exit_code: 256 is out of range (-1 to 255)"},
		{"PASS with exit status 1", func(_, r map[string]any) { r["exit_code"] = 1 }, "run 1: exit_code: 1 contradicts the verdict PASS (exit status 0)"},
		{"FAIL with exit status 0", func(_, r map[string]any) { r["verdict"] = "FAIL" },
			"run 1: exit_code: 0 contradicts the verdict FAIL (exit status 1)"},
		{"more passed than there were", func(_, r map[string]any) { r["cases"] = map[string]any{"passed": 25, "total": 24} },
			"run 1: cases.passed: 25 is out of range (0 to 24)"},
		{"a negative count", func(_, r map[string]any) { r["cases"] = map[string]any{"passed": -1, "total": 24} },
			"run 1: cases.passed: -1 is out of range (0 to 24)"},
		{"more finished than planned", func(_, r map[string]any) { r["progress"] = map[string]any{"finished": 5, "planned": 4} },
			"run 1: progress.finished: 5 is out of range (0 to 4)"},
		{"a negative repeat", func(d, _ map[string]any) { d["options"].(map[string]any)["repeat"] = -1 },
			"options.repeat: -1 is out of range"},
		{"shard 0 of 4", func(d, _ map[string]any) { d["shard"] = map[string]any{"index": 0, "count": 4, "split": "checks"} },
			"shard: index 0 is out of range (1 to the count, 4)"},
		{"shard 5 of 4", func(d, _ map[string]any) { d["shard"] = map[string]any{"index": 5, "count": 4, "split": "checks"} },
			"shard: index 5 is out of range"},
		{"a shard of what", func(d, _ map[string]any) { d["shard"] = map[string]any{"index": 1, "count": 4, "split": "hosts"} },
			`shard: split "hosts" is neither "checks" nor "runs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadSuiteJSON(strings.NewReader(suiteDoc(t, tc.edit)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The unchanged document reads, and a run without an exit code (as
	// early files wrote some) takes its verdict's.
	s, err := ReadSuiteJSON(strings.NewReader(suiteDoc(t, func(_, r map[string]any) { delete(r, "exit_code"); r["verdict"] = "FAIL" })))
	if err != nil || s.Checks[0].Runs[0].ExitCode != ExitFail {
		t.Errorf("a run without exit_code: %v", err)
	}
}

// A single check's result is held to the same: its duration, its counts,
// and an exit code that says what its verdict says (a result never says
// PASS with another status than 0).
func TestReadJSONRefusesNumbersOutOfRange(t *testing.T) {
	base := func(edit func(map[string]any)) string {
		r := New("capture", "miotool capture", suiteStart)
		r.Cases = Cases{Passed: 4, Total: 4}
		r.Finish(Pass, "passed", suiteStart.Add(time.Second))
		var buf bytes.Buffer
		if err := WriteJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		edit(doc)
		out, _ := json.Marshal(doc)
		return string(out)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"1e308 ms", func(d map[string]any) { d["duration_ms"] = 1e308 }, "duration_ms: 1e+308 is out of range"},
		{"a negative duration", func(d map[string]any) { d["duration_ms"] = -0.5 }, "duration_ms: -0.5 is out of range"},
		{"PASS exiting 3", func(d map[string]any) { d["exit_code"] = 3 }, "exit_code: 3 contradicts the verdict PASS (exit status 0)"},
		{"ERROR exiting 0", func(d map[string]any) { d["verdict"] = "ERROR" }, "exit_code: 0 contradicts the verdict ERROR (exit status 3)"},
		{"INTERRUPTED exiting 1", func(d map[string]any) { d["verdict"], d["exit_code"] = "INTERRUPTED", 1 },
			"exit_code: 1 contradicts the verdict INTERRUPTED"},
		{"a negative exit code", func(d map[string]any) { d["exit_code"] = -1 }, "exit_code: -1 is out of range (0 to 255)"},
		{"cases", func(d map[string]any) { d["cases"] = map[string]any{"passed": 5, "total": 4} }, "cases.passed: 5 is out of range (0 to 4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(base(tc.edit)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
			// Given to merge, as a suite of one check, the same.
			if _, err := ReadSuiteJSON(strings.NewReader(base(tc.edit))); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("as a suite: err = %v", err)
			}
		})
	}
	// What miotool writes on a signal or a usage error reads back.
	for _, ok := range []struct {
		verdict string
		code    int
	}{{"INTERRUPTED", 143}, {"ERROR", 2}, {"INTERRUPTED", 130}} {
		doc := base(func(d map[string]any) { d["verdict"], d["exit_code"] = ok.verdict, ok.code })
		if r, err := ReadJSON(strings.NewReader(doc)); err != nil || r.ExitCode() != ok.code {
			t.Errorf("%s exiting %d: %v", ok.verdict, ok.code, err)
		}
	}
}
