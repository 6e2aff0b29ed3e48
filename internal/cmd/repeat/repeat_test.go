package repeat

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/repeat/repeattest"
	"miotool/internal/report"
	"miotool/internal/testutil"
)

func TestMain(m *testing.M) {
	// The runs' crash handler (the trace observer) is built into the user
	// cache folder: a folder of these tests' own, removed after them.
	cache, err := os.MkdirTemp("", "miotool-repeat-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	repeattest.Remove()
	os.RemoveAll(cache)
	os.Exit(code)
}

// tree is a command tree with repeat; runF, when set, replaces its run.
func tree(runF func(*RepeatOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return cli.AddOutputFlags(f, NewCmdRepeat(f, runF)) })
}

// ran is one in-process run of the command.
type ran struct {
	code           int
	stdout, stderr string
}

// runRepeat runs miotool with args in a harness, in dir, with env as its
// MIOTOOL_* and shard variables.
func runRepeat(t *testing.T, dir string, env map[string]string, args ...string) ran {
	t.Helper()
	h := cmdtest.New(t)
	h.Dir = dir
	h.F.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	done := make(chan int, 1)
	go func() { done <- h.Run(tree(nil), args...) }()
	select {
	case code := <-done:
		return ran{code, h.Out.String(), h.ErrOut.String()}
	case <-time.After(repeattest.Limit):
		t.Fatalf("%v: still running after %v", args, repeattest.Limit)
	}
	return ran{}
}

// resultOf is the JSON result a run wrote.
func resultOf(t *testing.T, out string) *report.Result {
	t.Helper()
	r, err := report.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, out)
	}
	return r
}

func counter(t *testing.T, r *report.Result, name string) int64 {
	t.Helper()
	v, ok := r.Counter(name)
	if !ok {
		t.Fatalf("no counter %q in %v", name, r.Counters)
	}
	return v
}

func TestOptions(t *testing.T) {
	var got *RepeatOptions
	capture := tree(func(o *RepeatOptions) error { got = o; return nil })
	for _, c := range []struct {
		args       []string
		env        map[string]string
		program    string
		progArgs   []string
		confidence float64
		devices    []string
		shard      shard
		env2       []string
		label      string
	}{
		{[]string{"repeat", "--", "true"}, nil, "true", nil, 0.95, nil, shard{}, nil, soloLabel},
		{[]string{"repeat", "--runs", "3", "--confidence", "99%", "--devices", "0,1,GPU-4a2b", "--shard", "2/3", "--env", "A=1,B=2", "--env", "C=3",
			"--", "sh", "-c", "exit 0", "--runs", "9"}, nil, "sh", []string{"-c", "exit 0", "--runs", "9"}, 0.99, []string{"0", "1", "GPU-4a2b"},
			shard{2, 3, "--shard"}, []string{"A=1", "B=2", "C=3"}, soloLabel},
		{[]string{"repeat", "--runs", "8", "--confidence", "0.9", "--", "true"}, map[string]string{"SHARD_INDEX": "4", "TOTAL_SHARDS": "4"},
			"true", nil, 0.9, nil, shard{4, 4, "SHARD_INDEX/TOTAL_SHARDS"}, nil, soloLabel},
		// The flag wins over the variables.
		{[]string{"repeat", "--runs", "8", "--shard", "1/2", "--against", "false", "--", "true"}, map[string]string{"SHARD_INDEX": "4", "TOTAL_SHARDS": "4"},
			"true", nil, 0.95, nil, shard{1, 2, "--shard"}, nil, fixedLabel},
	} {
		h := cmdtest.New(t)
		h.F.LookupEnv = func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		if code := h.Run(capture, c.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, h.ErrOut)
		}
		if got.Program != c.program || !slices.Equal(got.Args, c.progArgs) || got.confidence != c.confidence ||
			!slices.Equal(got.devices, c.devices) || got.shard != c.shard || !slices.Equal(got.env, c.env2) || got.Label != c.label {
			t.Errorf("%v: program %q %q, confidence %v, devices %q, shard %+v, env %q, label %q", c.args, got.Program, got.Args,
				got.confidence, got.devices, got.shard, got.env, got.Label)
		}
	}
}

