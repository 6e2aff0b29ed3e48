package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/hip"
	"miotool/internal/report"
)

// probeOptions is what the test command saw after configuration.
type probeOptions struct {
	global GlobalOptions
	level  string
	ran    bool
}

// testCLI is a root command with one subcommand, "probe", that has a local
// flag --level and records what it saw. runE, when set, is its body.
type testCLI struct {
	f      *Factory
	out    *bytes.Buffer
	errOut *bytes.Buffer
	seen   probeOptions
	runE   func() error
	// checkRun is the run of "check" and "merge", which have the output
	// flags; without it they render a PASS result.
	checkRun func() (*Outcome, error)
	// afterFinish, when set, runs once the runner has written the result.
	afterFinish func()
	// home is a temporary directory used as working directory and user
	// config dir, so no real configuration leaks into the tests.
	home string
}

func newTestCLI(t *testing.T) *testCLI {
	t.Helper()
	ios, _, out, errOut := Test()
	tc := &testCLI{out: out, errOut: errOut, home: t.TempDir()}
	tc.f = NewFactory(ios, buildinfo.Info{Version: "test", Commit: "abc"})
	tc.f.Getwd = func() (string, error) { return filepath.Join(tc.home, "work"), nil }
	tc.f.UserConfigDir = func() (string, error) { return filepath.Join(tc.home, "config"), nil }
	tc.f.LookupEnv = func(string) (string, bool) { return "", false }
	for _, d := range []string{"work", "config/miotool"} {
		if err := os.MkdirAll(filepath.Join(tc.home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tc
}

func (tc *testCLI) newRoot(f *Factory) *cobra.Command {
	root := NewRootCmd(f)
	var level string
	probe := &cobra.Command{
		Use:     "probe",
		Example: "  miotool probe --level 3",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tc.seen = probeOptions{global: f.Global, level: level, ran: true}
			if tc.runE != nil {
				return tc.runE()
			}
			return nil
		},
	}
	probe.Flags().StringVar(&level, "level", "low", "a local flag")
	pair := &cobra.Command{
		Use:       "pair a|b",
		Example:   "  miotool pair a",
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs: []string{"a", "b"},
		RunE:      func(*cobra.Command, []string) error { return nil },
	}
	var read []string
	check := &cobra.Command{
		Use:     "check",
		Example: "  miotool check --junit r.xml",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return tc.check(f) },
	}
	check.Flags().StringArrayVar(&read, "read", nil, "a file it reads")
	MarkInputFile(check, "read")
	stride := 1
	check.Flags().IntVarP(&stride, "conv_stride_w", "v", 1, "MIOpenDriver's horizontal stride")
	merge := &cobra.Command{
		Use:     "merge FILE...",
		Example: "  miotool merge a.json",
		Args:    cobra.ArbitraryArgs,
		RunE:    func(*cobra.Command, []string) error { return tc.check(f) },
	}
	MarkInputArgs(merge)
	root.AddCommand(probe, pair, AddOutputFlags(f, check), AddOutputFlags(f, merge))
	return root
}

// check is the body of "check" and "merge".
func (tc *testCLI) check(f *Factory) error {
	var err error
	if tc.checkRun != nil {
		err = f.Finish(tc.checkRun())
	} else {
		err = f.Finish(Single(testResult(report.Pass)), nil)
	}
	if tc.afterFinish != nil {
		tc.afterFinish()
	}
	return err
}

// testResult is a finished result with verdict v and a table.
func testResult(v report.Verdict) *report.Result {
	r := report.New("check", "miotool check", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r.AddTable("cases", "case", "measured").AddRow("one", string(v))
	r.Finish(v, "the case gave "+string(v), r.Started.Add(time.Second))
	return r
}

// envOf is a LookupEnv that sees only env.
func envOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func (tc *testCLI) run(args ...string) int {
	return Main(tc.f, args, tc.newRoot)
}

func (tc *testCLI) writeFile(t *testing.T, rel, text string) string {
	t.Helper()
	p := filepath.Join(tc.home, rel)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flag > MIOTOOL_* environment > config file > default, for a global key
// (format) and a command's own key (probe.level).
func TestConfigPrecedence(t *testing.T) {
	type source struct{ flag, env, file bool }
	cases := []struct {
		src       source
		wantFmt   report.Format
		wantLevel string
	}{
		{source{false, false, false}, report.Text, "low"},
		{source{false, false, true}, report.Markdown, "file"},
		{source{false, true, false}, report.JSON, "env"},
		{source{false, true, true}, report.JSON, "env"},
		{source{true, false, false}, report.Text, "flag"},
		{source{true, false, true}, report.Text, "flag"},
		{source{true, true, false}, report.Text, "flag"},
		{source{true, true, true}, report.Text, "flag"},
	}
	for _, c := range cases {
		name := fmt.Sprintf("flag=%v,env=%v,file=%v", c.src.flag, c.src.env, c.src.file)
		t.Run(name, func(t *testing.T) {
			tc := newTestCLI(t)
			args := []string{"probe"}
			if c.src.flag {
				args = append(args, "--format", "text", "--level", "flag")
			}
			if c.src.env {
				tc.f.LookupEnv = envOf(map[string]string{"MIOTOOL_FORMAT": "json", "MIOTOOL_PROBE_LEVEL": "env"})
			}
			if c.src.file {
				tc.writeFile(t, "work/miotool.yaml", "format: markdown\nprobe:\n  level: file\n")
			}
			if code := tc.run(args...); code != ExitOK {
				t.Fatalf("exit %d: %s", code, tc.errOut)
			}
			if tc.seen.global.Format != c.wantFmt || tc.seen.level != c.wantLevel {
				t.Errorf("format %q level %q, want %q %q", tc.seen.global.Format, tc.seen.level, c.wantFmt, c.wantLevel)
			}
		})
	}
}

func TestConfigFileDiscovery(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, tc *testCLI) []string // returns extra args
		want    string                                   // file used, relative to home; "" none
		wantLvl string
	}{
		{"none", func(*testing.T, *testCLI) []string { return nil }, "", "low"},
		{"user config dir", func(t *testing.T, tc *testCLI) []string {
			tc.writeFile(t, "config/miotool/miotool.yaml", "probe: {level: user}\n")
			return nil
		}, "config/miotool/miotool.yaml", "user"},
		{"working directory before user config dir", func(t *testing.T, tc *testCLI) []string {
			tc.writeFile(t, "config/miotool/miotool.yaml", "probe: {level: user}\n")
			tc.writeFile(t, "work/miotool.yaml", "probe: {level: cwd}\n")
			return nil
		}, "work/miotool.yaml", "cwd"},
		{"MIOTOOL_CONFIG before the default places", func(t *testing.T, tc *testCLI) []string {
			tc.writeFile(t, "work/miotool.yaml", "probe: {level: cwd}\n")
			p := tc.writeFile(t, "env.yaml", "probe: {level: envfile}\n")
			tc.f.LookupEnv = func(k string) (string, bool) {
				if k == EnvConfig {
					return p, true
				}
				return "", false
			}
			return nil
		}, "env.yaml", "envfile"},
		{"--config before everything", func(t *testing.T, tc *testCLI) []string {
			tc.writeFile(t, "work/miotool.yaml", "probe: {level: cwd}\n")
			p := tc.writeFile(t, "explicit.yaml", "probe: {level: explicit}\n")
			return []string{"--config", p}
		}, "explicit.yaml", "explicit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := newTestCLI(t)
			args := append([]string{"probe"}, c.setup(t, tc)...)
			if code := tc.run(args...); code != ExitOK {
				t.Fatalf("exit %d: %s", code, tc.errOut)
			}
			want := ""
			if c.want != "" {
				want = filepath.Join(tc.home, c.want)
			}
			if tc.f.ConfigUsed != want || tc.seen.level != c.wantLvl {
				t.Errorf("used %q level %q, want %q %q", tc.f.ConfigUsed, tc.seen.level, want, c.wantLvl)
			}
		})
	}
}

