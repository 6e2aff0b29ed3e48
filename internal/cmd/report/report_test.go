package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	"miotool/internal/testutil"
)

// tree is a command tree with the report command.
var tree = withRun(nil)

// withRun is a command tree whose report command hands its options to runF.
func withRun(runF func(*cli.Factory, *ReportOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command {
		var run func(*ReportOptions) error
		if runF != nil {
			run = func(o *ReportOptions) error { return runF(f, o) }
		}
		return cli.AddOutputFlags(f, NewCmdReport(f, run))
	})
}

// withBinary points the report at bin and gives its checks an environment
// of their own, so no check writes into the user's config directory.
func withBinary(bin, home string) func(*cli.Factory, *ReportOptions) error {
	return func(f *cli.Factory, o *ReportOptions) error {
		o.Executable = func() (string, error) { return bin, nil }
		o.Environ = func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}
		}
		return f.Finish(o.Run(f.Context))
	}
}

func writeSuiteFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The report command against the real binary: statuses, exit codes, the
// JUnit file, and JSON results of two hosts merged into one table. The
// checks are rules probes of a few cells on the simulator: quick, and the
// same verdict every time.
func TestReportSuiteEndToEnd(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	h200 := filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml")
	changed := cmdtest.ExpectationWithOneChange(t, dir)
	probe := "miotool rules --action malloc --spin 10ms --expect "
	good := writeSuiteFile(t, dir, "good.yaml", `suite: small
title: A small suite on the simulator
checks:
  - name: rules-differ
    command: `+probe+changed+`
    expect: FAIL
  - name: rules-match
    command: `+probe+h200+`
    expect: PASS
  - name: later
    command: miotool stress-threads --runs 1
    expect: PASS
    skip: not in this test
`)
	bad := writeSuiteFile(t, dir, "bad.yaml", `checks:
  - name: rules-match
    command: `+probe+h200+`
    expect: PASS
  - name: typo
    command: miotool rules --bogus
    expect: PASS
`)

	t.Run("every check as expected: exit 0", func(t *testing.T) {
		h := cmdtest.New(t)
		junit := filepath.Join(dir, "good.xml")
		code := h.Run(withRun(withBinary(bin, dir)), "report", "--suite", good, "--backend", "sim", "--format", "markdown",
			"--junit", junit, "--env", "GPU_MAX_HW_QUEUES=3", "--host", "hostA")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, h.Out, h.ErrOut)
		}
		for _, re := range []string{
			`(?m)^### Suite small: PASS$`,
			`(?m)^\| rules-differ +\| \x60miotool rules --action malloc --spin 10ms --expect \S+changed.yaml --backend sim\x60 +\| Fails as expected \(17/18\) +\|$`,
			`(?m)^\| rules-match \[GPU_MAX_HW_QUEUES=3\] +\| \x60GPU_MAX_HW_QUEUES=3 miotool rules --action malloc .*\| Passed \(18/18\) +\|$`,
			`(?m)^\| later +\| .*\| Not run \(not in this test\) +\|$`,
			`- \*\*Hosts:\*\* hostA`,
			// Every check ran on one device: the header names it once.
			`- \*\*Devices:\*\* miotool simulated device \(cuda rules\) \(sim\)`,
		} {
			if !regexp.MustCompile(re).MatchString(h.Out.String()) {
				t.Errorf("output lacks %s:\n%s", re, h.Out)
			}
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Suites   []struct {
				Skipped int `xml:"skipped,attr"`
			} `xml:"testsuite"`
		}
		err = xml.Unmarshal(data, &doc)
		skipped := 0
		for _, s := range doc.Suites {
			skipped += s.Skipped
		}
		if err != nil || doc.Tests != 6 || doc.Failures != 0 || skipped != 2 {
			t.Errorf("JUnit %+v, %v:\n%s", doc, err, data)
		}
	})

	t.Run("one check not as expected: exit 1", func(t *testing.T) {
		h := cmdtest.New(t)
		code := h.Run(withRun(withBinary(bin, dir)), "report", "--suite", bad, "--backend", "sim")
		if code != 1 {
			t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, h.Out, h.ErrOut)
		}
		out := h.Out.String()
		if !strings.Contains(out, "Unexpected (expected PASS): ERROR") || !strings.Contains(out, "unknown flag: --bogus") {
			t.Errorf("the failing check is not shown with its reason:\n%s", out)
		}
		if h.ErrOut.Len() != 0 {
			t.Errorf("stderr %q: the table already says what failed", h.ErrOut)
		}
	})

	t.Run("merge two hosts", func(t *testing.T) {
		var files []string
		for _, host := range []string{"hostA", "hostB"} {
			h := cmdtest.New(t)
			if code := h.Run(withRun(withBinary(bin, dir)), "report", "--suite", good, "--backend", "sim", "--format", "json", "--host", host); code != 0 {
				t.Fatalf("%s: exit %d: %s", host, code, h.ErrOut)
			}
			p := filepath.Join(dir, host+".json")
			if err := os.WriteFile(p, h.Out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, p)
		}
		h := cmdtest.New(t)
		if code := h.Run(tree, append([]string{"report", "merge", "--format", "markdown"}, files...)...); code != 0 {
			t.Fatalf("merge: exit %d: %s", code, h.ErrOut)
		}
		row := regexp.MustCompile(`(?m)^\| rules-match +\| .* \| miotool simulated device \(cuda rules\) \(sim\) on hostA, miotool simulated device \(cuda rules\) \(sim\) on hostB +\| Passed \(18/18\), 2/2 runs +\|$`)
		if !row.MatchString(h.Out.String()) || !strings.Contains(h.Out.String(), "- **Hosts:** hostA, hostB") {
			t.Errorf("merged table:\n%s", h.Out)
		}
		// A failing host makes the merge exit 1.
		failing := filepath.Join(dir, "failing.json")
		hb := cmdtest.New(t)
		hb.Run(withRun(withBinary(bin, dir)), "report", "--suite", bad, "--backend", "sim", "--format", "json", "--host", "hostC")
		if err := os.WriteFile(failing, hb.Out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		h = cmdtest.New(t)
		if code := h.Run(tree, "report", "merge", files[0], failing); code != 1 {
			t.Errorf("merge with a failing host: exit %d, want 1\n%s%s", code, h.Out, h.ErrOut)
		}
	})
}

