//go:build unix

package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"miotool/internal/report"
	"miotool/internal/testutil"
)

// junitCounts is what a CI reads from a JUnit file: the declared counts
// of <testsuites> and of each <testsuite>, and the cases by what they hold.
type junitCounts struct {
	Tests, Failures, Errors    int
	Suites                     int
	SuiteSkipped               int
	Passed, Failed, Err, Skips int
	ErrorTypes                 []string
}

func readJUnit(t *testing.T, doc []byte) junitCounts {
	t.Helper()
	type msg struct {
		Type string `xml:"type,attr"`
	}
	var top struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Skipped int `xml:"skipped,attr"`
			Cases   []struct {
				Failure *msg `xml:"failure"`
				Error   *msg `xml:"error"`
				Skipped *msg `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(doc, &top); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s", err, doc)
	}
	c := junitCounts{Tests: top.Tests, Failures: top.Failures, Errors: top.Errors, Suites: len(top.Suites)}
	for _, s := range top.Suites {
		c.SuiteSkipped += s.Skipped
		for _, tc := range s.Cases {
			switch {
			case tc.Failure != nil:
				c.Failed++
			case tc.Error != nil:
				c.Err++
				c.ErrorTypes = append(c.ErrorTypes, tc.Error.Type)
			case tc.Skipped != nil:
				c.Skips++
			default:
				c.Passed++
			}
		}
	}
	return c
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// One run leaves the --format view on stdout and each file an output flag
// names, whatever the verdict; the JUnit file is one <testsuite> with one
// case whose outcome is the verdict's, valid against Jenkins' schema.
func TestOneRunWritesEveryOutput(t *testing.T) {
	for _, tt := range []struct {
		v    report.Verdict
		code int
		want junitCounts // the counts compared
	}{
		{report.Pass, 0, junitCounts{Tests: 1, Suites: 1, Passed: 1}},
		{report.Fail, 1, junitCounts{Tests: 1, Failures: 1, Suites: 1, Failed: 1}},
		{report.Error, 3, junitCounts{Tests: 1, Errors: 1, Suites: 1, Err: 1, ErrorTypes: []string{"ERROR"}}},
		{report.Skip, 4, junitCounts{Tests: 1, Suites: 1, SuiteSkipped: 1, Skips: 1}},
		{report.Interrupted, 130, junitCounts{Tests: 1, Errors: 1, Suites: 1, Err: 1, ErrorTypes: []string{"interrupted"}}},
	} {
		t.Run(string(tt.v), func(t *testing.T) {
			tc := newTestCLI(t)
			tc.checkRun = func() (*Outcome, error) { return Single(testResult(tt.v)), nil }
			dir := t.TempDir()
			junit, md, js := filepath.Join(dir, "c.xml"), filepath.Join(dir, "c.md"), filepath.Join(dir, "c.json")
			if code := tc.run("check", "--junit", junit, "--export-markdown", md, "--export-json", js); code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, tc.errOut)
			}
			if !strings.Contains(tc.out.String(), "the case gave "+string(tt.v)) || strings.HasPrefix(tc.out.String(), "{") {
				t.Errorf("stdout is not the text view:\n%s", tc.out)
			}
			doc := readFile(t, junit)
			if got := readJUnit(t, doc); !equalCounts(got, tt.want) {
				t.Errorf("JUnit counts %+v, want %+v\n%s", got, tt.want, doc)
			}
			testutil.ValidateJUnit(t, doc)
			if m := string(readFile(t, md)); !strings.Contains(m, "#### Testing Checklist") {
				t.Errorf("--export-markdown holds no checklist:\n%s", m)
			}
			r, err := report.ReadJSON(bytes.NewReader(readFile(t, js)))
			if err != nil || r.Verdict != tt.v || r.ExitCode() != tt.code {
				t.Errorf("--export-json: %v, verdict %v exit %d", err, r.Verdict, r.ExitCode())
			}
		})
	}
}

func equalCounts(a, b junitCounts) bool {
	return a.Tests == b.Tests && a.Failures == b.Failures && a.Errors == b.Errors && a.Suites == b.Suites &&
		a.SuiteSkipped == b.SuiteSkipped && a.Passed == b.Passed && a.Failed == b.Failed && a.Err == b.Err &&
		a.Skips == b.Skips && strings.Join(a.ErrorTypes, ",") == strings.Join(b.ErrorTypes, ",")
}

// A suite's result goes the same way: --export-json is the suite document.
func TestASuiteWritesEveryOutput(t *testing.T) {
	tc := newTestCLI(t)
	s := report.NewSuiteResult("small", testResult(report.Pass).Started)
	s.Checks = []*report.SuiteCheck{{Name: "a", Command: "miotool find", Expect: report.Pass,
		Runs: []report.SuiteRun{{Host: "h", Iteration: 1, Order: 1, Verdict: report.Pass}}}}
	tc.checkRun = func() (*Outcome, error) { return Suite(s), nil }
	dir := t.TempDir()
	junit, js := filepath.Join(dir, "s.xml"), filepath.Join(dir, "s.json")
	if code := tc.run("check", "--junit", junit, "--export-json", js, "--format", "markdown"); code != 0 {
		t.Fatalf("exit %d: %s", code, tc.errOut)
	}
	if !strings.Contains(tc.out.String(), "#### Testing Checklist") {
		t.Errorf("stdout is not the Markdown checklist:\n%s", tc.out)
	}
	if got := readJUnit(t, readFile(t, junit)); got.Tests != 1 || got.Passed != 1 {
		t.Errorf("JUnit %+v", got)
	}
	back, err := report.ReadSuiteJSON(bytes.NewReader(readFile(t, js)))
	if err != nil || back.Suite != "small" || back.ExitCode() != 0 {
		t.Errorf("--export-json: %v %+v", err, back)
	}
}

// Each output flag replaces a file that is there: its bytes are the new
// result's, its permissions stay; a symlink stays a symlink to the file it
// names, and a file with another hard link is rewritten where it is.
func TestOutputFlagsReplaceWhatWasThere(t *testing.T) {
	for _, flag := range []string{"--junit", "--export-markdown", "--export-json"} {
		t.Run(flag, func(t *testing.T) {
			dir := t.TempDir()
			plain := filepath.Join(dir, "plain")
			real := filepath.Join(dir, "real")
			link := filepath.Join(dir, "link")
			linked, other := filepath.Join(dir, "linked"), filepath.Join(dir, "other-link")
			for _, p := range []string{plain, real, linked} {
				if err := os.WriteFile(p, []byte("old content that is longer than nothing\n"), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("real", link); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(linked, other); err != nil {
				t.Fatal(err)
			}
			linkedBefore, _ := os.Stat(linked)
			for _, target := range []string{plain, link, linked} {
				tc := newTestCLI(t)
				if code := tc.run("check", flag, target); code != 0 {
					t.Fatalf("%s %s: exit %d: %s", flag, target, code, tc.errOut)
				}
			}
			for _, p := range []string{plain, real, linked, other} {
				data := readFile(t, p)
				if bytes.Contains(data, []byte("old content")) || !bytes.Contains(data, []byte("check")) {
					t.Errorf("%s after %s: %q", p, flag, data)
				}
				if info, _ := os.Stat(p); info.Mode().Perm() != 0o640 {
					t.Errorf("%s: mode %v, want 0640 kept", p, info.Mode().Perm())
				}
			}
			if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the symlink was replaced: %v %v", info.Mode(), err)
			}
			if after, _ := os.Stat(linked); !os.SameFile(linkedBefore, after) {
				t.Error("the hard-linked file was replaced by another")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 5 {
				t.Errorf("files left beside the outputs: %v", entries)
			}
		})
	}
}

// When one file cannot be written, no file is replaced, the result on
// stdout says ERROR with the reason, and the run exits 3: no file says
// PASS of a run that failed.
func TestAFileThatCannotBeWrittenLeavesEveryFileAsItWas(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	tc := newTestCLI(t)
	junit := filepath.Join(t.TempDir(), "c.xml")
	if err := os.WriteFile(junit, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := tc.run("check", "--junit", junit, "--export-json", "/dev/full", "--format", "json")
	if code != ExitToolFailure {
		t.Fatalf("exit %d, want 3: %s", code, tc.errOut)
	}
	if got := string(readFile(t, junit)); got != "old" {
		t.Errorf("--junit was replaced: %q", got)
	}
	if !strings.Contains(tc.errOut.String(), "--export-json /dev/full: no space left on device") {
		t.Errorf("stderr: %q", tc.errOut)
	}
	r, err := report.ReadJSON(tc.out)
	if err != nil || r.Verdict != report.Error || r.ExitCode() != 3 || !strings.Contains(r.Summary, "/dev/full") {
		t.Errorf("stdout: %v %+v", err, r)
	}
}

// A result says the status the process exits with, in every format and
// file: a run that returned PASS beside a usage error writes an ERROR
// result with exit_code 2, and says the error on stderr; a FAIL exits 1.
func TestAResultSaysTheExitStatus(t *testing.T) {
	for _, format := range report.Formats {
		t.Run(string(format), func(t *testing.T) {
			tc := newTestCLI(t)
			tc.checkRun = func() (*Outcome, error) {
				return Single(testResult(report.Pass)), UsageErrorf("MIOPEN_NAIVE_TIMEOUT=2.5: want a whole number")
			}
			js := filepath.Join(t.TempDir(), "c.json")
			if code := tc.run("check", "--format", string(format), "--export-json", js); code != ExitUsage {
				t.Fatalf("exit %d, want 2", code)
			}
			if out := tc.out.String(); strings.Contains(out, "check: PASS") || strings.Contains(out, `"verdict": "PASS"`) || !strings.Contains(out, "ERROR") {
				t.Errorf("stdout does not say ERROR:\n%s", out)
			}
			r, err := report.ReadJSON(bytes.NewReader(readFile(t, js)))
			if err != nil || r.Verdict != report.Error || r.ExitCode() != ExitUsage || r.Summary != "MIOPEN_NAIVE_TIMEOUT=2.5: want a whole number" {
				t.Errorf("--export-json: %v %+v", err, r)
			}
			if !strings.Contains(tc.errOut.String(), "miotool: MIOPEN_NAIVE_TIMEOUT=2.5: want a whole number") {
				t.Errorf("stderr: %q", tc.errOut)
			}
		})
	}
	tc := newTestCLI(t)
	tc.checkRun = func() (*Outcome, error) { return Single(testResult(report.Fail)), nil }
	if code := tc.run("check", "--format", "json"); code != ExitCheckFailed {
		t.Errorf("a FAIL result: exit %d, want 1", code)
	}
}

// A suite run that failed beside its result is written as an ERROR with
// the cause, exit 3: what ran is kept, and nothing reads green.
func TestASuiteThatFailedIsWrittenAsAnError(t *testing.T) {
	tc := newTestCLI(t)
	s := report.NewSuiteResult("small", testResult(report.Pass).Started)
	s.Checks = []*report.SuiteCheck{{Name: "a", Command: "miotool find", Expect: report.Pass,
		Runs: []report.SuiteRun{{Host: "h", Iteration: 1, Order: 1, Verdict: report.Pass}}}}
	tc.checkRun = func() (*Outcome, error) { return Suite(s), errors.New("the runner broke") }
	js := filepath.Join(t.TempDir(), "s.json")
	if code := tc.run("check", "--export-json", js); code != ExitToolFailure {
		t.Fatalf("exit %d", code)
	}
	back, err := report.ReadSuiteJSON(bytes.NewReader(readFile(t, js)))
	if err != nil || back.Verdict() != report.Error || back.ExitCode() != ExitToolFailure || !strings.Contains(back.Summary(), "the runner broke") {
		t.Errorf("--export-json: %v %+v", err, back)
	}
	if !strings.Contains(tc.errOut.String(), "miotool: the runner broke") {
		t.Errorf("stderr: %q", tc.errOut)
	}
}

// failingWriter fails every write as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}
}

// A write to stdout that fails is exit 3, said once on stderr, whatever
// wrote it; the files named by flags are written all the same.
func TestAFailedStdoutWriteIsAToolFailure(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"result", []string{"check"}},
		{"help", []string{"--help"}},
		{"command help", []string{"help", "check"}},
		{"result and file", []string{"check", "--junit", "JUNIT"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCLI(t)
			tc.f.IOStreams.Out = failingWriter{}
			junit := filepath.Join(t.TempDir(), "c.xml")
			args := append([]string{}, tt.args...)
			for i := range args {
				if args[i] == "JUNIT" {
					args[i] = junit
				}
			}
			if code := tc.run(args...); code != ExitToolFailure {
				t.Fatalf("exit %d, want 3", code)
			}
			if got := tc.errOut.String(); got != "miotool: writing to standard output: no space left on device\n" {
				t.Errorf("stderr %q", got)
			}
			if strings.Contains(strings.Join(tt.args, " "), "JUNIT") {
				if got := readJUnit(t, readFile(t, junit)); got.Passed != 1 {
					t.Errorf("the JUnit file: %+v", got)
				}
			}
		})
	}
}

// An output that is one of the command's inputs, or another output, is
// refused before the command runs, whichever way the path is spelt.
func TestAnOutputThatIsAnInputIsRefused(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "suite.yaml")
	if err := os.WriteFile(input, []byte("suite: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("suite.yaml", filepath.Join(dir, "alias.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "miotool.yaml")
	if err := os.WriteFile(config, []byte("format: text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.xml")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"the input flag", []string{"check", "--read", input, "--junit", input}, "--junit " + input + ": is the file " + input + " --read names"},
		{"a second input", []string{"check", "--read", config, "--read", input, "--export-json", input}, "is the file"},
		{"through a symlink", []string{"check", "--read", input, "--export-markdown", filepath.Join(dir, "alias.yaml")}, "is the file"},
		{"spelt another way", []string{"check", "--read", input, "--junit", filepath.Join(dir, "sub", "..", "suite.yaml")}, "is the file"},
		{"an argument", []string{"merge", config, input, "--junit", input}, "the argument names"},
		{"the config file", []string{"check", "--config", config, "--export-json", config}, "the config file names"},
		{"two outputs, not there yet", []string{"check", "--junit", fresh, "--export-json", filepath.Join(dir, "sub", "..", "fresh.xml")}, "name the same file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCLI(t)
			ran := false
			tc.checkRun = func() (*Outcome, error) { ran = true; return Single(testResult(report.Pass)), nil }
			if code := tc.run(tt.args...); code != ExitUsage || ran {
				t.Fatalf("exit %d, ran %v; want 2 before the command runs: %s", code, ran, tc.errOut)
			}
			if !strings.Contains(tc.errOut.String(), tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, tc.errOut)
			}
		})
	}
	if got := string(readFile(t, input)); got != "suite: x\n" {
		t.Errorf("the input changed: %q", got)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("a refused output was written")
	}
	// A file beside the input is fine.
	tc := newTestCLI(t)
	if code := tc.run("check", "--read", input, "--junit", fresh); code != 0 {
		t.Errorf("exit %d: %s", code, tc.errOut)
	}
}

// The result files are named on the command line only: a config file that
// names one is refused, and a MIOTOOL_* variable writes nothing.
func TestResultFilesComeFromTheCommandLineOnly(t *testing.T) {
	tc := newTestCLI(t)
	out := filepath.Join(tc.home, "work", "c.xml")
	tc.writeFile(t, "work/miotool.yaml", "check:\n  junit: "+out+"\n")
	if code := tc.run("check"); code != ExitUsage {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(tc.errOut.String(), "check.junit: the files a run writes are named on the command line only") {
		t.Errorf("stderr: %q", tc.errOut)
	}
	tc = newTestCLI(t)
	tc.f.LookupEnv = envOf(map[string]string{"MIOTOOL_CHECK_JUNIT": out})
	if code := tc.run("check"); code != 0 {
		t.Fatalf("exit %d: %s", code, tc.errOut)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("MIOTOOL_CHECK_JUNIT wrote a file")
	}
}

// The JSON of a result and of a suite carries the status a signal gives,
// which the verdict alone does not: 143 for SIGTERM.
func TestExitStatusInTheJSON(t *testing.T) {
	r := testResult(report.Interrupted)
	resultDocument{r}.interrupt(&Interruption{Signal: syscall.SIGTERM})
	var got struct {
		ExitCode int `json:"exit_code"`
	}
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || got.ExitCode != 143 {
		t.Errorf("result JSON exit_code %d: %v", got.ExitCode, err)
	}
	back, err := report.ReadJSON(&buf)
	if err != nil || back.ExitCode() != 143 {
		t.Errorf("read back: %v, exit %d", err, back.ExitCode())
	}
}