// Every configuration mistake is a usage error (2): one line naming the
// file (and line) or variable, plus the hint, and the command does not run.
func TestBadConfigurationIsAUsageError(t *testing.T) {
	cases := []struct {
		name  string
		file  string // written as work/miotool.yaml when set
		env   [2]string
		args  []string
		wants []string
	}{
		{name: "yaml syntax", file: "format: text\n\tprobe: x\n", wants: []string{"miotool.yaml", "yaml: line 2"}},
		{name: "unknown key", file: "format: text\nlevel: 3\n", wants: []string{"miotool.yaml", "line 2", `unknown key "level"`, "did you mean probe.level?"}},
		{name: "unknown key in a section", file: "probe:\n  depth: 2\n", wants: []string{"line 2", `unknown key "probe.depth"`}},
		{name: "section is a value", file: "probe: 3\n", wants: []string{"line 1", "probe must be a section"}},
		{name: "value a flag refuses", file: "device: 0\nformat: yaml\n", wants: []string{"miotool.yaml line 2", "format", `"yaml"`, "want text, markdown or json"}},
		{name: "wrong type", file: "device: one\n", wants: []string{"line 1", "device", `"one"`}},
		{name: "not a mapping", file: "- a\n- b\n", wants: []string{"must be a mapping"}},
		{name: "duplicate key", file: "format: text\nformat: json\n", wants: []string{"miotool.yaml", "already defined"}},
		{name: "missing explicit file", args: []string{"--config", "/nonexistent/miotool.yaml"}, wants: []string{"/nonexistent/miotool.yaml does not exist"}},
		{name: "environment value a flag refuses", env: [2]string{"MIOTOOL_BACKEND", "gpu"}, wants: []string{"environment MIOTOOL_BACKEND", `"gpu"`, "want auto, sim, cuda or hip"}},
		{name: "negative device", args: []string{"--device", "-2"}, wants: []string{"--device -2"}},
		{name: "negative device in the file", file: "format: text\ndevice: -3\n", wants: []string{"--device -3: want a device ordinal", "(from device: -3 in ", "miotool.yaml line 2)"}},
		{name: "negative device in the environment", env: [2]string{"MIOTOOL_DEVICE", "-4"}, wants: []string{"--device -4", "(from MIOTOOL_DEVICE=-4 in the environment)"}},
		{name: "typo in a section", file: "probe:\n  levle: 2\n", wants: []string{"line 2", `unknown key "probe.levle" (did you mean probe.level?)`}},
		{name: "typo at the top", file: "fromat: json\n", wants: []string{"line 1", `unknown key "fromat" (did you mean format?)`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := newTestCLI(t)
			if c.file != "" {
				tc.writeFile(t, "work/miotool.yaml", c.file)
			}
			if c.env[0] != "" {
				tc.f.LookupEnv = envOf(map[string]string{c.env[0]: c.env[1]})
			}
			code := tc.run(append([]string{"probe"}, c.args...)...)
			if code != ExitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", code, tc.errOut)
			}
			if tc.seen.ran {
				t.Error("the command ran despite the error")
			}
			lines := strings.Split(strings.TrimSuffix(tc.errOut.String(), "\n"), "\n")
			if len(lines) != 2 || lines[1] != "Run 'miotool probe --help' for usage." {
				t.Fatalf("stderr is not one line plus the hint: %q", tc.errOut)
			}
			for _, w := range c.wants {
				if !strings.Contains(lines[0], w) {
					t.Errorf("message %q lacks %q", lines[0], w)
				}
			}
			// A hint, not every key there is.
			if len(lines[0]) > 300 {
				t.Errorf("message is %d characters long: %q", len(lines[0]), lines[0])
			}
		})
	}
}

