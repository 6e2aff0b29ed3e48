package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"miotool/internal/buildinfo"
	"miotool/internal/testutil"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
)

// harness runs the real command tree with buffers for streams and
// temporary directories for configuration, so nothing on the machine
// running the tests changes the outcome.
type harness struct {
	f      *cli.Factory
	out    *bytes.Buffer
	errOut *bytes.Buffer
	dir    string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ios, _, out, errOut := cli.Test()
	h := &harness{out: out, errOut: errOut, dir: t.TempDir()}
	h.f = cli.NewFactory(ios, buildinfo.Info{Version: "1.2.3", Commit: "c0ffee", GoVersion: "go1.26.8", Platform: "linux/amd64"})
	h.f.Getwd = func() (string, error) { return h.dir, nil }
	h.f.UserConfigDir = func() (string, error) { return filepath.Join(h.dir, "config"), nil }
	h.f.LookupEnv = func(string) (string, bool) { return "", false }
	return h
}

func (h *harness) run(args ...string) int { return cli.Main(h.f, args, newRootCmd) }

// runWith runs a tree whose rules command hands its options to runF.
func (h *harness) runWith(runF func(*RulesOptions) error, args ...string) int {
	return cli.Main(h.f, args, func(f *cli.Factory) *cobra.Command {
		root := cli.NewRootCmd(f)
		root.AddCommand(NewCmdVersion(f, nil), NewCmdDoctor(f, nil), NewCmdRules(f, runF),
			NewCmdFind(f, nil), NewCmdCapture(f, nil), NewCmdReplay(f, nil), NewCmdStress(f, nil), NewCmdHeuristic(f, nil),
			NewCmdReport(f, nil), NewCmdCompletion(f), NewCmdGenMan(f))
		return root
	})
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	return testutil.ModuleRoot(t)
}

func TestEveryHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"version", "--help"}, {"doctor", "--help"}, {"rules", "--help"}, {"help", "--help"}} {
		h := newHarness(t)
		if code := h.run(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, h.errOut)
		}
		if !strings.Contains(h.out.String(), "Examples:") {
			t.Errorf("%v: help has no Examples section:\n%s", args, h.out)
		}
	}
}

func TestRulesFlagsReachTheOptions(t *testing.T) {
	cases := []struct {
		args []string
		want RulesOptions
	}{
		{[]string{"rules"}, RulesOptions{Dialect: hip.DialectCUDA}},
		{[]string{"rules", "--dialect", "hip", "--spin", "5ms", "--action", "malloc,free", "--action", "device-sync", "--expect", "e.yaml", "--write-expect", "w.yaml"},
			RulesOptions{Dialect: hip.DialectHIP, DialectSet: true, Spin: 5 * time.Millisecond, Actions: []rules.Action{rules.Malloc, rules.Free, rules.DeviceSync}, Expect: "e.yaml", WriteExpect: "w.yaml"}},
		{[]string{"--backend", "sim", "--device", "1", "--format", "json", "rules"},
			RulesOptions{Dialect: hip.DialectCUDA, Global: cli.GlobalOptions{Backend: "sim", Device: 1, Format: report.JSON}}},
	}
	for _, c := range cases {
		h := newHarness(t)
		var got *RulesOptions
		if code := h.runWith(func(o *RulesOptions) error { got = o; return nil }, c.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, h.errOut)
		}
		if got.Dialect != c.want.Dialect || got.DialectSet != c.want.DialectSet || got.Spin != c.want.Spin ||
			got.Expect != c.want.Expect || got.WriteExpect != c.want.WriteExpect ||
			strings.Join(actionNames(got.Actions), ",") != strings.Join(actionNames(c.want.Actions), ",") {
			t.Errorf("%v: options %+v", c.args, got)
		}
		if c.want.Global.Backend != "" && (got.Global.Backend != c.want.Global.Backend || got.Global.Device != c.want.Global.Device || got.Global.Format != c.want.Global.Format) {
			t.Errorf("%v: global %+v", c.args, got.Global)
		}
		if got.CommandLine != "miotool "+strings.Join(c.args, " ") {
			t.Errorf("%v: command line %q", c.args, got.CommandLine)
		}
	}
}

