package suite

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"miotool/internal/report"
	"miotool/internal/testutil"
)

// miotoolFlags are the spellings the command layer gives the loader
// (internal/cmd/report's TestSuiteSpellings holds them to miotool's
// command tree).
var miotoolFlags = Spellings{
	Reserved:      []string{"--format", "--junit", "--export-markdown", "--export-json", "--no-progress"},
	GlobalValue:   []string{"--backend", "--device", "--format", "--config"},
	NoResult:      []string{"-h", "--help", "--version"},
	Writes:        []string{"--write-expect"},
	AllowPrograms: "--allow-programs",
	Library:       []string{"--observer"},
	Programs:      []string{"--against"},
	LoadingEnv:    []string{"MIOTOOL_TRACE_OBSERVER", "MIOTOOL_TRACE_CUPTI"},
}

func TestParseGoodFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "suites", "demo.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := `# a comment
title: "Demo (#1)"
workdir: ../root
timeout: 90s
env: {MIOPEN_NAIVE_TIMEOUT: "300"}
checks:
  - name: lazy
    command: miotool capture --mode=global --reclaim=lazy
    expect: fail
  - name: quoted
    command: ["find", "--problem", "my problem"]
    expect: PASS
    env:
      GPU_MAX_HW_QUEUES: 3
    timeout: 2m
  - name: later
    command: stress-threads --cache=unlocked --problem 'a b'
    expect: FAIL
    skip: needs stress-threads