// A value refused after parsing (by a command's own checks) says where it
// came from when that was not the command line.
func TestRefusedValueNamesItsOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        [2]string
		args       []string
		want       string
	}{
		{name: "file", file: "format: text\nprobe:\n  level: -4\n", want: "--level -4: want low or high (from level: -4 in "},
		{name: "environment", env: [2]string{"MIOTOOL_PROBE_LEVEL", "-5"}, want: "--level -5: want low or high (from MIOTOOL_PROBE_LEVEL=-5 in the environment)"},
		{name: "command line", file: "probe:\n  level: low\n", args: []string{"--level", "-6"}, want: "--level -6: want low or high\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCLI(t)
			if tc.file != "" {
				c.writeFile(t, "work/miotool.yaml", tc.file)
			}
			if tc.env[0] != "" {
				c.f.LookupEnv = envOf(map[string]string{tc.env[0]: tc.env[1]})
			}
			c.runE = func() error { return UsageErrorf("--level %s: want low or high", c.seen.level) }
			code := Main(c.f, append([]string{"probe"}, tc.args...), func(f *Factory) *cobra.Command {
				root := c.newRoot(f)
				FinishTree(f, root)
				return root
			})
			if code != ExitUsage || !strings.Contains(c.errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, c.errOut, tc.want)
			}
			if tc.file != "" && tc.name == "file" && !strings.Contains(c.errOut.String(), "miotool.yaml line 3)") {
				t.Errorf("stderr %q does not name the line", c.errOut)
			}
		})
	}
}