func actionNames(as []rules.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

// expectationWithOneChange copies the committed H200 expectations with the
// cell malloc/global/other/global changed to "allowed".
func expectationWithOneChange(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "configs", "rules", "h200-cuda.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const cell = "{action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901"
	if !bytes.Contains(data, []byte(cell)) {
		t.Fatalf("h200-cuda.yaml lacks %q", cell)
	}
	data = bytes.Replace(data, []byte(cell), []byte("{action: malloc, capture: global, thread: other, mode: global, returns: 0, end: 0"), 1)
	p := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	unavailable := func(string, hip.OpenOptions) (hip.Device, hip.Selection, error) {
		err := &hip.UnavailableError{Backend: "cuda", Reason: "libcuda.so.1 not found (tried libcuda.so.1)"}
		return nil, hip.Selection{Requested: "cuda", Attempts: []hip.Attempt{{Backend: "cuda", Err: err}}}, err
	}
	broken := func(string, hip.OpenOptions) (hip.Device, hip.Selection, error) {
		return nil, hip.Selection{}, errors.New("the driver answered garbage")
	}
	cases := []struct {
		name      string
		open      cli.OpenFunc
		args      func(h *harness) []string
		code      int
		stderrHas []string
		stdoutHas []string
		oneLine   bool // stderr is one line plus the usage hint
	}{
		{name: "usage: unknown flag", args: func(*harness) []string { return []string{"rules", "--bogus"} }, code: 2,
			stderrHas: []string{"unknown flag: --bogus", "Run 'miotool rules --help' for usage."}, oneLine: true},
		{name: "usage: unknown action", args: func(*harness) []string { return []string{"rules", "--action", "mallocc"} }, code: 2,
			stderrHas: []string{`--action: unknown action "mallocc"`}, oneLine: true},
		{name: "usage: unknown dialect", args: func(*harness) []string { return []string{"rules", "--dialect", "opencl"} }, code: 2,
			stderrHas: []string{`invalid argument "opencl" for "--dialect" flag: want cuda or hip`}, oneLine: true},
		{name: "usage: missing expectation file", args: func(h *harness) []string {
			return []string{"rules", "--expect", filepath.Join(h.dir, "none.yaml")}
		}, code: 2, stderrHas: []string{"none.yaml: no such file or directory"}, oneLine: true},
		{name: "usage: unknown command", args: func(*harness) []string { return []string{"rulez"} }, code: 2,
			stderrHas: []string{`unknown command "rulez" for "miotool" (did you mean "rules"?)`}, oneLine: true},
		{name: "skipped: backend library missing", open: unavailable, args: func(*harness) []string { return []string{"rules", "--backend", "cuda"} }, code: 4,
			stderrHas: []string{"backend cuda unavailable: libcuda.so.1 not found"}, stdoutHas: []string{"rules: SKIP"}},
		{name: "tool failure: device broken", open: broken, args: func(*harness) []string { return []string{"rules"} }, code: 3,
			stderrHas: []string{"the driver answered garbage"}, stdoutHas: []string{"rules: ERROR"}},
		{name: "tool failure: expectations not writable", args: func(h *harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--write-expect", filepath.Join(h.dir, "missing-dir", "x.yaml")}
		}, code: 3, stderrHas: []string{"--write-expect"}},
		{name: "check failed: a cell differs", args: func(h *harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--expect", expectationWithOneChange(t, h.dir)}
		}, code: 1, stdoutHas: []string{"rules: FAIL", "malloc/global/other/global", "differs: expected 0 SUCCESS / 0 SUCCESS"}},
		{name: "pass", args: func(h *harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--expect", filepath.Join(moduleRoot(t), "configs", "rules", "h200-cuda.yaml")}
		}, code: 0, stdoutHas: []string{"rules: PASS - 18 cells measured; all 18 compared match"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			if c.open != nil {
				h.f.OpenDevice = c.open
			}
			code := h.run(c.args(h)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, c.code, h.out, h.errOut)
			}
			for _, w := range c.stderrHas {
				if !strings.Contains(h.errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, h.errOut)
				}
			}
			for _, w := range c.stdoutHas {
				if !strings.Contains(h.out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, h.out)
				}
			}
			if c.oneLine {
				lines := strings.Split(strings.TrimSuffix(h.errOut.String(), "\n"), "\n")
				if len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'miotool") {
					t.Errorf("stderr is not one line plus a hint:\n%s", h.errOut)
				}
				if h.out.Len() != 0 {
					t.Errorf("a usage error printed to stdout:\n%s", h.out)
				}
			}
		})
	}
}

func TestJSONOutputParses(t *testing.T) {
	for _, args := range [][]string{
		{"rules", "--backend", "sim", "--action", "free", "--spin", "10ms", "--format", "json"},
		{"doctor", "--backend", "sim", "--format", "json"},
	} {
		h := newHarness(t)
		if code := h.run(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, h.errOut)
		}
		var generic map[string]any
		if err := json.Unmarshal(h.out.Bytes(), &generic); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, h.out)
		}
		r, err := report.ReadJSON(bytes.NewReader(h.out.Bytes()))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if r.Verdict != report.Pass || r.Backend != "sim" || r.Device.Arch != "sim" || len(r.Tables) == 0 {
			t.Errorf("%v: result %+v", args, r)
		}
		if args[0] == "rules" && len(r.Tables[0].Rows) != 18 {
			t.Errorf("rules --action free: %d rows, want 18", len(r.Tables[0].Rows))
		}
	}
}

