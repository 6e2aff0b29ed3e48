package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A checklist row as a reader takes it from one output: its four fields,
// and the outcome it stands for (the verdict a CI or a script reads
// beside it).
type checklistRow struct {
	from                           string // the output and scenario it came from
	test, command, devices, status string
	outcome                        string // PASS, "PASS expected FAIL", FAIL, SKIP, "SKIP not run", ERROR, INTERRUPTED
}

// statusGrammar is the grammar of every status: the word, its count in
// brackets and, after a colon, the reason or the detail. The count's
// wording is the word's own, so that a count never reads as its opposite
// ("Fails as expected (0/20)" read as "none failed").
var statusGrammar = map[string]*regexp.Regexp{
	StatusPassed:          regexp.MustCompile(`^Passed \(\d+/\d+( [a-z]+)?( in all)?(; \d+/\d+ runs)?\)(: .+)?$|^Passed \(\d+/\d+ runs?\)(: .+)?$`),
	StatusFailsAsExpected: regexp.MustCompile(`^Fails as expected \((\d+/\d+( [a-z]+)? failed( in all)?(; \d+/\d+ runs failed)?|\d+/\d+ runs? failed)\)(: .+)?$`),
	StatusFailed:          regexp.MustCompile(`^Failed \((\d+/\d+( [a-z]+)? (failed|passed)|(\d+/\d+ runs? (failed|passed|skipped|interrupted|errored)( on [^;()]+)?(; )?)+)(; expected [A-Z]+)?\)(: .+)?$`),
	StatusSkipped:         regexp.MustCompile(`^Skipped \(\d+/\d+ runs? skipped( on [^;()]+)?(; expected [A-Z]+)?\): .+$`),
	StatusError:           regexp.MustCompile(`^Error \((\d+/\d+ runs? (failed|passed|skipped|interrupted|errored|not compared)( on [^;()]+)?(; )?)+(; expected [A-Z]+)?\): .+$`),
	StatusInterrupted:     regexp.MustCompile(`^Interrupted \(\d+ of \d+ [a-z]+ finished\): .+$`),
	StatusNotRun:          regexp.MustCompile(`^Not run \([^()]+\)$`),
}

// wordOf is the word a status starts with.
func wordOf(status string) string {
	for _, w := range []string{StatusFailsAsExpected, StatusSkippedAsExpected, StatusErrorsAsExpected,
		StatusPassed, StatusFailed, StatusSkipped, StatusError, StatusInterrupted, StatusNotRun} {
		if strings.HasPrefix(status, w+" (") {
			return w
		}
	}
	return ""
}

// markdownChecklist reads the rows of the Testing Checklist of a Markdown
// output, splitting cells at unescaped pipes and undoing the escapes.
func markdownChecklist(t *testing.T, md string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(md, "#### Testing Checklist\n\n")
	if !ok {
		t.Fatalf("no Testing Checklist:\n%s", md)
	}
	var rows [][]string
	for i, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue // the header and its rule
		}
		var cells []string
		var cur strings.Builder
		for k := 1; k < len(line); k++ {
			switch {
			case line[k] == '\\' && k+1 < len(line):
				if line[k+1] != '|' {
					cur.WriteByte('\\') // kept but for the pipe's: code spans keep theirs
				}
				k++
				cur.WriteByte(line[k])
			case line[k] == '|':
				cells = append(cells, strings.TrimSpace(cur.String()))
				cur.Reset()
			default:
				cur.WriteByte(line[k])
			}
		}
		if len(cells) != 4 {
			t.Fatalf("a checklist row of %d cells, not Test | Command | Devices | Status: %s", len(cells), line)
		}
		cells[1] = strings.Trim(cells[1], "`")
		rows = append(rows, cells)
	}
	return rows
}

// textChecklist reads the rows of the plain-text checklist by the
// header's column positions.
func textChecklist(t *testing.T, text string) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "Test ") && strings.Contains(l, "  Command ") {
			head = i
			break
		}
	}
	if head < 0 {
		t.Fatalf("no checklist header in:\n%s", text)
	}
	h := lines[head]
	at := []int{0, strings.Index(h, "Command"), strings.Index(h, "Devices"), strings.Index(h, "Status")}
	if at[2] < 0 || at[3] < 0 {
		t.Fatalf("the text checklist lacks Devices or Status: %q", h)
	}
	var rows [][]string
	for _, l := range lines[head+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		row := make([]string, 4)
		for i := range row {
			end := len(l)
			if i < 3 {
				end = min(at[i+1], len(l))
			}
			row[i] = strings.TrimSpace(l[min(at[i], len(l)):end])
		}
		rows = append(rows, row)
	}
	return rows
}