func TestEmptyConfigFileIsFine(t *testing.T) {
	tc := newTestCLI(t)
	tc.writeFile(t, "work/miotool.yaml", "# nothing set\n")
	if code := tc.run("probe"); code != ExitOK || tc.seen.global.Format != report.Text {
		t.Fatalf("exit %d format %q: %s", code, tc.seen.global.Format, tc.errOut)
	}
}

func TestExitCodesAndMessages(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		runE      func() error
		code      int
		stderr    []string // lines, exactly
		stderrHas string
	}{
		{name: "success", args: []string{"probe"}, code: 0},
		{name: "unknown flag", args: []string{"probe", "--bogus"}, code: 2,
			stderr: []string{"miotool: unknown flag: --bogus", "Run 'miotool probe --help' for usage."}},
		{name: "bad enum value", args: []string{"probe", "--format", "yaml"}, code: 2,
			stderr: []string{`miotool: invalid argument "yaml" for "--format" flag: want text, markdown or json`, "Run 'miotool probe --help' for usage."}},
		{name: "unknown command with suggestion", args: []string{"prob"}, code: 2,
			stderr: []string{`miotool: unknown command "prob" for "miotool" (did you mean "probe"?)`, "Run 'miotool --help' for usage."}},
		{name: "extra argument", args: []string{"probe", "extra"}, code: 2,
			stderr: []string{`miotool: unknown command "extra" for "miotool probe"`, "Run 'miotool probe --help' for usage."}},
		{name: "usage error from the command", args: []string{"probe"}, runE: func() error { return UsageErrorf("--level: want low or high") }, code: 2,
			stderr: []string{"miotool: --level: want low or high", "Run 'miotool probe --help' for usage."}},
		{name: "check failed", args: []string{"probe"}, runE: func() error {
			return &ExitError{Code: ExitCheckFailed, Err: errors.New("shown in the result"), Silent: true}
		}, code: 1},
		{name: "tool failure", args: []string{"probe"}, runE: func() error { return errors.New("the disk is full") }, code: 3,
			stderr: []string{"miotool: the disk is full"}},
		{name: "plain error from a run func", args: []string{"probe"}, runE: func() error { return fmt.Errorf("wrapped: %w", errors.New("x")) }, code: 3,
			stderr: []string{"miotool: wrapped: x"}},
		{name: "missing argument", args: []string{"pair"}, code: 2,
			stderr: []string{"miotool: accepts 1 arg(s), received 0", "Run 'miotool pair --help' for usage."}},
		{name: "argument not accepted", args: []string{"pair", "c"}, code: 2,
			stderr: []string{`miotool: invalid argument "c" for "miotool pair"`, "Run 'miotool pair --help' for usage."}},
		{name: "too many arguments", args: []string{"pair", "a", "b"}, code: 2,
			stderr: []string{"miotool: accepts 1 arg(s), received 2", "Run 'miotool pair --help' for usage."}},
		{name: "skipped", args: []string{"probe"}, runE: func() error {
			return &ExitError{Code: ExitSkipped, Err: &hip.UnavailableError{Backend: "cuda", Reason: "libcuda.so.1 not found"}}
		}, code: 4, stderr: []string{"miotool: backend cuda unavailable: libcuda.so.1 not found"}},
		{name: "panic", args: []string{"probe"}, runE: func() error { panic("bug") }, code: 3, stderrHas: "miotool: internal error: bug"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc := newTestCLI(t)
			tc.runE = c.runE
			if code := tc.run(c.args...); code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, tc.errOut)
			}
			got := tc.errOut.String()
			if c.stderrHas != "" {
				if !strings.Contains(got, c.stderrHas) {
					t.Errorf("stderr %q lacks %q", got, c.stderrHas)
				}
				return
			}
			want := ""
			if len(c.stderr) > 0 {
				want = strings.Join(c.stderr, "\n") + "\n"
			}
			if got != want {
				t.Errorf("stderr\n%q\nwant\n%q", got, want)
			}
			if strings.Contains(got, "Usage:") || strings.Contains(got, "goroutine ") {
				t.Error("stderr holds usage text or a stack trace")
			}
		})
	}
}

