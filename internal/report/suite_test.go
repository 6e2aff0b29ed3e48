package report

import (
	"bytes"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	suiteStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h200       = Device{Name: "NVIDIA H200", Arch: "sm_90", Description: "NVIDIA H200 (sm_90, 132 CUs, cuda)"}
	mi300      = Device{Name: "AMD Instinct MI300X", Arch: "gfx942", Description: "AMD Instinct MI300X (gfx942, 304 CUs, hip)"}
)

func run(host string, it int, v Verdict, summary string, d time.Duration) SuiteRun {
	return SuiteRun{Host: host, Iteration: it, Order: it, Verdict: v, ExitCode: v.ExitCode(), Summary: summary,
		Backend: "cuda", Device: h200, Started: suiteStart.Add(time.Duration(it) * time.Second), Duration: d}
}

// sampleSuite has a check of each kind: a child status, an expected
// failure, a run that missed its expectation, a crash in an environment
// variant, a check not run, and a command that needs quoting.
func sampleSuite() *SuiteResult {
	s := NewSuiteResult("pr12265", suiteStart)
	s.RunID = "S2F4H6J8K2M4N6P8Q2R4T6V8W2"
	s.Title = "Abandoned naive-evaluation streams are reclaimed outside graph captures"
	s.File = "configs/suites/pr12265.yaml"
	s.Hosts = []string{"node1"}
	s.Tool = Tool{Version: "1.2.3", Commit: "c0ffee", GoVersion: "go1.26.8"}
	s.Duration = 95500 * time.Millisecond
	s.Options = SuiteOptions{Repeat: 2, Shuffle: true, Seed: 7, CPULoad: 2, Variants: []string{"GPU_MAX_HW_QUEUES=3"}}

	matrix := &SuiteCheck{Name: "capture-matrix", Command: "miotool capture --mode=all --reclaim=all", Expect: Pass}
	for it := 1; it <= 2; it++ {
		r := run("node1", it, Pass, "all 12 cases as expected", 1500*time.Millisecond)
		r.Detail = "Fails with --reclaim=lazy (global), passes with --reclaim=worker"
		r.Cases = Cases{Passed: 24, Total: 24}
		matrix.Runs = append(matrix.Runs, r)
	}
	lazy := &SuiteCheck{Name: "capture-global-lazy", Command: "miotool capture --mode=global --reclaim=lazy", Expect: Fail,
		Runs: []SuiteRun{
			run("node1", 1, Fail, "end capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", 110*time.Millisecond),
			run("node1", 2, Fail, "end capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", 120*time.Millisecond),
		}}
	worker := &SuiteCheck{Name: "capture-global-worker", Command: "miotool capture --mode=global --reclaim=worker", Expect: Pass,
		Runs: []SuiteRun{
			run("node1", 1, Pass, "graph output correct", 100*time.Millisecond),
			run("node1", 2, Fail, "end capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", 130*time.Millisecond),
		}}
	crashed := run("node1", 2, Error, "killed by signal SIGSEGV (segmentation fault) without a result on standard output: goroutine 1 [running]:", 40*time.Millisecond)
	crashed.Backend, crashed.Device, crashed.ExitCode = "", Device{}, -1
	crashed.StderrTail = "unexpected fault address 0x0\nfatal error: fault\n[signal SIGSEGV: segmentation violation]\n\ngoroutine 1 [running]:\n"
	replay := &SuiteCheck{Name: "replay-worker", Command: "miotool replay --reclaim=worker", Variant: "GPU_MAX_HW_QUEUES=3",
		Env: []string{"GPU_MAX_HW_QUEUES=3"}, Expect: Pass,
		Runs: []SuiteRun{run("node1", 1, Pass, "scratch released after 1.2ms", 900*time.Millisecond), crashed}}
	stress := &SuiteCheck{Name: "stress-unlocked", Command: "miotool stress-threads --cache=unlocked", Expect: Fail, Skip: "needs stress-threads"}
	find := &SuiteCheck{Name: "find a|b", Command: "miotool find --problem 'my problem'", Env: []string{"MIOPEN_NAIVE_TIMEOUT=300"}, Expect: Pass,
		Runs: []SuiteRun{run("node1", 1, Pass, "chose GemmFwd1x1Tiled", 50*time.Millisecond), run("node1", 2, Pass, "chose GemmFwd1x1Tiled", 60*time.Millisecond)}}
	s.Checks = []*SuiteCheck{matrix, lazy, worker, replay, stress, find}
	return s
}