func TestShardShare(t *testing.T) {
	// 10 runs in 3 shards: 4, 3, 3, numbered 0-3, 4-6, 7-9.
	for _, c := range []struct{ index, n, first int }{{1, 4, 0}, {2, 3, 4}, {3, 3, 7}} {
		n, first := shard{Index: c.index, Count: 3}.Share(10)
		if n != c.n || first != c.first {
			t.Errorf("shard %d/3 of 10: %d runs from %d, want %d from %d", c.index, n, first, c.n, c.first)
		}
	}
	total := 0
	for i := 1; i <= 7; i++ {
		n, first := shard{Index: i, Count: 7}.Share(220)
		if first != total {
			t.Errorf("shard %d/7 starts at %d, want %d", i, first, total)
		}
		total += n
	}
	if total != 220 {
		t.Errorf("7 shards hold %d runs of 220", total)
	}
}

// TestUsageErrors: each is exit 2, one line and the hint, before any run.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	notRepeat := filepath.Join(dir, "trace.json")
	writeResult(t, notRepeat, report.New("trace", "miotool trace -- x", time.Now()))
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"repeat"}, nil, "no program to repeat"},
		{[]string{"repeat", "true"}, nil, "put -- before the program"},
		{[]string{"repeat", "--"}, nil, "no program after --"},
		{[]string{"repeat", "--gtest_filter=x", "--", "true"}, nil, "the program's own flags go after --"},
		{[]string{"repeat", "--runs", "0", "--", "true"}, nil, "--runs 0"},
		{[]string{"repeat", "--jobs", "0", "--", "true"}, nil, "--jobs 0"},
		{[]string{"repeat", "--timeout", "-1s", "--", "true"}, nil, "--timeout -1s"},
		{[]string{"repeat", "--confidence", "100", "--", "true"}, nil, "want 50 to 99.999 percent"},
		{[]string{"repeat", "--confidence", "ninety", "--", "true"}, nil, "--confidence ninety"},
		{[]string{"repeat", "--devices", "0,,1", "--", "true"}, nil, "an empty device"},
		{[]string{"repeat", "--devices", "0,0", "--", "true"}, nil, "listed twice"},
		{[]string{"repeat", "--shard", "3/2", "--", "true"}, nil, "want 1 <= I <= N"},
		{[]string{"repeat", "--shard", "0/2", "--", "true"}, nil, "want 1 <= I <= N"},
		{[]string{"repeat", "--shard", "half", "--", "true"}, nil, "want I/N"},
		{[]string{"repeat", "--runs", "3", "--shard", "1/4", "--", "true"}, nil, "would leave some with no run"},
		{[]string{"repeat", "--", "true"}, map[string]string{"SHARD_INDEX": "1"}, "set both"},
		{[]string{"repeat", "--", "true"}, map[string]string{"SHARD_INDEX": "x", "TOTAL_SHARDS": "2"}, "SHARD_INDEX/TOTAL_SHARDS x/2"},
		{[]string{"repeat", "--cpu-load", "-1", "--", "true"}, nil, "--cpu-load -1"},
		{[]string{"repeat", "--env", "NOEQUALS", "--", "true"}, nil, "--env"},
		{[]string{"repeat", "--against", "true", "--baseline", notRepeat, "--", "true"}, nil, "give the unfixed build once"},
		{[]string{"repeat", "--against", "'unclosed", "--", "true"}, nil, "--against"},
		{[]string{"repeat", "--against", "no-such-program-here", "--", "true"}, nil, "not found in $PATH"},
		{[]string{"repeat", "--", "no-such-program-here"}, nil, "not found in $PATH"},
		{[]string{"repeat", "--", dir}, nil, "is a directory"},
		{[]string{"repeat", "--baseline", filepath.Join(dir, "missing.json"), "--", "true"}, nil, "no such file"},
		{[]string{"repeat", "--baseline", notRepeat, "--", "true"}, nil, "a result of miotool trace, not of miotool repeat"},
		{[]string{"repeat", "--label", " ", "--", "true"}, nil, "--label"},
	} {
		r := runRepeat(t, dir, c.env, c.args...)
		first := strings.SplitN(r.stderr, "\n", 2)[0]
		if r.code != 2 || !strings.Contains(first, c.want) || !strings.Contains(r.stderr, "Run 'miotool repeat --help' for usage.") || r.stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 with %q", c.args, r.code, r.stderr, r.stdout, c.want)
		}
	}
}