// Main exits with the code ExitCodeOf gives for the error a command
// returned, whatever its kind.
func TestMainExitsWithExitCodeOf(t *testing.T) {
	for _, err := range []error{
		errors.New("plain"),
		fmt.Errorf("wrapped usage: %w", UsageErrorf("--level: no")),
		UsageError(errors.New("bad input")),
		&ExitError{Code: ExitSkipped, Err: errors.New("no device")},
		&ExitError{Code: ExitCheckFailed, Err: errors.New("shown"), Silent: true},
		errors.New(`unknown command "x" for "miotool"`),
	} {
		tc := newTestCLI(t)
		tc.runE = func() error { return err }
		if code, want := tc.run("probe"), ExitCodeOf(err); code != want {
			t.Errorf("%v: Main exited %d, ExitCodeOf says %d", err, code, want)
		}
	}
	if ExitCodeOf(nil) != ExitOK || ExitCodeOf(errors.New("x")) != ExitToolFailure {
		t.Errorf("ExitCodeOf(nil) %d, of a plain error %d", ExitCodeOf(nil), ExitCodeOf(errors.New("x")))
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"probe", "--help"}, {"help", "--help"}} {
		tc := newTestCLI(t)
		if code := tc.run(args...); code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !strings.Contains(tc.out.String(), "Examples:") {
			t.Errorf("%v: help lacks Examples:\n%s", args, tc.out)
		}
	}
}

// The runner computes the exit status from the verdict, and says SKIP and
// ERROR on stderr too, so that they are not lost when stdout is a file.
func TestTheRunnerMapsVerdictsToExitStatus(t *testing.T) {
	cases := []struct {
		v          report.Verdict
		code       int
		stderrLine bool
	}{
		{report.Pass, 0, false},
		{report.Fail, 1, false},
		{report.Error, 3, true},
		{report.Skip, 4, true},
		{report.Interrupted, 130, false},
	}
	for _, c := range cases {
		ios, _, out, _ := Test()
		f := NewFactory(ios, buildinfo.Info{})
		f.Global.Format = report.JSON
		r := report.New("x", "miotool x", time.Time{})
		r.Finish(c.v, "because", time.Time{})
		err := f.Finish(Single(r), nil)
		if got := ExitCodeOf(err); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.v, got, c.code)
		}
		var ee *ExitError
		if errors.As(err, &ee) && ee.Silent == c.stderrLine {
			t.Errorf("%s: silent %v", c.v, ee.Silent)
		}
		if _, err := report.ReadJSON(out); err != nil {
			t.Errorf("%s: output is not a result: %v", c.v, err)
		}
	}
}