func TestSuiteRenderGolden(t *testing.T) {
	cases := []struct {
		name  string
		write func(*bytes.Buffer, *SuiteResult) error
	}{
		{"suite_markdown", func(b *bytes.Buffer, s *SuiteResult) error { return RenderSuite(b, Markdown, s, Options{}) }},
		{"suite_text_plain", func(b *bytes.Buffer, s *SuiteResult) error { return RenderSuite(b, Text, s, Options{}) }},
		{"suite_text_tty", func(b *bytes.Buffer, s *SuiteResult) error {
			return RenderSuite(b, Text, s, Options{TTY: true, Color: true})
		}},
		{"suite_json", func(b *bytes.Buffer, s *SuiteResult) error { return RenderSuite(b, JSON, s, Options{}) }},
		{"suite_junit", func(b *bytes.Buffer, s *SuiteResult) error { return WriteJUnit(b, s) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.write(&buf, sampleSuite()); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), buf.Bytes())
		})
	}
}

func TestSuiteStatuses(t *testing.T) {
	s := sampleSuite()
	want := map[string]string{
		"capture-matrix":        "Passed (24/24; 2/2 runs): Fails with --reclaim=lazy (global), passes with --reclaim=worker",
		"capture-global-lazy":   "Fails as expected (2/2 runs failed)",
		"capture-global-worker": "Failed (1/2 runs failed; expected PASS)",
		"replay-worker [GPU_MAX_HW_QUEUES=3]": "Error (1/2 runs errored; expected PASS): " +
			"killed by signal SIGSEGV (segmentation fault) without a result on standard output: goroutine 1 [running]:",
		"stress-unlocked": "Not run (needs stress-threads)",
		"find a|b":        "Passed (2/2 runs)",
	}
	for _, c := range s.Checks {
		if got := c.Status(); got != want[c.Test()] {
			t.Errorf("%s: status %q, want %q", c.Test(), got, want[c.Test()])
		}
	}
	tot := s.Totals()
	if tot != (SuiteTotals{Checks: 6, Met: 3, Unmet: 2, Errors: 1, NotRun: 1}) {
		t.Errorf("totals %+v", tot)
	}
	if s.Verdict() != Fail || s.ExitCode() != ExitFail {
		t.Errorf("a suite with an unmet check: verdict %s exit %d, want FAIL 1", s.Verdict(), s.ExitCode())
	}
	// Drop the two unmet checks: every remaining check met its expectation.
	s.Checks = []*SuiteCheck{s.Checks[0], s.Checks[1], s.Checks[4], s.Checks[5]}
	if s.Verdict() != Pass || s.ExitCode() != ExitPass {
		t.Errorf("verdict %s exit %d, want PASS 0", s.Verdict(), s.ExitCode())
	}
	// A check with no run and no reason is not a pass: the tool lost it.
	s.Checks = append(s.Checks, &SuiteCheck{Name: "late", Command: "miotool find", Expect: Pass})
	if s.Verdict() != Error || s.Checks[4].Status() != "Not run (no run recorded)" || s.Checks[4].Outcome() != Skip {
		t.Errorf("a check without runs: verdict %s, status %q, outcome %s", s.Verdict(), s.Checks[4].Status(), s.Checks[4].Outcome())
	}
	// In an interrupted suite it is not run: neither met nor unmet.
	s.Interrupted = "interrupted by SIGINT"
	if s.Verdict() != Interrupted || s.ExitCode() != ExitInterrupted {
		t.Errorf("interrupted suite: verdict %s exit %d, want INTERRUPTED 130", s.Verdict(), s.ExitCode())
	}
	if tot := s.Totals(); tot != (SuiteTotals{Checks: 5, Met: 3, NotRun: 2}) {
		t.Errorf("interrupted suite: totals %+v", tot)
	}
}