`
	f, err := ParseWith(path, []byte(data), LoadOptions{Flags: miotoolFlags})
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "demo" || f.Title != "Demo (#1)" || f.Timeout != 90*time.Second || f.Workdir != filepath.Join(dir, "root") {
		t.Errorf("header: %+v", f)
	}
	if !slices.Equal(f.Env, []string{"MIOPEN_NAIVE_TIMEOUT=300"}) {
		t.Errorf("env %q", f.Env)
	}
	want := []Check{
		{Name: "lazy", Args: []string{"capture", "--mode=global", "--reclaim=lazy"}, Expect: report.Fail, Line: 7},
		{Name: "quoted", Args: []string{"find", "--problem", "my problem"}, Expect: report.Pass, Env: []string{"GPU_MAX_HW_QUEUES=3"}, Timeout: 2 * time.Minute, Line: 10},
		{Name: "later", Args: []string{"stress-threads", "--cache=unlocked", "--problem", "a b"}, Expect: report.Fail, Skip: "needs stress-threads", Line: 16},
	}
	if len(f.Checks) != len(want) {
		t.Fatalf("%d checks, want %d", len(f.Checks), len(want))
	}
	for i, w := range want {
		g := f.Checks[i]
		if g.Name != w.Name || !slices.Equal(g.Args, w.Args) || g.Expect != w.Expect || !slices.Equal(g.Env, w.Env) ||
			g.Timeout != w.Timeout || g.Skip != w.Skip || g.Line != w.Line {
			t.Errorf("check %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	const path = "suites/bad.yaml"
	cases := []struct {
		name string
		data string
		line int
		want string
	}{
		{"unknown suite key", "titel: x\nchecks: []\n", 1, `unknown key "titel" (did you mean title?)`},
		{"unknown check key", "checks:\n  - name: a\n    comand: find\n    expect: PASS\n", 3, `check "a": unknown key "comand" (did you mean command?)`},
		{"bad expected verdict", "checks:\n  - name: a\n    command: find\n    expect: MAYBE\n", 4, `check "a": expect: "MAYBE" is not a verdict`},
		{"ERROR is not an expectation", "checks:\n  - name: a\n    command: find\n    expect: error\n", 4, `want PASS, FAIL or SKIP`},
		{"missing command", "checks:\n  - name: a\n    expect: PASS\n", 2, `check "a": no command`},
		{"missing expect", "checks:\n  - name: a\n    command: find\n", 2, `check "a": no expect`},
		{"missing name", "checks:\n  - command: find\n    expect: PASS\n", 2, `a check has no name`},
		{"empty command", "checks:\n  - name: a\n    command: miotool\n    expect: PASS\n", 3, `command is empty`},
		{"output flag", "checks:\n  - name: a\n    command: find --format=markdown\n    expect: PASS\n", 3, `command sets --format`},
		{"recursive report", "checks:\n  - name: a\n    command: miotool report --suite x.yaml\n    expect: PASS\n", 3, "cannot run `miotool report`"},
		{"unbalanced quote", "checks:\n  - name: a\n    command: find --problem 'x\n    expect: PASS\n", 3, `unterminated single quote`},
		{"duplicate name", "checks:\n  - name: a\n    command: find\n    expect: PASS\n  - name: a\n    command: find\n    expect: FAIL\n", 5, `the name is used already on line 2`},
		{"duplicate key", "checks:\n  - name: a\n    command: find\n    command: rules\n    expect: PASS\n", 4, `command is given twice (first on line 3)`},
		{"bad timeout", "timeout: soon\nchecks:\n  - name: a\n    command: find\n    expect: PASS\n", 1, `timeout: "soon" is not a positive duration`},
		{"negative check timeout", "checks:\n  - name: a\n    command: find\n    expect: PASS\n    timeout: -5s\n", 5, `check "a": timeout`},
		{"bad env name", "checks:\n  - name: a\n    command: find\n    expect: PASS\n    env: {\"1X\": y}\n", 5, `"1X" is not a variable name`},
		{"no checks", "title: x\n", 1, `no checks`},
		{"empty checks", "checks: []\n", 1, `want a list of checks`},
		{"check not a mapping", "checks:\n  - find\n", 2, `a check must be a mapping`},
		{"yaml syntax", "checks:\n  - name: a\n    command: find\n    expect: [PASS\n", 3, `did not find expected ',' or ']'`},
		{"missing workdir", "workdir: nowhere\nchecks:\n  - name: a\n    command: find\n    expect: PASS\n", 1, `workdir suites/nowhere`},
		{"empty skip reason", "checks:\n  - name: a\n    command: find\n    expect: PASS\n    skip: \"\"\n", 5, `give the reason`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWith(path, []byte(tc.data), LoadOptions{Flags: miotoolFlags})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if se.File != path || se.Line != tc.line {
				t.Errorf("at %s:%d, want %s:%d (%v)", se.File, se.Line, path, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("err = %q, want it to start with %s: and contain %q", err, path, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("err spans lines: %q", err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := LoadWith(filepath.Join(t.TempDir(), "none.yaml"), LoadOptions{Flags: miotoolFlags})
	if err == nil || !strings.HasSuffix(err.Error(), "none.yaml: no such file or directory") {
		t.Errorf("err = %v", err)
	}
}

// The shipped suites parse, and state the verdicts the fixes promise.
func TestShippedSuites(t *testing.T) {
	root := moduleRoot(t)
	want := map[string]map[string]report.Verdict{
		"pr12265": {
			"capture-matrix": report.Pass, "capture-global-lazy": report.Fail, "capture-global-worker": report.Pass,
			"replay-guarded": report.Fail, "replay-worker": report.Pass, "find-naive-timeout": report.Pass, "rules-sim-vs-h200": report.Pass,
			"capture-global-poller": report.Pass, "replay-poller": report.Pass,
		},
		"rocm27477": {"stress-unlocked": report.Fail, "stress-locked": report.Pass, "stress-lockfree": report.Pass},
	}
	for name, checks := range want {
		f, err := LoadWith(filepath.Join(root, "configs", "suites", name+".yaml"), LoadOptions{Flags: miotoolFlags})
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != name || f.Title == "" || f.Workdir != root {
			t.Errorf("%s: name %q title %q workdir %q (want the module root)", name, f.Name, f.Title, f.Workdir)
		}
		got := map[string]report.Verdict{}
		for _, c := range f.Checks {
			got[c.Name] = c.Expect
		}
		for check, v := range checks {
			if got[check] != v {
				t.Errorf("%s: %s expects %q, want %s", name, check, got[check], v)
			}
		}
		if len(got) != len(checks) {
			t.Errorf("%s: checks %v", name, got)
		}
		for _, c := range f.Checks {
			if c.Name == "rules-sim-vs-h200" {
				exp := c.Args[slices.Index(c.Args, "--expect")+1]
				if _, err := os.Stat(filepath.Join(f.Workdir, exp)); err != nil {
					t.Errorf("rules-sim-vs-h200: expectation file: %v", err)
				}
			}
		}
	}
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	return testutil.ModuleRoot(t)
}

func TestParseVariant(t *testing.T) {
	v, err := ParseVariant("GPU_MAX_HW_QUEUES=3,MIOPEN_NAIVE_TIMEOUT=0")
	if err != nil || v.Label != "GPU_MAX_HW_QUEUES=3 MIOPEN_NAIVE_TIMEOUT=0" || len(v.Env) != 2 {
		t.Errorf("ParseVariant: %+v, %v", v, err)
	}
	for _, bad := range []string{"GPU_MAX_HW_QUEUES", "=3", "A=1,", "9X=1"} {
		if _, err := ParseVariant(bad); err == nil {
			t.Errorf("ParseVariant(%q) err = %v", bad, err)
		}
	}
}

func TestParseVariants(t *testing.T) {
	vs, err := ParseVariants([]string{"A=1", "", "B=2,C=3"})
	if err != nil || len(vs) != 2 || vs[0].Label != "A=1" || vs[1].Label != "B=2 C=3" {
		t.Errorf("ParseVariants: %+v, %v (an empty value is no variant; the others keep their order)", vs, err)
	}
	if vs, err := ParseVariants([]string{"A=1", "=3"}); err == nil || vs != nil {
		t.Errorf("ParseVariants with a bad value: %+v, %v; want an error and no variants", vs, err)
	}
}

func TestPlanIsDeterministic(t *testing.T) {
	f := &File{}
	for i := range 8 {
		f.Checks = append(f.Checks, Check{Name: string(rune('a' + i))})
	}
	f.Checks[5].Skip = "not here"
	order := func(steps []Step) string {
		var b strings.Builder
		for _, s := range steps {
			b.WriteString(f.Checks[s.Check].Name)
		}
		return b.String()
	}
	plain := Plan(f, 2, 3, false, 0)
	if got := order(plain); got != strings.Repeat("abcdegh", 6) {
		t.Errorf("unshuffled order %s", got)
	}
	a, b := Plan(f, 2, 3, true, 42), Plan(f, 2, 3, true, 42)
	if order(a) != order(b) {
		t.Errorf("the same seed gave %s and %s", order(a), order(b))
	}
	if c := Plan(f, 2, 3, true, 43); order(c) == order(a) {
		t.Errorf("seeds 42 and 43 gave the same order %s", order(a))
	}
	// Each pass is a permutation of the runnable checks, and passes differ.
	passes := map[string]bool{}
	for p := range 6 {
		chunk := a[p*7 : (p+1)*7]
		if chunk[0].Variant != p/3 || chunk[0].Iteration != p%3+1 {
			t.Errorf("pass %d is variant %d iteration %d", p, chunk[0].Variant, chunk[0].Iteration)
		}
		names := []byte(order(chunk))
		passes[string(names)] = true
		slices.Sort(names)
		if string(names) != "abcdegh" {
			t.Errorf("pass %d runs %s", p, names)
		}
	}
	if len(passes) < 2 {
		t.Error("every pass has the same shuffled order")
	}
}