func TestOpenVerdict(t *testing.T) {
	cases := []struct {
		err  error
		want report.Verdict
	}{
		{nil, report.Pass},
		{&hip.UnavailableError{Backend: "cuda", Reason: "x"}, report.Skip},
		{fmt.Errorf("open: %w", &hip.UnavailableError{Backend: "hip"}), report.Skip},
		{fmt.Errorf("%w %q", hip.ErrUnknownBackend, "hip"), report.Skip},
		{&hip.Error{Op: "DeviceGet", Code: hip.ErrInvalidDevice, Dialect: hip.DialectCUDA}, report.Skip},
		{&hip.Error{Op: "Init", Code: hip.ErrNotInitialized, Dialect: hip.DialectCUDA}, report.Error},
		{errors.New("something broke"), report.Error},
	}
	for _, c := range cases {
		if got := OpenVerdict(c.err); got != c.want {
			t.Errorf("OpenVerdict(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestCommandLineQuotes(t *testing.T) {
	f := NewFactory(System(), buildinfo.Info{})
	f.Args = []string{"rules", "--expect", "my file.yaml", "--action=malloc,free", "it's", ""}
	want := `miotool rules --expect 'my file.yaml' --action=malloc,free 'it'\''s' ''`
	if got := f.CommandLine(); got != want {
		t.Errorf("CommandLine() = %s, want %s", got, want)
	}
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	for _, c := range []struct {
		tty, off bool
		want     bool
	}{{false, false, false}, {true, true, false}, {true, false, true}} {
		ios, _, _, errOut := Test()
		ios.SetStderrTTY(c.tty)
		f := NewFactory(ios, buildinfo.Info{})
		f.Global.NoProgress = c.off
		update, done := f.Progress("cell")
		update(1, 2)
		done()
		if got := strings.Contains(errOut.String(), "cell 1/2"); got != c.want {
			t.Errorf("tty %v no-progress %v: progress shown %v", c.tty, c.off, got)
		}
	}
}

func TestEnumValue(t *testing.T) {
	var f report.Format
	v := NewEnumValue(&f, report.Text, report.Formats...)
	if f != report.Text {
		t.Fatalf("default not set: %q", f)
	}
	if err := v.Set("JSON"); err != nil || f != report.JSON {
		t.Errorf("Set(JSON): %v, %q", err, f)
	}
	if err := v.Set("yaml"); err == nil || err.Error() != "want text, markdown or json" {
		t.Errorf("Set(yaml) err = %v", err)
	}
	if f != report.JSON {
		t.Errorf("a refused value changed the flag to %q", f)
	}
}

func TestHelpWorksWithABrokenConfigFile(t *testing.T) {
	tc := newTestCLI(t)
	tc.writeFile(t, "work/miotool.yaml", "nonsense: [\n")
	if code := tc.run("help", "probe"); code != 0 {
		t.Fatalf("exit %d: %s", code, tc.errOut)
	}
	if !strings.Contains(tc.out.String(), "miotool probe --level 3") {
		t.Errorf("help output:\n%s", tc.out)
	}
	if code := tc.run("probe"); code != ExitUsage {
		t.Errorf("the command itself ran with a broken config: exit %d", code)
	}
}

func TestAtLeastOneNamesTheFirstCountBelowOne(t *testing.T) {
	if err := AtLeastOne(Count{"--a", 1}, Count{"--b", 3}); err != nil {
		t.Fatalf("all counts fine: %v", err)
	}
	err := AtLeastOne(Count{"--a", 2}, Count{"--b", 0}, Count{"--c", -1})
	if ExitCodeOf(err) != ExitUsage || err.Error() != "--b 0: want 1 or more" {
		t.Fatalf("%v (exit %d)", err, ExitCodeOf(err))
	}
}

// The output flags are the ones a checklist's Command column leaves out,
// the root defines those that are global, and a child's result arguments
// are output flags only.
func TestOutputFlagsAgreeWithTheChecklist(t *testing.T) {
	for _, fl := range OutputFlags {
		if got := report.ChecklistCommand("miotool rules " + fl + "=x --action malloc"); got != "miotool rules --action malloc" {
			t.Errorf("%s: the checklist keeps it: %q", fl, got)
		}
	}
	if got := report.ChecklistCommand("miotool find " + strings.Join(ResultArgs(), " ")); got != "miotool find" {
		t.Errorf("the result arguments are not all output flags: %q", got)
	}
	root := NewRootCmd(newTestCLI(t).f)
	for _, name := range []string{"format", "no-progress"} {
		if root.PersistentFlags().Lookup(name) == nil || !slices.Contains(OutputFlags, "--"+name) {
			t.Errorf("--%s: a global output flag the root does not define, or one OutputFlags lacks", name)
		}
	}
}

// -v has one meaning, MIOpenDriver's horizontal stride: verbose output is
// --verbose only, and a -v where it is no flag, or without its number,
// says so.
func TestShortVIsTheStride(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-v", "probe"}, "unknown shorthand flag: 'v' in -v (verbose output is --verbose; -v is MIOpenDriver's horizontal stride"},
		{[]string{"probe", "-v"}, "(verbose output is --verbose;"},
		{[]string{"check", "-v"}, "flag needs an argument: 'v' in -v (on check, -v is MIOpenDriver's horizontal stride --conv_stride_w and takes a number; verbose output is --verbose)"},
		{[]string{"check", "-v", "x"}, "(on check, -v is MIOpenDriver's horizontal stride --conv_stride_w"},
	} {
		tc := newTestCLI(t)
		if code := tc.run(tt.args...); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", tt.args, code)
		}
		if first, _, _ := strings.Cut(tc.errOut.String(), "\n"); !strings.Contains(first, tt.want) {
			t.Errorf("%v: stderr %q lacks %q", tt.args, first, tt.want)
		}
	}
	tc := newTestCLI(t)
	if code := tc.run("--verbose", "probe"); code != 0 || !tc.seen.global.Verbose {
		t.Errorf("--verbose: exit %d, verbose %v", code, tc.seen.global.Verbose)
	}
	if fl := NewRootCmd(tc.f).PersistentFlags().Lookup("verbose"); fl == nil || fl.Shorthand != "" {
		t.Errorf("--verbose has a shorthand: %+v", fl)
	}
}