func TestVersion(t *testing.T) {
	h := newHarness(t)
	if code := h.run("version", "--format", "json"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.errOut)
	}
	var v map[string]any
	if err := json.Unmarshal(h.out.Bytes(), &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if v["version"] != "1.2.3" || v["commit"] != "c0ffee" || v["go"] != "go1.26.8" {
		t.Errorf("version JSON %v", v)
	}
	h = newHarness(t)
	h.run("version")
	if !strings.HasPrefix(h.out.String(), "miotool 1.2.3\n  commit: c0ffee\n") {
		t.Errorf("version text %q", h.out)
	}
}

// The Markdown output ends with the PR checklist row:
// | rules | <command without output flags> | <device> | Passed |
func TestMarkdownChecklistRow(t *testing.T) {
	h := newHarness(t)
	args := []string{"rules", "--backend", "sim", "--action", "device-sync", "--spin", "10ms", "--format", "markdown"}
	if code := h.run(args...); code != 0 {
		t.Fatalf("exit %d: %s", code, h.errOut)
	}
	row := regexp.MustCompile(`(?m)^\| rules +\| \x60miotool rules --backend sim --action device-sync --spin 10ms\x60 +\| miotool simulated device \(cuda rules\) \(sim\) +\| Passed +\|$`)
	if !row.MatchString(h.out.String()) {
		t.Errorf("no checklist row:\n%s", h.out)
	}
}

// configs/miotool.yaml documents every key of the real command tree:
// uncommenting its "# key: value" lines gives a file that loads and sets
// every key.
func TestShippedConfigDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "configs", "miotool.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(data)) {
		body := strings.TrimLeft(line, " ")
		indent := line[:len(line)-len(body)]
		if rest, ok := strings.CutPrefix(body, "# "); ok && looksLikeKey(rest) {
			line = indent + rest
		}
		b.WriteString(line)
	}
	root := newRootCmd(newHarness(t).f)
	lines, err := cli.CheckConfig(root, []byte(b.String()))
	if err != nil {
		t.Fatalf("configs/miotool.yaml with its keys uncommented: %v\n%s", err, b.String())
	}
	keys := cli.ConfigKeys(root)
	for _, k := range keys {
		if _, ok := lines[k]; !ok {
			t.Errorf("configs/miotool.yaml does not document %s", k)
		}
	}
	if len(keys) < 10 {
		t.Errorf("only %d keys known: %v", len(keys), keys)
	}

	// And the uncommented file, as a real config, leaves every default as it was.
	h := newHarness(t)
	p := filepath.Join(h.dir, "miotool.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var got *RulesOptions
	if code := h.runWith(func(o *RulesOptions) error { got = o; return nil }, "rules"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.errOut)
	}
	if got.Dialect != hip.DialectCUDA || got.Spin != 0 || len(got.Actions) != 0 || got.Expect != "" || got.Global.Backend != "auto" || got.Global.Format != report.Text {
		t.Errorf("defaults changed by the documented config: %+v", got)
	}
}

// looksLikeKey tells a commented-out "key: value" or "section:" from prose.
func looksLikeKey(s string) bool {
	k, _, ok := strings.Cut(s, ":")
	return ok && k != "" && !strings.ContainsAny(k, " `'(")
}

func TestVersionFlag(t *testing.T) {
	h := newHarness(t)
	if code := h.run("--version"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.errOut)
	}
	if got, want := h.out.String(), "miotool 1.2.3 (commit c0ffee, go1.26.8 linux/amd64)\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

// help on a topic that is no command is a usage error, with a suggestion.
func TestHelpOnAnUnknownTopic(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr, or stdout for exit 0
	}{
		{[]string{"help", "nosuch"}, 2, `unknown help topic "nosuch"`},
		{[]string{"help", "captur"}, 2, `(did you mean "capture"?)`},
		{[]string{"help", "report", "mrege"}, 2, `unknown help topic "report mrege" (did you mean "report merge"?)`},
		{[]string{"help", "report", "merge"}, 0, "merge reads suite results"},
		{[]string{"help"}, 0, "Available Commands"},
	} {
		h := newHarness(t)
		code := h.run(tc.args...)
		got := h.errOut.String()
		if code == 0 {
			got = h.out.String()
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, tc.want, h.out, h.errOut)
		}
	}
}
