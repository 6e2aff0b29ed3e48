package root

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	rulescmd "miotool/internal/cmd/rules"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/testutil"
)

// withRules is the command tree with a rules command that hands its
// options to runF.
func withRules(runF func(*rulescmd.RulesOptions) error) func(*cli.Factory) *cobra.Command {
	return func(f *cli.Factory) *cobra.Command {
		cmds := commands(f)
		for i, c := range cmds {
			if c.Name() == "rules" {
				cmds[i] = rulescmd.NewCmdRules(f, runF)
			}
		}
		return cli.NewTree(f, cmds...)
	}
}

func TestEveryHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"version", "--help"}, {"doctor", "--help"}, {"rules", "--help"}, {"help", "--help"}, {"completion", "--help"}} {
		h := cmdtest.New(t)
		if code := h.Run(New, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, h.ErrOut)
		}
		if !strings.Contains(h.Out.String(), "Examples:") {
			t.Errorf("%v: help has no Examples section:\n%s", args, h.Out)
		}
	}
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
		args      func(h *cmdtest.Harness) []string
		code      int
		stderrHas []string
		stdoutHas []string
		oneLine   bool // stderr is one line plus the usage hint
	}{
		{name: "usage: unknown flag", args: func(*cmdtest.Harness) []string { return []string{"rules", "--bogus"} }, code: 2,
			stderrHas: []string{"unknown flag: --bogus", "Run 'miotool rules --help' for usage."}, oneLine: true},
		{name: "usage: unknown action", args: func(*cmdtest.Harness) []string { return []string{"rules", "--action", "mallocc"} }, code: 2,
			stderrHas: []string{`--action: unknown action "mallocc"`}, oneLine: true},
		{name: "usage: unknown dialect", args: func(*cmdtest.Harness) []string { return []string{"rules", "--dialect", "opencl"} }, code: 2,
			stderrHas: []string{`invalid argument "opencl" for "--dialect" flag: want cuda or hip`}, oneLine: true},
		{name: "usage: missing expectation file", args: func(h *cmdtest.Harness) []string {
			return []string{"rules", "--expect", filepath.Join(h.Dir, "none.yaml")}
		}, code: 2, stderrHas: []string{"none.yaml: no such file or directory"}, oneLine: true},
		{name: "usage: unknown command", args: func(*cmdtest.Harness) []string { return []string{"rulez"} }, code: 2,
			stderrHas: []string{`unknown command "rulez" for "miotool" (did you mean "rules"?)`}, oneLine: true},
		{name: "skipped: backend library missing", open: unavailable, args: func(*cmdtest.Harness) []string { return []string{"rules", "--backend", "cuda"} }, code: 4,
			stderrHas: []string{"backend cuda unavailable: libcuda.so.1 not found"}, stdoutHas: []string{"rules: SKIP"}},
		{name: "tool failure: device broken", open: broken, args: func(*cmdtest.Harness) []string { return []string{"rules"} }, code: 3,
			stderrHas: []string{"the driver answered garbage"}, stdoutHas: []string{"rules: ERROR"}},
		{name: "usage: expectations not writable", args: func(h *cmdtest.Harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--write-expect", filepath.Join(h.Dir, "missing-dir", "x.yaml")}
		}, code: 2, stderrHas: []string{"--write-expect", "does not exist"}, oneLine: true},
		{name: "check failed: a cell differs", args: func(h *cmdtest.Harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--expect", cmdtest.ExpectationWithOneChange(t, h.Dir)}
		}, code: 1, stdoutHas: []string{"rules: FAIL", "malloc/global/other/global", "differs: expected SUCCESS (0) / SUCCESS (0)"}},
		{name: "pass", args: func(h *cmdtest.Harness) []string {
			return []string{"rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--expect", filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml")}
		}, code: 0, stdoutHas: []string{"rules: PASS - 18 cells measured; compared 18 of 18 with"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := cmdtest.New(t)
			if c.open != nil {
				h.F.OpenDevice = c.open
			}
			code := h.Run(New, c.args(h)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, c.code, h.Out, h.ErrOut)
			}
			for _, w := range c.stderrHas {
				if !strings.Contains(h.ErrOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, h.ErrOut)
				}
			}
			for _, w := range c.stdoutHas {
				if !strings.Contains(h.Out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, h.Out)
				}
			}
			if c.oneLine {
				lines := strings.Split(strings.TrimSuffix(h.ErrOut.String(), "\n"), "\n")
				if len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'miotool") {
					t.Errorf("stderr is not one line plus a hint:\n%s", h.ErrOut)
				}
				if h.Out.Len() != 0 {
					t.Errorf("a usage error printed to stdout:\n%s", h.Out)
				}
			}
		})
	}
}

func TestJSONOutputParses(t *testing.T) {
	for _, args := range [][]string{
		{"rules", "--backend", "sim", "--action", "free", "--spin", "10ms", "--format", "json", "--expect", filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml")},
		{"doctor", "--backend", "sim", "--format", "json"},
	} {
		h := cmdtest.New(t)
		if code := h.Run(New, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, h.ErrOut)
		}
		var generic map[string]any
		if err := json.Unmarshal(h.Out.Bytes(), &generic); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, h.Out)
		}
		r, err := report.ReadJSON(bytes.NewReader(h.Out.Bytes()))
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

// configs/miotool.yaml documents every key of the real command tree:
// uncommenting its "# key: value" lines gives a file that loads and sets
// every key.
func TestShippedConfigDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "configs", "miotool.yaml"))
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
	root := New(cmdtest.New(t).F)
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
	h := cmdtest.New(t)
	p := filepath.Join(h.Dir, "miotool.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var got *rulescmd.RulesOptions
	if code := h.Run(withRules(func(o *rulescmd.RulesOptions) error { got = o; return nil }), "rules"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
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
	h := cmdtest.New(t)
	if code := h.Run(New, "--version"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	if got, want := h.Out.String(), "miotool 1.2.3 (commit c0ffee, go1.26.8 linux/amd64)\n"; got != want {
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
		h := cmdtest.New(t)
		code := h.Run(New, tc.args...)
		got := h.ErrOut.String()
		if code == 0 {
			got = h.Out.String()
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, tc.want, h.Out, h.ErrOut)
		}
	}
}