// An interrupted suite says so in every format; the checks it never
// reached are not run (JSON totals.not_run, JUnit <skipped>), never PASS
// and never FAIL.
func TestInterruptedSuiteRenders(t *testing.T) {
	s := NewSuiteResult("pr12265", suiteStart)
	s.Interrupted = "interrupted by SIGINT"
	done := &SuiteCheck{Name: "capture-global-worker", Command: "miotool capture --mode=global --reclaim=worker", Expect: Pass,
		Runs: []SuiteRun{run("node1", 1, Pass, "graph output correct", 100*time.Millisecond)}}
	late := &SuiteCheck{Name: "capture-global-lazy", Command: "miotool capture --mode=global --reclaim=lazy", Expect: Fail}
	s.Checks = []*SuiteCheck{done, late}

	var text, md, js, junit bytes.Buffer
	for _, w := range []struct {
		buf *bytes.Buffer
		f   Format
	}{{&text, Text}, {&md, Markdown}, {&js, JSON}} {
		if err := RenderSuite(w.buf, w.f, s, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteJUnit(&junit, s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text.String(), "suite pr12265: INTERRUPTED - interrupted by SIGINT before the suite finished") {
		t.Errorf("text headline: %q", firstLine(text.String()))
	}
	if !strings.HasPrefix(md.String(), "### Suite pr12265: INTERRUPTED\n") {
		t.Errorf("Markdown headline: %q", firstLine(md.String()))
	}
	back, err := ReadSuiteJSON(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if back.Interrupted != s.Interrupted || back.Verdict() != Interrupted {
		t.Errorf("JSON read back: interrupted %q verdict %s", back.Interrupted, back.Verdict())
	}
	for _, want := range []string{`"verdict": "INTERRUPTED"`, `"exit_code": 130`, `"not_run": 1`, `"interrupted": "interrupted by SIGINT"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js.String())
		}
	}
	var doc struct {
		Skipped int `xml:"skipped,attr"`
		Props   []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(junit.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, p := range doc.Props {
		props[p.Name] = p.Value
	}
	if props["miotool.verdict"] != "INTERRUPTED" || props["miotool.interrupted"] != "interrupted by SIGINT" {
		t.Errorf("JUnit properties %v", props)
	}
	c := doc.Cases[1]
	if doc.Skipped != 1 || c.Skipped == nil || c.Failure != nil || !strings.Contains(c.Skipped.Message, "interrupted") {
		t.Errorf("JUnit: %d skipped; the check not reached: %+v", doc.Skipped, c)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// The JUnit document carries what CI readers require: one <testsuite> as
// the root, which may say how many cases were skipped (junit-10.xsd
// allows skipped on <testsuite> only), every case in it, each variant's
// cases told apart by their classname and name.
func TestJUnitHasTheRequiredElements(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, sampleSuite()); err != nil {
		t.Fatal(err)
	}
	type message struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	var doc struct {
		XMLName  xml.Name
		Name     string  `xml:"name,attr"`
		Tests    *int    `xml:"tests,attr"`
		Failures *int    `xml:"failures,attr"`
		Errors   *int    `xml:"errors,attr"`
		Skipped  *int    `xml:"skipped,attr"`
		Time     *string `xml:"time,attr"`
		Hostname string  `xml:"hostname,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Classname *string  `xml:"classname,attr"`
			Name      *string  `xml:"name,attr"`
			Time      *string  `xml:"time,attr"`
			Failure   *message `xml:"failure"`
			Error     *message `xml:"error"`
			Skipped   *message `xml:"skipped"`
			SystemOut string   `xml:"system-out"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if doc.XMLName.Local != "testsuite" || doc.Tests == nil || doc.Failures == nil || doc.Errors == nil || doc.Skipped == nil || doc.Time == nil {
		t.Fatalf("root %q lacks tests/failures/errors/skipped/time:\n%s", doc.XMLName.Local, buf.String())
	}
	if doc.Hostname != "node1" || doc.Name != "pr12265" {
		t.Errorf("testsuite %q hostname %q", doc.Name, doc.Hostname)
	}
	environments := 0
	for _, p := range doc.Props {
		if p.Name == "environment" && p.Value == "GPU_MAX_HW_QUEUES=3" {
			environments++
		}
	}
	if environments != 1 {
		t.Errorf("properties %+v: want the variant GPU_MAX_HW_QUEUES=3 once", doc.Props)
	}
	var failures, errs, skipped, cases int
	for _, c := range doc.Cases {
		cases++
		if c.Classname == nil || c.Name == nil || c.Time == nil {
			t.Fatalf("testcase lacks classname/name/time: %+v", c)
		}
		if !strings.Contains(c.SystemOut, "command: ") {
			t.Errorf("%s: system-out %q lacks the command", *c.Name, c.SystemOut)
		}
		for _, m := range []*message{c.Failure, c.Error, c.Skipped} {
			if m != nil && m.Message == "" {
				t.Errorf("%s: a failure/error/skipped element without message", *c.Name)
			}
		}
		switch *c.Name {
		case "capture-global-worker":
			failures++
			if c.Failure == nil || !strings.Contains(c.Failure.Text, "run 2 on node1: FAIL, expected PASS") {
				t.Errorf("capture-global-worker: failure %+v", c.Failure)
			}
		case "replay-worker [GPU_MAX_HW_QUEUES=3]":
			errs++
			if c.Error == nil || !strings.Contains(c.Error.Text, "fatal error: fault") || *c.Classname != "miotool.pr12265[GPU_MAX_HW_QUEUES=3]" {
				t.Errorf("replay-worker: error %+v, want the stderr tail; classname %s", c.Error, *c.Classname)
			}
		case "stress-unlocked":
			skipped++
			if c.Skipped == nil || c.Skipped.Message != "Not run (needs stress-threads)" {
				t.Errorf("stress-unlocked: skipped %+v", c.Skipped)
			}
		default:
			if c.Failure != nil || c.Error != nil || c.Skipped != nil {
				t.Errorf("%s met its expectation but is marked %+v %+v %+v", *c.Name, c.Failure, c.Error, c.Skipped)
			}
		}
	}
	if *doc.Tests != cases || *doc.Failures != failures || *doc.Errors != errs || *doc.Skipped != skipped {
		t.Errorf("testsuite counts %d/%d/%d/%d, cases %d/%d/%d/%d", *doc.Tests, *doc.Failures, *doc.Errors, *doc.Skipped, cases, failures, errs, skipped)
	}
	if cases != 6 || failures != 1 || errs != 1 || skipped != 1 {
		t.Errorf("cases %d failures %d errors %d skipped %d", cases, failures, errs, skipped)
	}
}

func TestSuiteJSONRoundTrip(t *testing.T) {
	var first bytes.Buffer
	if err := WriteSuiteJSON(&first, sampleSuite()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSuiteJSON(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := WriteSuiteJSON(&second, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("write, read, write changed the document:\n%s\n---\n%s", first.String(), second.String())
	}
}

func TestReadSuiteJSONRejects(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"schema":"miotool/result/v1","verdict":"MAYBE"}`, "single check's result (miotool/result/v1): verdict: unknown verdict"},
		{`{"schema":"miotool/suite/v9"}`, `"miotool/suite/v9"`},
		{`{"schema":"miotool/suite/v1","checks":[{"name":"x","expect":"MAYBE"}]}`, `check 1 (x): expect: unknown verdict "MAYBE"`},
		{`{"schema":"miotool/suite/v1","checks":[{"name":"x","expect":"PASS","runs":[{"verdict":"?"}]}]}`, "check 1 (x) run 1"},
		{`not json`, "reading suite result"},
	} {
		_, err := ReadSuiteJSON(strings.NewReader(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.doc, err, tc.want)
		}
	}
}

func hostSuite(host string, dev Device, verdicts ...Verdict) *SuiteResult {
	s := NewSuiteResult("pr12265", suiteStart)
	if host != "" {
		s.Hosts = []string{host}
	}
	s.Duration = time.Minute
	c := &SuiteCheck{Name: "capture-global-worker", Command: "miotool capture --mode=global --reclaim=worker", Expect: Pass}
	for i, v := range verdicts {
		r := run(host, i+1, v, "", time.Second)
		r.Device = dev
		c.Runs = append(c.Runs, r)
	}
	s.Checks = []*SuiteCheck{c}
	return s
}

func TestMergeDisambiguatesClashingDevices(t *testing.T) {
	a := hostSuite("node1", h200, Pass)
	b := hostSuite("node2", h200, Pass, Fail)
	c := hostSuite("node3", mi300, Pass)
	c.Started = suiteStart.Add(-time.Minute)
	m, err := MergeSuites([]*SuiteResult{a, b, c}, []string{"a.json", "b.json", "c.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Checks) != 1 || len(m.Checks[0].Runs) != 4 {
		t.Fatalf("want one row with 4 runs: %+v", m.Checks)
	}
	row := m.Checklist().Rows[0].Cells
	wantDevices := "NVIDIA H200 (sm_90) on node1, NVIDIA H200 (sm_90) on node2, AMD Instinct MI300X (gfx942)"
	if row[2] != wantDevices {
		t.Errorf("devices %q, want %q", row[2], wantDevices)
	}
	if want := "Failed (1/4 runs failed on node2; expected PASS)"; row[3] != want {
		t.Errorf("status %q, want %q", row[3], want)
	}
	if strings.Join(m.Hosts, ",") != "node1,node2,node3" || !m.Started.Equal(suiteStart.Add(-time.Minute)) || m.Duration != 2*time.Minute {
		t.Errorf("hosts %v started %v duration %v", m.Hosts, m.Started, m.Duration)
	}
	if m.ExitCode() != ExitFail {
		t.Errorf("merged exit %d, want 1 for node2's failure", m.ExitCode())
	}
}

func TestMergeNamesHostlessRunsByFile(t *testing.T) {
	a := hostSuite("", h200, Pass)
	b := hostSuite("", h200, Pass)
	m, err := MergeSuites([]*SuiteResult{a, b}, []string{"results/gpu-a.json", "results/gpu-b.json"})
	if err != nil {
		t.Fatal(err)
	}
	row := m.Checklist().Rows[0].Cells
	if want := "NVIDIA H200 (sm_90) on gpu-a, NVIDIA H200 (sm_90) on gpu-b"; row[2] != want {
		t.Errorf("devices %q, want %q", row[2], want)
	}
	if row[3] != "Passed (2/2 runs)" {
		t.Errorf("status %q", row[3])
	}
	// A merged result merges again, through its JSON.
	var buf bytes.Buffer
	if err := WriteSuiteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSuiteJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	again, err := MergeSuites([]*SuiteResult{back, hostSuite("node9", h200, Fail)}, []string{"m.json", "n.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Checklist().Rows[0].Cells[3]; got != "Failed (1/3 runs failed on node9; expected PASS)" {
		t.Errorf("re-merged status %q", got)
	}
	if _, err := MergeSuites(nil, nil); err == nil {
		t.Error("merging nothing succeeded")
	}
}

// Checks differing in variant or expectation stay apart.
func TestMergeKeepsDifferentChecksApart(t *testing.T) {
	a := hostSuite("node1", h200, Pass)
	b := hostSuite("node2", h200, Fail)
	b.Checks[0].Expect = Fail
	c := hostSuite("node3", h200, Pass)
	c.Checks[0].Variant, c.Checks[0].Env = "GPU_MAX_HW_QUEUES=3", []string{"GPU_MAX_HW_QUEUES=3"}
	m, err := MergeSuites([]*SuiteResult{a, b, c}, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Checks) != 3 {
		t.Fatalf("%d rows, want 3", len(m.Checks))
	}
	if m.ExitCode() != ExitPass {
		t.Errorf("exit %d: each row met its own expectation", m.ExitCode())
	}
}

func TestChecklistCommand(t *testing.T) {
	for in, want := range map[string]string{
		"miotool rules --format markdown":                                "miotool rules",
		"miotool rules --format=json --dialect hip":                      "miotool rules --dialect hip",
		"miotool capture --no-progress --mode=global --junit out.xml":    "miotool capture --mode=global",
		"miotool --format json --backend sim find --no-progress=true":    "miotool --backend sim find",
		"miotool find --problem 'my problem' --format md":                "miotool find --problem 'my problem'",
		"miotool rules --expect 'a --format b.yaml'":                     "miotool rules --expect 'a --format b.yaml'",
		"miotool find -- --format json":                                  "miotool find -- --format json",
		"miotool rules --formats x":                                      "miotool rules --formats x",
		"miotool find --problem 'unterminated --format json":             "miotool find --problem 'unterminated --format json",
		"GPU_MAX_HW_QUEUES=3 miotool capture --format markdown --seed 2": "GPU_MAX_HW_QUEUES=3 miotool capture --seed 2",
	} {
		if got := ChecklistCommand(in); got != want {
			t.Errorf("ChecklistCommand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResultChecklistRowDropsOutputFlags(t *testing.T) {
	r := New("rules", "miotool rules --dialect cuda --format markdown --no-progress", time.Time{})
	if got := r.ChecklistRow()[1]; got != "miotool rules --dialect cuda" {
		t.Errorf("command cell %q", got)
	}
}

func TestSplitAndJoinCommandLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"capture --mode=global", []string{"capture", "--mode=global"}},
		{`find --problem 'a b' "c \"d\"" e\ f ''`, []string{"find", "--problem", "a b", `c "d"`, "e f", ""}},
		{"  rules\t--action  malloc,free \n", []string{"rules", "--action", "malloc,free"}},
		{`x "a\nb" 'it'\''s'`, []string{"x", `a\nb`, "it's"}},
	} {
		got, err := SplitCommandLine(tc.in)
		if err != nil || strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
			t.Errorf("SplitCommandLine(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		back, err := SplitCommandLine(JoinCommandLine(got))
		if err != nil || strings.Join(back, "\x00") != strings.Join(got, "\x00") {
			t.Errorf("join then split of %q gave %q, %v", got, back, err)
		}
	}
	for _, bad := range []string{`find 'open`, `find "open`, `find \`} {
		if _, err := SplitCommandLine(bad); err == nil {
			t.Errorf("SplitCommandLine(%q) accepted it", bad)
		}
	}
}

// Terminal escapes and stray bytes in a crashed check's stderr still give
// well-formed XML.
func TestJUnitSurvivesControlCharacters(t *testing.T) {
	s := sampleSuite()
	s.Checks[3].Runs[1].StderrTail = "\x1b[31mred\x1b[0m\x00 nul \xff\xfe bytes ]]> end\n"
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, s); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Error *struct {
				Text string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
	}
	got := doc.Cases[3].Error.Text
	if !strings.Contains(got, "red") || !strings.Contains(got, "]]> end") || strings.ContainsRune(got, 0x1b) {
		t.Errorf("error text %q", got)
	}
}