func writeResult(t *testing.T, path string, r *report.Result) {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDoneWhen is the done-when: a program that crashed 3 times in
// 220 runs before the fix and never after says the improvement is not yet
// shown (p = 0.124), names the runs that would show it, and exits 1.
func TestDoneWhen(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	before := filepath.Join(dir, "before.json")
	r := runRepeat(t, dir, nil, "repeat", "--runs", "220", "--jobs", "4", "--label", "Unpatched", "--export-json", before, "--format", "markdown",
		"--", k.Flaky, "at:17,80a,150")
	if r.code != 1 || !strings.Contains(r.stdout, "| Unpatched | 220 runs | 3 crashes — 2× SIGSEGV, 1× SIGABRT |") {
		t.Fatalf("before: exit %d, stdout:\n%s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	junit := filepath.Join(dir, "after.xml")
	r = runRepeat(t, dir, nil, "repeat", "--runs", "220", "--jobs", "4", "--baseline", before, "--format", "json", "--junit", junit,
		"--", k.Flaky, "pass")
	res := resultOf(t, r.stdout)
	if r.code != 1 || res.Verdict != report.Fail || res.ExitCode() != 1 {
		t.Fatalf("after: exit %d, verdict %s (exit_code %d): want FAIL, 1; stderr %s", r.code, res.Verdict, res.ExitCode(), r.stderr)
	}
	for _, want := range []string{"improvement not yet shown at 95% confidence", "0 of 220 runs failed, against 3 of 220 unpatched",
		"p = 0.124", "about 340 runs per build would show it half the time", "about 490 four times in five"} {
		if !strings.Contains(res.Summary, want) {
			t.Errorf("summary %q lacks %q", res.Summary, want)
		}
	}
	if !strings.HasPrefix(res.ChecklistStatus(), "Failed (1/1 comparison failed): not shown: Patched 0 of 220, Unpatched 3 of 220 (p = 0.124)") {
		t.Errorf("status %q", res.ChecklistStatus())
	}
	if counter(t, res, "unpatched runs") != 220 || counter(t, res, "unpatched not passed") != 3 || counter(t, res, "runs") != 220 {
		t.Errorf("counters %v", res.Counters)
	}
	cmp := table(t, res, "Patched against Unpatched")
	if cell(cmp, "shown at 95% confidence") != "no: p > 0.05" || cell(cmp, "runs per build that would show it half the time") != "about 340 (343)" {
		t.Errorf("comparison table %+v", cmp.Rows)
	}
	// The seed's rows: the unfixed build first, in its own words.
	runs := table(t, res, "Runs")
	if got := runs.Rows[0].Cells[:3]; !slices.Equal(got, []string{"Unpatched", "220 runs", "3 crashes — 2× SIGSEGV, 1× SIGABRT"}) {
		t.Errorf("first row %q", got)
	}
	if got := runs.Rows[1].Cells; got[0] != "Patched" || got[6] != "below 1.35%" {
		t.Errorf("second row %q", got)
	}
	// JUnit says failure, never success, for an improvement not shown.
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	testutil.ValidateJUnit(t, data)
	var suites struct {
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &suites); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("improvement not yet shown")) || (suites.Failures == 0 && (len(suites.Suites) == 0 || suites.Suites[0].Failures == 0)) {
		t.Errorf("JUnit does not fail the case with its reason:\n%s", data)
	}
}

func table(t *testing.T, r *report.Result, prefix string) *report.Table {
	t.Helper()
	for _, tb := range r.Tables {
		if strings.HasPrefix(tb.Title, prefix) {
			return tb
		}
	}
	t.Fatalf("no table %q among %d", prefix, len(r.Tables))
	return nil
}

func cell(tb *report.Table, key string) string {
	for _, row := range tb.Rows {
		if row.Cells[0] == key {
			return row.Cells[1]
		}
	}
	return ""
}

func TestVerdicts(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		verdict report.Verdict
		summary string
		status  string
	}{
		{"every run passed: PASS with its bound", []string{"--runs", "220", "--jobs", "4", "--", k.Flaky, "pass"}, 0, report.Pass,
			"0 of 220 runs failed: below 1.35% at 95% confidence", "Passed (220/220 runs): 0 crashes"},
		{"a run failed: FAIL with its interval", []string{"--runs", "220", "--jobs", "4", "--", k.Flaky, "at:17,80a,150"}, 1, report.Fail,
			"3 of 220 runs failed (1.36%, 95% interval 0.28%–3.93%): 3 crashes — 2× SIGSEGV, 1× SIGABRT", "Failed (3/220 runs failed): 3 crashes — 2× SIGSEGV, 1× SIGABRT"},
		{"an exit status and a hang", []string{"--runs", "6", "--timeout", "5s", "--", k.Flaky, "at:2h"}, 1, report.Fail,
			"1 of 6 runs failed", "1 hung"},
		{"the fix shown against the unfixed build run beside it", []string{"--runs", "10", "--jobs", "2", "--against", k.Flaky + " segv 1000", "--", k.Flaky, "pass"},
			0, report.Pass, "improvement shown at 95% confidence: 0 of 10 runs failed, against 10 of 10 unpatched", "Passed (1/1 comparison): Patched 0 of 10, Unpatched 10 of 10"},
		{"fails as often as the unfixed build", []string{"--runs", "6", "--against", k.Flaky + " segv 1000", "--", k.Flaky, "segv", "1000"},
			1, report.Fail, "no improvement: 6 of 6 runs failed, against 6 of 6 unpatched", "Failed (1/1 comparison failed): Patched 6 of 6"},
		{"the unfixed build never failed", []string{"--runs", "6", "--against", k.Flaky + " pass", "--", k.Flaky, "pass"},
			1, report.Fail, "nothing to show an improvement over: the unpatched build never failed (0 of 6 runs)", "Failed ("},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runRepeat(t, dir, nil, append([]string{"repeat", "--format", "json"}, c.args...)...)
			res := resultOf(t, r.stdout)
			if r.code != c.code || res.Verdict != c.verdict || res.ExitCode() != c.code {
				t.Errorf("exit %d, verdict %s, exit_code %d; want %d, %s", r.code, res.Verdict, res.ExitCode(), c.code, c.verdict)
			}
			if !strings.Contains(res.Summary, c.summary) || !strings.Contains(res.ChecklistStatus(), c.status) {
				t.Errorf("summary %q, status %q; want %q and %q", res.Summary, res.ChecklistStatus(), c.summary, c.status)
			}
		})
	}
}