func TestReportUsageErrors(t *testing.T) {
	dir := t.TempDir()
	badSuite := writeSuiteFile(t, dir, "bad.yaml", "checks:\n  - name: a\n    command: find\n    expect: MAYBE\n")
	goodSuite := writeSuiteFile(t, dir, "good.yaml", "checks:\n  - name: a\n    command: find\n    expect: PASS\n")
	resultFile := writeSuiteFile(t, dir, "result.json", `{"schema":"miotool/result/v1","verdict":"PASS"}`)
	badResult := writeSuiteFile(t, dir, "bad-result.json", `{"schema":"miotool/result/v1","verdict":"MAYBE"}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "give a suite file with --suite FILE"},
		{[]string{"report", "--suite", badSuite}, badSuite + `:4: check "a": expect: "MAYBE" is not a verdict`},
		{[]string{"report", "--suite", filepath.Join(dir, "none.yaml")}, "none.yaml: no such file or directory"},
		{[]string{"report", "--suite", goodSuite, "--repeat", "0"}, "--repeat 0: want 1 or more"},
		{[]string{"report", "--suite", goodSuite, "--seed", "5"}, "--seed 5: the seed orders --shuffle"},
		{[]string{"report", "--suite", goodSuite, "--cpu-load", "-1"}, "--cpu-load -1"},
		{[]string{"report", "--suite", goodSuite, "--cpu-load", "20000"}, "--cpu-load 20000: want at most"},
		{[]string{"report", "--suite", goodSuite, "--junit", filepath.Join(dir, "no-such-folder", "out.xml")}, "no-such-folder does not exist"},
		{[]string{"report", "--suite", goodSuite, "--junit", dir}, "is a folder"},
		{[]string{"report", "merge", resultFile, "--junit", filepath.Join(dir, "no-such-folder", "out.xml")}, "no-such-folder does not exist"},
		{[]string{"report", "--suite", goodSuite, "--env", "GPU_MAX_HW_QUEUES"}, `--env "GPU_MAX_HW_QUEUES": want KEY=VALUE`},
		{[]string{"report", "merge"}, "requires at least 1 arg"},
		{[]string{"report", "merge", badResult}, "single check's result (miotool/result/v1): unknown verdict"},
		{[]string{"report", "merge", filepath.Join(dir, "none.json")}, "none.json: no such file or directory"},
		{[]string{"report", "mrege"}, `unknown command "mrege" for "miotool report"`},
	} {
		h := cmdtest.New(t)
		h.F.OpenDevice = nil // nothing here may open a device
		if code := h.Run(tree, tc.args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", tc.args, code, h.ErrOut)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(h.ErrOut.String(), "\n"), "\n")
		if !strings.Contains(lines[0], tc.want) || len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'miotool") {
			t.Errorf("%v: stderr is not one line containing %q plus a hint:\n%s", tc.args, tc.want, h.ErrOut)
		}
	}
}

func TestReportFlagsReachTheOptions(t *testing.T) {
	h := cmdtest.New(t)
	var got *ReportOptions
	junit := filepath.Join(t.TempDir(), "out.xml")
	code := h.Run(withRun(func(_ *cli.Factory, o *ReportOptions) error { got = o; return nil }),
		"report", "--suite", "s.yaml", "--repeat", "20", "--shuffle", "--seed", "7", "--cpu-load", "2",
		"--env", "GPU_MAX_HW_QUEUES=3", "--env", "A=1,B=2", "--junit", junit, "--timeout", "90s", "--host", "node7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	if got.SuiteFile != "s.yaml" || got.Repeat != 20 || !got.Shuffle || got.Seed != 7 || got.CPULoad != 2 ||
		got.IO.ResultFiles().JUnit != junit || got.Timeout != 90*time.Second || got.Host != "node7" {
		t.Errorf("options %+v", got)
	}
	var labels []string
	for _, v := range got.variants {
		labels = append(labels, v.Label)
	}
	if !slices.Equal(labels, []string{"GPU_MAX_HW_QUEUES=3", "A=1 B=2"}) {
		t.Errorf("variants %q", labels)
	}
}

func TestReportHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"report", "--help"}, {"report", "merge", "--help"}} {
		h := cmdtest.New(t)
		if code := h.Run(tree, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, h.ErrOut)
		}
		if !strings.Contains(h.Out.String(), "Examples:") {
			t.Errorf("%v: help has no Examples section:\n%s", args, h.Out)
		}
	}
}

// The suite result the report command writes reads back.
func TestReportJSONReadsBack(t *testing.T) {
	s := report.NewSuiteResult("x", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s.Checks = []*report.SuiteCheck{{Name: "a", Command: "miotool find", Expect: report.Pass,
		Runs: []report.SuiteRun{{Host: "h", Iteration: 1, Order: 1, Verdict: report.Pass}}}}
	ios, _, out, _ := cli.Test()
	f := cli.NewFactory(ios, buildinfo.Info{})
	f.Global.Format = report.JSON
	if err := f.Finish(cli.Suite(s), nil); err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadSuiteJSON(out)
	if err != nil || back.Suite != "x" || len(back.Checks) != 1 || back.ExitCode() != 0 {
		t.Errorf("read back %+v, %v", back, err)
	}
}

// --cpu-load is bounded by the machine's cores, and --junit is checked
// before anything runs: runF, which stands for the suite, is never reached.
func TestReportRefusesBeforeTheSuiteRuns(t *testing.T) {
	dir := t.TempDir()
	readOnly := filepath.Join(dir, "read-only")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		want   string
		asRoot bool // still refused when running as root
	}{
		{"load past 4 per core", []string{"--cpu-load", "9"}, "--cpu-load 9: want at most 8 busy workers (4 per CPU core, 2 cores here)", true},
		{"junit folder missing", []string{"--junit", filepath.Join(dir, "nope", "r.xml")}, "does not exist", true},
		{"junit is a folder", []string{"--junit", dir}, "is a folder", true},
		{"junit folder read-only", []string{"--junit", filepath.Join(readOnly, "r.xml")}, "cannot be written", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.asRoot && os.Geteuid() == 0 {
				t.Skip("root writes into a read-only folder")
			}
			h := cmdtest.New(t)
			h.F.NumCPU = func() int { return 2 }
			ran := false
			code := cli.Main(h.F, append([]string{"report", "--suite", "s.yaml"}, tc.args...), func(f *cli.Factory) *cobra.Command {
				root := cli.NewRootCmd(f)
				report := NewCmdReport(f, func(*ReportOptions) error { ran = true; return nil })
				root.AddCommand(cli.AddOutputFlags(f, report))
				return root
			})
			if code != 2 || ran {
				t.Fatalf("exit %d, suite ran %v; want exit 2 before the suite\n%s", code, ran, h.ErrOut)
			}
			if !strings.Contains(h.ErrOut.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, h.ErrOut)
			}
		})
	}
	// At the bound, the load is accepted.
	h := cmdtest.New(t)
	h.F.NumCPU = func() int { return 2 }
	junit := filepath.Join(dir, "r.xml")
	if code := h.Run(withRun(func(*cli.Factory, *ReportOptions) error { return nil }), "report", "--suite", "s.yaml", "--cpu-load", "8", "--junit", junit); code != 0 {
		t.Errorf("--cpu-load 8 on 2 cores: exit %d: %s", code, h.ErrOut)
	}
	if _, err := os.Stat(junit); err == nil {
		t.Errorf("the check left %s behind", junit)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the check left files in %s: %v", dir, entries)
	}
}
