package report

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testResultsParser is test-results-parser (npm), the JUnit reader of
// CI dashboards that took its totals from a <testsuites> root, which
// junit-10.xsd does not let say what was skipped: it read a SKIP as PASS
// and counted skipped and never-started checks as passed. The test
// skips, naming what is missing, where node or the package is not there
// (.ci/run installs it and puts it on NODE_PATH).
func testResultsParser(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (Debian: nodejs), so test-results-parser cannot read the files")
	}
	if err := exec.Command(node, "-e", "require.resolve('test-results-parser')").Run(); err != nil {
		t.Skip("test-results-parser is not installed (npm install test-results-parser@0.4.6, with its node_modules on NODE_PATH, as .ci/run does)")
	}
	return node
}

// parsed is what test-results-parser makes of a JUnit file.
type parsed struct {
	Total, Passed, Failed, Errors, Skipped int
	Status                                 string
	Cases                                  []string // each case's status
}

func parseWithTestResultsParser(t *testing.T, node string, doc []byte) parsed {
	t.Helper()
	file := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	const script = `const { parse } = require('test-results-parser');
const r = parse({ type: 'junit', files: [process.argv[1]] });
const cases = [];
for (const s of r.suites) for (const c of s.cases) cases.push(c.status);
console.log(JSON.stringify({ Total: r.total, Passed: r.passed, Failed: r.failed, Errors: r.errors, Skipped: r.skipped, Status: r.status, Cases: cases }));`
	cmd := exec.Command(node, "-e", script, file)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test-results-parser: %v\n%s", err, doc)
	}
	var p parsed
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("test-results-parser printed %q: %v", out, err)
	}
	return p
}

// test-results-parser reads every JUnit file miotool writes as the file
// says: a SKIP as skipped, never-started checks as skipped, errors and
// interruptions as failing, and the file's status PASS only where
// something passed and nothing failed.
func TestTestResultsParserReadsTheJUnitRight(t *testing.T) {
	node := testResultsParser(t)
	single := func(v Verdict) []byte {
		r := New("capture", "miotool capture --mode=global", suiteStart)
		r.Finish(v, "why", suiteStart.Add(time.Second))
		var buf bytes.Buffer
		if err := WriteResultJUnit(&buf, r); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	suite := func(s *SuiteResult) []byte {
		var buf bytes.Buffer
		if err := WriteJUnit(&buf, s); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	skippedAndPassed := hostSuite("node1", h200, Pass)
	skippedAndPassed.Checks = append(skippedAndPassed.Checks,
		&SuiteCheck{Name: "needs-gpu", Command: "miotool find", Expect: Pass, Skip: "no access"})
	for _, tc := range []struct {
		name                            string
		doc                             []byte
		passed, failed, errors, skipped int
		status                          string
	}{
		{"a single PASS", single(Pass), 1, 0, 0, 0, "PASS"},
		{"a single FAIL", single(Fail), 0, 1, 0, 0, "FAIL"},
		{"a single SKIP", single(Skip), 0, 0, 0, 1, "SKIP"},
		{"a single ERROR", single(Error), 0, 0, 1, 0, "FAIL"},
		{"a single interrupted run", single(Interrupted), 0, 0, 1, 0, "FAIL"},
		{"a pass and a check not run", suite(skippedAndPassed), 1, 0, 0, 1, "PASS"},
		{"an interrupted suite", suite(nineChecks(4, true)), 4, 0, 1, 4, "FAIL"},
		{"interrupted between two checks", suite(nineChecks(4, false)), 4, 0, 1, 5, "FAIL"},
		{"the sample suite", suite(sampleSuite()), 3, 1, 1, 1, "FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			validateJUnit(t, tc.doc)
			p := parseWithTestResultsParser(t, node, tc.doc)
			// The parser counts a failure and an error apart in its
			// totals, and both as FAIL in its cases.
			if p.Passed != tc.passed || p.Failed != tc.failed || p.Errors != tc.errors || p.Skipped != tc.skipped || p.Status != tc.status {
				t.Errorf("test-results-parser reads passed %d failed %d errors %d skipped %d, status %s; want %d %d %d %d, %s\n%s",
					p.Passed, p.Failed, p.Errors, p.Skipped, p.Status, tc.passed, tc.failed, tc.errors, tc.skipped, tc.status, tc.doc)
			}
			ci := readJUnitCounts(t, tc.doc)
			want := map[string]int{"PASS": ci.Passed, "FAIL": ci.Failures + ci.Errors, "SKIP": ci.Skipped}
			got := map[string]int{}
			for _, c := range p.Cases {
				got[c]++
			}
			for k, n := range want {
				if got[k] != n {
					t.Errorf("test-results-parser reads %d cases %s, the file has %d: %v", got[k], k, n, p.Cases)
				}
			}
		})
	}
}