// suiteOutcome is the outcome a suite's check stands for, as its JSON says.
func suiteOutcome(outcome, expect string, ran bool) string {
	switch {
	case outcome == "PASS" && expect != "PASS":
		return "PASS expected " + expect
	case outcome == "SKIP" && !ran:
		return "SKIP not run"
	}
	return outcome
}

// suiteRows are the checklist rows of s in Markdown, text, JSON and the
// JUnit messages, each with the outcome its JSON states.
func suiteRows(t *testing.T, name string, s *SuiteResult) []checklistRow {
	t.Helper()
	var md, text, js, junit bytes.Buffer
	for _, f := range []struct {
		buf *bytes.Buffer
		f   Format
	}{{&md, Markdown}, {&text, Text}, {&js, JSON}} {
		if err := RenderSuite(f.buf, f.f, s, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteJUnit(&junit, s); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Checks []struct {
			Test    string `json:"test"`
			Command string `json:"command"`
			Env     []string
			Expect  string `json:"expect"`
			Outcome string `json:"outcome"`
			Status  string `json:"status"`
			Devices string `json:"devices"`
			Runs    []json.RawMessage
		} `json:"checks"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	own := s.ownChecks()
	mdRows, textRows, ci := markdownChecklist(t, md.String()), textChecklist(t, text.String()), readJUnitCounts(t, junit.Bytes())
	if len(mdRows) != len(own) || len(textRows) != len(own) || len(ci.Messages) != len(own) {
		t.Fatalf("%s: %d checks, %d Markdown rows, %d text rows, %d JUnit cases", name, len(own), len(mdRows), len(textRows), len(ci.Messages))
	}
	var out []checklistRow
	i := 0
	for k, jc := range doc.Checks {
		c := s.Checks[k]
		if !s.own(c) {
			continue
		}
		outcome := suiteOutcome(jc.Outcome, jc.Expect, len(jc.Runs) > 0)
		command := c.CommandLine()
		junitStatus := ci.Messages[i]
		if strings.HasPrefix(outcome, "PASS") {
			junitStatus = jc.Status // a passing case carries no message; its status is the JSON's
		}
		out = append(out,
			checklistRow{name + ", Markdown", mdRows[i][0], mdRows[i][1], mdRows[i][2], mdRows[i][3], outcome},
			checklistRow{name + ", text", textRows[i][0], textRows[i][1], textRows[i][2], textRows[i][3], outcome},
			checklistRow{name + ", JSON", jc.Test, command, jc.Devices, jc.Status, outcome},
			checklistRow{name + ", JUnit", ci.Names[i], command, jc.Devices, junitStatus, outcome})
		i++
	}
	return out
}

// resultRows are the checklist rows of a single check's result in its
// Markdown, its JSON and its JUnit message.
func resultRows(t *testing.T, name string, r *Result) []checklistRow {
	t.Helper()
	var md, js, junit bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteResultJUnit(&junit, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	row := markdownChecklist(t, md.String())[0]
	ci := readJUnitCounts(t, junit.Bytes())
	outcome := string(r.Verdict)
	junitStatus := ci.Messages[0]
	if r.Verdict == Pass {
		junitStatus = doc.Status
	}
	command := ChecklistCommand(r.Command)
	return []checklistRow{
		{name + ", Markdown", row[0], row[1], row[2], row[3], outcome},
		{name + ", JSON", r.Check, command, r.Device.Short(), doc.Status, outcome},
		{name + ", JUnit", ci.Names[0], command, r.Device.Short(), junitStatus, outcome},
	}
}

// The rows a pull request's Testing Checklist is pasted from, in every
// output of a suite run on one device, a single check, a merge of two
// hosts with different devices, an ERROR, an interrupted run and a met
// FAIL expectation, each carry the seed's four fields: the test, the
// command, the devices it ran on (every row, one device or many) and a
// status with its count, and its reason where it is a SKIP, an ERROR or
// an interruption. Each outcome has one wording across all of them.
func TestEveryChecklistRowHasItsFourFields(t *testing.T) {
	// A suite on one device, with a met FAIL expectation and a check
	// counted in sub-tests.
	suite := NewSuiteResult("pr12265", suiteStart)
	suite.Hosts, suite.Options = []string{"node1"}, SuiteOptions{Repeat: 1}
	rulesRun := run("node1", 1, Pass, "243 cells as expected", time.Second)
	rulesRun.Cases = Cases{Passed: 243, Total: 243}
	lazyRun := run("node1", 2, Fail, "end capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", time.Second)
	lazyRun.Cases = Cases{Passed: 0, Total: 20}
	suite.Checks = []*SuiteCheck{
		{Name: "rules-sim-vs-h200", Command: "miotool rules --dialect cuda --expect configs/rules/h200-cuda.yaml", Expect: Pass, Runs: []SuiteRun{rulesRun}},
		{Name: "capture-global-lazy", Command: "miotool capture --mode=global --reclaim=lazy", Expect: Fail, Runs: []SuiteRun{lazyRun}},
		{Name: "capture-global-worker", Command: "miotool capture --mode=global --reclaim=worker", Expect: Pass,
			Runs: []SuiteRun{run("node1", 3, Pass, "graph output correct", time.Second)}},
		{Name: "reporter-repro", Command: "miotool trace -- python3 repro.py", Expect: Fail, Skip: "no access"},
	}

	// A merge of two hosts with different devices, one of whose runs
	// missed its expectation and one of which crashed.
	nodeA, nodeB := hostSuite("node1", h200, Pass), hostSuite("node2", mi300, Fail)
	crash := run("node2", 1, Error, "killed by signal SIGSEGV without a result", 40*time.Millisecond)
	crash.Device, crash.Backend, crash.ExitCode = Device{}, "", -1
	nodeB.Checks = append(nodeB.Checks, &SuiteCheck{Name: "replay-worker", Command: "miotool replay --reclaim=worker", Expect: Pass,
		Runs: []SuiteRun{crash}})
	merged, err := MergeSuites([]*SuiteResult{nodeA, nodeB}, []string{"node1.json", "node2.json"})
	if err != nil {
		t.Fatal(err)
	}

	// An interrupted suite: one check stopped while it ran, one never
	// started, one run that skipped (no device).
	stopped := nineChecks(1, true)
	stopped.Checks = stopped.Checks[:3]
	skipRun := run("node1", 1, Skip, "backend cuda unavailable: libcuda.so.1 not found", time.Millisecond)
	skipRun.Device, skipRun.Backend = Device{}, ""
	stopped.Checks = append(stopped.Checks, &SuiteCheck{Name: "needs-cuda", Command: "miotool capture --backend cuda", Expect: Pass,
		Runs: []SuiteRun{skipRun}})

	// Single checks: a matrix with its detail, an ERROR, an
	// interrupted run, a SKIP and a FAIL.
	single := func(v Verdict, summary string, edit func(*Result)) *Result {
		r := New("capture", "miotool capture --mode=all --reclaim=all --format json", suiteStart)
		r.Backend, r.Device = "cuda", h200
		r.Finish(v, summary, suiteStart.Add(time.Second))
		if edit != nil {
			edit(r)
		}
		return r
	}
	matrix := single(Pass, "all 24 cases as expected", func(r *Result) {
		r.Cases, r.Detail = Cases{Passed: 24, Total: 24}, "fails with --reclaim=lazy (global), passes with --reclaim=worker"
	})
	failed := single(Fail, "1 of 24 cases not as expected", func(r *Result) { r.Cases = Cases{Passed: 23, Total: 24} })
	errored := single(Error, "the find-db cannot be written: /db: permission denied", nil)
	interrupted := single(Interrupted, "interrupted by SIGINT", func(r *Result) {
		r.Progress = Progress{Finished: 3, Planned: 24, Unit: "cases"}
	})
	skipped := single(Skip, "no GPU runtime loaded and --backend cuda was asked for", func(r *Result) { r.Device = Device{} })

	var rows []checklistRow
	rows = append(rows, suiteRows(t, "a suite on one device", suite)...)
	rows = append(rows, suiteRows(t, "a merge of two hosts", merged)...)
	rows = append(rows, suiteRows(t, "an interrupted suite", stopped)...)
	for name, r := range map[string]*Result{"a single matrix": matrix, "a single FAIL": failed, "a single ERROR": errored,
		"a single interrupted run": interrupted, "a single SKIP": skipped} {
		rows = append(rows, resultRows(t, name, r)...)
	}

	wordsOf := map[string]map[string]bool{}
	for _, r := range rows {
		what := r.from + ", " + r.test
		if r.test == "" || r.command == "" || r.devices == "" || r.status == "" {
			t.Errorf("%s: a field is empty: test %q, command %q, devices %q, status %q", what, r.test, r.command, r.devices, r.status)
		}
		if strings.ContainsAny(r.test+r.command+r.devices+r.status, "\n\r") {
			t.Errorf("%s: a row over more than one line", what)
		}
		if !strings.HasPrefix(r.command, "miotool ") || strings.Contains(r.command, "--format") {
			t.Errorf("%s: command %q", what, r.command)
		}
		word := wordOf(r.status)
		if g := statusGrammar[word]; g == nil || !g.MatchString(r.status) {
			t.Errorf("%s: status %q does not follow the wording of %q", what, r.status, word)
		}
		if wordsOf[r.outcome] == nil {
			wordsOf[r.outcome] = map[string]bool{}
		}
		wordsOf[r.outcome][word] = true
	}
	// One wording per outcome, across commands, suites, merges and formats.
	want := map[string]string{
		"PASS": StatusPassed, "PASS expected FAIL": StatusFailsAsExpected, "FAIL": StatusFailed, "SKIP": StatusSkipped,
		"SKIP not run": StatusNotRun, "ERROR": StatusError, "INTERRUPTED": StatusInterrupted,
	}
	for outcome, word := range want {
		got := wordsOf[outcome]
		if len(got) != 1 || !got[word] {
			t.Errorf("outcome %s is worded %v, want only %q", outcome, got, word)
		}
	}
	for outcome := range wordsOf {
		if _, ok := want[outcome]; !ok {
			t.Errorf("an outcome the test does not know: %s", outcome)
		}
	}
	// Some figures, checked whole.
	for _, w := range []struct{ from, test, devices, status string }{
		{"a suite on one device, Markdown", "capture-global-lazy", "NVIDIA H200 (sm_90)", "Fails as expected (20/20 failed)"},
		{"a suite on one device, text", "rules-sim-vs-h200", "NVIDIA H200 (sm_90)", "Passed (243/243)"},
		{"a suite on one device, Markdown", "reporter-repro", "none", "Not run (no access)"},
		{"a merge of two hosts, Markdown", "capture-global-worker", "NVIDIA H200 (sm_90), AMD Instinct MI300X (gfx942)",
			"Failed (1/2 runs failed on node2; expected PASS)"},
		{"a merge of two hosts, JUnit", "replay-worker", "none", "Error (1/1 run errored; expected PASS): killed by signal SIGSEGV without a result"},
		{"an interrupted suite, text", "check-2", "none", "Interrupted (0 of 1 run finished): interrupted by SIGINT after 2.03s"},
		{"an interrupted suite, JUnit", "needs-cuda", "none",
			"Skipped (1/1 run skipped; expected PASS): backend cuda unavailable: libcuda.so.1 not found"},
		{"a single matrix, Markdown", "capture", "NVIDIA H200 (sm_90)",
			"Passed (24/24): fails with --reclaim=lazy (global), passes with --reclaim=worker"},
		{"a single FAIL, JUnit", "capture", "NVIDIA H200 (sm_90)", "Failed (1/24 failed)"},
		{"a single ERROR, Markdown", "capture", "NVIDIA H200 (sm_90)", "Error (1/1 run errored): the find-db cannot be written: /db: permission denied"},
		{"a single interrupted run, JUnit", "capture", "NVIDIA H200 (sm_90)", "Interrupted (3 of 24 cases finished): interrupted by SIGINT"},
		{"a single SKIP, Markdown", "capture", "none", "Skipped (1/1 run skipped): no GPU runtime loaded and --backend cuda was asked for"},
	} {
		found := false
		for _, r := range rows {
			if r.from == w.from && r.test == w.test {
				found = true
				if r.devices != w.devices || r.status != w.status {
					t.Errorf("%s, %s: devices %q status %q; want %q, %q", w.from, w.test, r.devices, r.status, w.devices, w.status)
				}
			}
		}
		if !found {
			t.Errorf("no row %s in %s", w.test, w.from)
		}
	}
}

// An interrupted result has one wording in every command: why, how far
// it got (the stopped and the not started left out when there are none),
// and what the finished part showed; its row says why after the count.
func TestOneInterruptedWording(t *testing.T) {
	for _, tt := range []struct {
		p       Progress
		stopped int
		soFar   string
		summary string
		status  string
	}{
		{Progress{54, 1000, "runs"}, 1, "every finished run as expected",
			"interrupted by SIGINT: 54 of 1000 runs finished, 1 stopped while it ran, 945 not started; so far every finished run as expected",
			"Interrupted (54 of 1000 runs finished): interrupted by SIGINT; so far every finished run as expected"},
		{Progress{127, 369, "cells"}, 0, "",
			"interrupted by SIGINT: 127 of 369 cells finished, 242 not started",
			"Interrupted (127 of 369 cells finished): interrupted by SIGINT"},
		{Progress{1, 3, "applicable solvers"}, 2, "",
			"interrupted by SIGINT: 1 of 3 applicable solvers finished, 2 stopped while they ran",
			"Interrupted (1 of 3 applicable solvers finished): interrupted by SIGINT"},
		{Progress{}, 0, "the run had finished: PASS, all match",
			"interrupted by SIGINT; so far the run had finished: PASS, all match",
			"Interrupted (0 of 1 run finished): interrupted by SIGINT; so far the run had finished: PASS, all match"},
	} {
		r := New("check", "miotool check", time.Unix(0, 0))
		r.Interrupt("interrupted by SIGINT", tt.p, tt.stopped, tt.soFar, time.Unix(1, 0))
		if r.Verdict != Interrupted || r.Summary != tt.summary || r.ChecklistStatus() != tt.status {
			t.Errorf("%+v:\n summary %q\n  status %q\nwant\n summary %q\n  status %q", tt.p, r.Summary, r.ChecklistStatus(), tt.summary, tt.status)
		}
	}
}