func TestAgainstInterleaves(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	// Runs 3 and 4 of each build crash: interleaved, each build has its
	// own runs 0 to 7 and its own crashes.
	r := runRepeat(t, dir, nil, "repeat", "--format", "json", "--runs", "8", "--jobs", "2",
		"--against", "env FLAKY_BUILD=old "+k.Flaky+" at:3,4", "--", k.Flaky, "at:4")
	res := resultOf(t, r.stdout)
	if counter(t, res, "runs") != 8 || counter(t, res, "crashed") != 1 || counter(t, res, "unpatched runs") != 8 || counter(t, res, "unpatched crashed") != 2 {
		t.Fatalf("counters %v", res.Counters)
	}
	groups := table(t, res, "Runs that did not pass")
	if len(groups.Rows) != 2 || groups.Rows[0].Cells[0] != "Unpatched" || !strings.HasPrefix(groups.Rows[0].Cells[4], "runs 3 to 4") ||
		groups.Rows[1].Cells[0] != "Patched" || !strings.HasPrefix(groups.Rows[1].Cells[4], "run 4") {
		t.Errorf("groups %+v", groups.Rows)
	}
	if cell(table(t, res, "Setup"), "against") != "env FLAKY_BUILD=old "+k.Flaky+" at:3,4" {
		t.Errorf("setup %+v", table(t, res, "Setup").Rows)
	}
}

func TestDevicesAndEnv(t *testing.T) {
	dir := t.TempDir()
	// Each run checks what it sees: one device, the same to CUDA and HIP,
	// and the --env variables.
	script := `test -n "$CUDA_VISIBLE_DEVICES" && test "$CUDA_VISIBLE_DEVICES" = "$HIP_VISIBLE_DEVICES" && test "$A" = 1 && test "$B" = 2 && test -n "$MIOTOOL_REPEAT_RUN"`
	r := runRepeat(t, dir, nil, "repeat", "--format", "json", "--runs", "8", "--jobs", "2", "--devices", "0,1,2,3", "--env", "A=1,B=2",
		"--", "sh", "-c", script)
	res := resultOf(t, r.stdout)
	if r.code != 0 || res.Verdict != report.Pass {
		t.Fatalf("exit %d, %s: %s\n%s", r.code, res.Verdict, res.Summary, r.stderr)
	}
	dev := table(t, res, "Runs by device")
	if len(dev.Rows) != 4 {
		t.Fatalf("device rows %+v", dev.Rows)
	}
	// Two at a time over four devices: each run goes to a device with
	// nothing running, the one used least; every device gets runs.
	total := 0
	for i, row := range dev.Rows {
		n, _ := strconv.Atoi(row.Cells[2])
		total += n
		if row.Cells[0] != []string{"0", "1", "2", "3"}[i] || n < 1 {
			t.Errorf("device row %q: want runs on device %d", row.Cells, i)
		}
	}
	if total != 8 {
		t.Errorf("%d runs by device, want 8", total)
	}
	if res.Device.Name != "GPUs 0,1,2,3" {
		t.Errorf("device %+v", res.Device)
	}
	// Without --env the same runs fail: the check above checks something.
	r = runRepeat(t, dir, nil, "repeat", "--format", "json", "--runs", "2", "--devices", "0", "--", "sh", "-c", script)
	if r.code != 1 {
		t.Errorf("without --env: exit %d, want 1", r.code)
	}
}

