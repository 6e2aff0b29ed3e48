package report

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
)

// suiteFile writes a suite result as `report --suite --format json` would,
// with the given checks, and returns its path.
func suiteFile(t *testing.T, dir, name string, s *report.SuiteResult) string {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteSuiteJSON(&buf, s); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// passedSuite is one host's suite run whose one check passed.
func passedSuite(host string) *report.SuiteResult {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := report.NewSuiteResult("small", start)
	s.Hosts = []string{host}
	s.Checks = []*report.SuiteCheck{{Name: "rules-match", Command: "miotool rules", Expect: report.Pass,
		Runs: []report.SuiteRun{{Host: host, Iteration: 1, Order: 1, Verdict: report.Pass, Started: start, Duration: time.Second,
			Device: report.Device{Name: "miotool simulated device (cuda rules)", Arch: "sim"}}}}}
	return s
}

// `miotool report merge`, run as the built binary: a result that ran
// nothing and a suite run given twice are usage errors (exit 2) naming the
// file, never a PASS and never runs counted twice.
func TestReportMergeRefusesEmptyAndRepeatedRuns(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	a := suiteFile(t, dir, "hostA.json", passedSuite("hostA"))
	b := suiteFile(t, dir, "hostB.json", passedSuite("hostB"))
	copyOfA := filepath.Join(dir, "copy-of-hostA.json")
	data, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyOfA, data, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := suiteFile(t, dir, "empty.json", report.NewSuiteResult("small", time.Now()))
	skipped := passedSuite("hostC")
	skipped.Checks[0].Runs, skipped.Checks[0].Skip = nil, "needs a GPU"
	allSkipped := suiteFile(t, dir, "all-skipped.json", skipped)
	// Numbers miotool cannot have written, and a verdict its exit code
	// contradicts.
	edited := func(name, old, replacement string) string {
		data, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(old)) {
			t.Fatalf("%s lacks %q", a, old)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Replace(data, []byte(old), []byte(replacement), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := edited("huge.json", `"duration_ms": 1000`, `"duration_ms": 1e308`)
	contradicts := edited("contradicts.json", `"exit_code": 0,
          "met"`, `"exit_code": 1,
          "met"`)
	shard := func(name string, index int) string {
		s := passedSuite(name)
		s.Shard = &report.Shard{Index: index, Count: 3, Split: report.ShardChecks}
		s.Checks[0].Shard = index
		return suiteFile(t, dir, name+".json", s)
	}
	shard1, shard3, shard1Again := shard("shard1", 1), shard("shard3", 3), shard("shard1-again", 1)

	var extraEnv []string
	merge := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, append([]string{"report", "merge", "--format", "json"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append([]string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "PATH=" + os.Getenv("PATH")}, extraEnv...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running %s: %v", bin, err)
		}
		return code, out.String(), errOut.String()
	}

	// Two distinct runs merge: one row, both runs, PASS.
	code, out, errOut := merge(a, b)
	if code != 0 {
		t.Fatalf("merging two hosts: exit %d\n%s", code, errOut)
	}
	merged, err := report.ReadSuiteJSON(strings.NewReader(out))
	if err != nil || len(merged.Checks) != 1 || len(merged.Checks[0].Runs) != 2 || merged.Verdict() != report.Pass || len(merged.MergedRuns) != 2 {
		t.Fatalf("merged %+v, %v", merged, err)
	}
	mergedFile := filepath.Join(dir, "merged.json")
	if err := os.WriteFile(mergedFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"the same file twice", []string{a, a}, []string{"hostA.json holds twice the same suite run", "count its runs twice"}},
		{"a copy of a file", []string{a, copyOfA}, []string{"hostA.json and " + copyOfA + " hold the same suite run"}},
		{"a merged result and one of its inputs", []string{mergedFile, b}, []string{"merged.json and " + b + " hold the same suite run"}},
		{"a result with no checks", []string{empty}, []string{empty + ": the suite result has no checks"}},
		{"a result with no checks beside a good one", []string{a, empty}, []string{empty + ": the suite result has no checks"}},
		{"a result whose checks were all skipped", []string{allSkipped}, []string{allSkipped + ": no check of the suite result ran"}},
		{"a duration out of range", []string{huge, b}, []string{huge + ": reading suite result: check 1 (rules-match) run 1: duration_ms: 1e+308 is out of range"}},
		{"a verdict its exit code contradicts", []string{contradicts, b}, []string{contradicts + ": reading suite result: check 1 (rules-match) run 1: exit_code: 1 contradicts the verdict PASS"}},
		{"a shard missing", []string{shard1, shard3},
			[]string{"shard 2/3 of small (checks) is missing (given: 1/3 " + shard1 + ", 3/3 " + shard3 + "); give every shard, or take what is there with --allow-missing-shards\n"}},
		{"a shard twice", []string{shard1, shard1Again, shard3}, []string{shard1 + " and " + shard1Again + " are both shard 1/3 of small (checks)"}},
		{"a shard twice, missing shards allowed", []string{"--allow-missing-shards", shard1, shard1Again}, []string{shard1 + " and " + shard1Again + " are both shard 1/3 of small (checks)"}},
	} {
		code, out, errOut := merge(tc.files...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", tc.name, code, out, errOut)
			continue
		}
		if out != "" {
			t.Errorf("%s: a refused merge wrote a result:\n%s", tc.name, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, errOut)
			}
		}
	}

	// Only the command line takes what is there: a variable set once for
	// every merge does not.
	extraEnv = []string{cli.EnvName("report.merge.allow-missing-shards") + "=true"}
	if code, _, errOut := merge(shard1, shard3); code != 2 || !strings.Contains(errOut, "shard 2/3 of small (checks) is missing") {
		t.Errorf("shard 2/3 missing, allowed by %s: exit %d, want 2\n%s", extraEnv[0], code, errOut)
	}
	extraEnv = nil

	// Told to take what is there, the merge names the missing shard and
	// is an ERROR, never a PASS.
	code, out, errOut = merge("--allow-missing-shards", shard1, shard3)
	if code != report.Error.ExitCode() {
		t.Fatalf("shard 2/3 missing, allowed: exit %d, want %d\n%s", code, report.Error.ExitCode(), errOut)
	}
	partial, err := report.ReadSuiteJSON(strings.NewReader(out))
	if err != nil || len(partial.MissingShards) != 1 || partial.MissingShards[0].String() != "2/3" || partial.Verdict() != report.Error ||
		!strings.Contains(partial.Summary(), "shard 2/3 of small (checks) not merged") {
		t.Errorf("shard 2/3 missing, allowed: %+v, %v\n%s", partial, err, out)
	}
}

// A merge with an interrupted input exits as an interrupted run does (130)
// and says why on stderr, since the merge itself was not interrupted.
func TestReportMergeSaysWhyItExitsAsInterrupted(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	stopped := passedSuite("hostB")
	stopped.Interrupted = "interrupted by SIGINT"
	a, b := suiteFile(t, dir, "hostA.json", passedSuite("hostA")), suiteFile(t, dir, "hostB.json", stopped)
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute, "report", "merge", a, b)
	if r.Code != report.ExitInterrupted ||
		!strings.Contains(r.Stderr, "merge: an input was interrupted ("+b+": interrupted by SIGINT): the merged result is INTERRUPTED and holds what finished") ||
		!strings.Contains(r.Stdout, "INTERRUPTED - "+b+": interrupted by SIGINT before the suite finished") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
}