func TestShardRunsItsPart(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	// 10 runs in 3 shards: shard 2 makes runs 4 to 6, and of 4, 5 and 9
	// only 4 and 5 are its own.
	r := runRepeat(t, dir, nil, "repeat", "--format", "json", "--runs", "10", "--shard", "2/3", "--", k.Flaky, "at:4,5,9")
	res := resultOf(t, r.stdout)
	if counter(t, res, "runs") != 3 || counter(t, res, "crashed") != 2 {
		t.Errorf("shard 2/3: counters %v", res.Counters)
	}
	if !strings.HasPrefix(res.Summary, "shard 2/3: ") || !strings.HasSuffix(res.ChecklistStatus(), "(shard 2/3)") || cell(table(t, res, "Setup"), "shard") != "2/3" ||
		res.Shard == nil || *res.Shard != (report.Shard{Index: 2, Count: 3, Split: report.ShardRuns}) {
		t.Errorf("summary %q, status %q, shard %+v: the result does not name its shard", res.Summary, res.ChecklistStatus(), res.Shard)
	}
	// From the variables a CI sets.
	r = runRepeat(t, dir, map[string]string{"SHARD_INDEX": "3", "TOTAL_SHARDS": "3"}, "repeat", "--format", "json", "--runs", "10", "--", k.Flaky, "at:4,5,9")
	res = resultOf(t, r.stdout)
	if counter(t, res, "runs") != 3 || counter(t, res, "crashed") != 1 || !strings.Contains(cell(table(t, res, "Setup"), "runs of the shard"), "7 to 9 of 10 (from SHARD_INDEX/TOTAL_SHARDS)") {
		t.Errorf("shard 3/3 from the variables: counters %v, setup %+v", res.Counters, table(t, res, "Setup").Rows)
	}
}

func TestBaselines(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	before := filepath.Join(dir, "before.json")
	// One command line, two builds told apart by their environment.
	if r := runRepeat(t, dir, nil, "repeat", "--runs", "20", "--env", "FLAKY_AT=1 2 3 4 5 6", "--export-json", before, "--", k.Flaky, "at:env"); r.code != 1 {
		t.Fatalf("baseline run: exit %d: %s", r.code, r.stderr)
	}
	// rewrite writes a copy of the baseline, changed by edit.
	rewrite := func(name string, edit func(r *report.Result)) string {
		r := resultOf(t, mustRead(t, before))
		edit(r)
		p := filepath.Join(dir, name)
		writeResult(t, p, r)
		return p
	}
	setRow := func(r *report.Result, key, value string) {
		for _, tb := range r.Tables {
			if tb.Title != setupTitle {
				continue
			}
			for i, row := range tb.Rows {
				if row.Cells[0] == key {
					tb.Rows[i].Cells[1] = value
					return
				}
			}
			tb.AddRow(key, value)
		}
	}
	otherVersion := rewrite("version.json", func(r *report.Result) { setRow(r, settingVersion, "0.9.0 (commit 0ld)") })
	otherProgram := rewrite("program.json", func(r *report.Result) { setRow(r, settingProgram, "/usr/bin/python3 t.py") })
	viaEnv := rewrite("env.json", func(r *report.Result) { setRow(r, settingProgram, "env LD_LIBRARY_PATH=/opt/old "+k.Flaky+" at:env") })
	compared := rewrite("against.json", func(r *report.Result) { setRow(r, settingAgainst, "old-build") })
	interrupted := rewrite("interrupted.json", func(r *report.Result) { r.Verdict = report.Interrupted })
	noSetup := rewrite("nosetup.json", func(r *report.Result) { r.Tables = nil })
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		code       int
		want       string // in stderr for refusals, in the notes for flags
	}{
		{"the same program and version: compared, nothing flagged", before, 0, ""},
		{"another miotool version: flagged", otherVersion, 0, "the baseline was run by miotool 0.9.0 (commit 0ld), this run by 1.2.3 (commit c0ffee)"},
		{"the same program behind env: flagged", viaEnv, 0, "the baseline ran `env LD_LIBRARY_PATH=/opt/old"},
		{"an interrupted baseline: flagged", interrupted, 0, "the baseline was interrupted: its counts are its 20 finished runs"},
		{"another program: refused", otherProgram, 2, "it ran another program, python3"},
		{"a comparison of two builds: refused", compared, 2, "a comparison of two builds itself"},
		{"no setup table: refused", noSetup, 2, "without its setup table"},
		{"not JSON: refused", garbage, 2, "not a miotool result"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runRepeat(t, dir, nil, "repeat", "--format", "json", "--runs", "20", "--baseline", c.file, "--", k.Flaky, "at:env")
			if r.code != c.code {
				t.Fatalf("exit %d, want %d: %s", r.code, c.code, r.stderr)
			}
			if c.code == 2 {
				if !strings.Contains(r.stderr, c.want) || r.stdout != "" {
					t.Errorf("stderr %q, stdout %q: want the refusal %q", r.stderr, r.stdout, c.want)
				}
				return
			}
			res := resultOf(t, r.stdout)
			notes := strings.Join(res.Notes, "\n")
			if c.want == "" {
				if strings.Contains(notes, "the baseline") {
					t.Errorf("notes flag the baseline: %s", notes)
				}
			} else if !strings.Contains(notes, c.want) {
				t.Errorf("notes %s\nlack %q", notes, c.want)
			}
			// 6 of 20 against 0 of 20: p = 0.01, shown.
			if res.Verdict != report.Pass || !strings.Contains(res.Summary, "improvement shown") {
				t.Errorf("verdict %s: %s", res.Verdict, res.Summary)
			}
			row := table(t, res, "Runs").Rows[0]
			if row.Cells[0] != "Unpatched" || row.Cells[2] != "6 crashes — 6× SIGSEGV" || (c.want != "" && row.Flag == "") {
				t.Errorf("the baseline's row %+v", row)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestOutputsSayTheSameVerdict(t *testing.T) {
	k := repeattest.Shared(t)
	dir := t.TempDir()
	md, js, xmlFile := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	r := runRepeat(t, dir, nil, "repeat", "--runs", "12", "--export-markdown", md, "--export-json", js, "--junit", xmlFile, "--", k.Flaky, "at:3")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "repeat: FAIL - 1 of 12 runs failed") {
		t.Fatalf("exit %d, stdout %s", r.code, r.stdout)
	}
	checklist := mustRead(t, md)
	checklist = checklist[strings.Index(checklist, "#### Testing Checklist"):]
	if !strings.Contains(checklist, "`miotool repeat --runs 12 -- "+k.Flaky+" at:3`") || !strings.Contains(checklist, "| Failed (1/12 runs failed): 1 crash — 1× SIGSEGV |") {
		t.Errorf("markdown checklist:\n%s", mustRead(t, md))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(mustRead(t, js)), &doc); err != nil || doc["verdict"] != "FAIL" || doc["exit_code"] != float64(1) {
		t.Errorf("json verdict %v exit_code %v (%v)", doc["verdict"], doc["exit_code"], err)
	}
	data := []byte(mustRead(t, xmlFile))
	testutil.ValidateJUnit(t, data)
	if !bytes.Contains(data, []byte("<failure")) {
		t.Errorf("junit has no failure:\n%s", data)
	}
}

// With the crash handler in every run, runs that crashed are grouped by
// where they crashed: the function of the program that faulted or
// aborted, not libc's frames.
func TestCrashesGroupedByTheirFrames(t *testing.T) {
	k := repeattest.Shared(t)
	r := runRepeat(t, t.TempDir(), nil, "repeat", "--format", "json", "--runs", "12", "--jobs", "2", "--", k.Flaky, "mixed")
	res := resultOf(t, r.stdout)
	var where []string
	for _, tab := range res.Tables {
		if !strings.HasPrefix(tab.Title, "Runs that did not pass") {
			continue
		}
		col := slices.Index(tab.Columns, "Where")
		for _, row := range tab.Rows {
			where = append(where, row.Cells[col])
		}
	}
	joined := strings.Join(where, "\n")
	if len(where) != 2 || !strings.Contains(joined, "model_cache_predict") || !strings.Contains(joined, "model_cache_insert") {
		t.Errorf("groups by where:\n%s\n%s", joined, r.stderr)
	}
}
