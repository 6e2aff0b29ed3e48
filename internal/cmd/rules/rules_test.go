package rules

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
	"miotool/internal/testutil"
)

// tree is a command tree with the rules command.
var tree = withRun(nil)

// withRun is a command tree whose rules command hands its options to runF.
func withRun(runF func(*RulesOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return NewCmdRules(f, runF) })
}

func TestRulesFlagsReachTheOptions(t *testing.T) {
	expect := h200Expectations(t)
	write := filepath.Join(t.TempDir(), "w.yaml")
	cases := []struct {
		args []string
		want RulesOptions
	}{
		{[]string{"rules"}, RulesOptions{Dialect: hip.DialectCUDA}},
		{[]string{"rules", "--dialect", "hip", "--spin", "5ms", "--action", "malloc,free", "--action", "device-sync", "--expect", expect, "--write-expect", write},
			RulesOptions{Dialect: hip.DialectHIP, DialectSet: true, Spin: 5 * time.Millisecond, Actions: []rules.Action{rules.Malloc, rules.Free, rules.DeviceSync}, Expect: expect, WriteExpect: write}},
		{[]string{"--backend", "sim", "--device", "1", "--format", "json", "rules"},
			RulesOptions{Dialect: hip.DialectCUDA, Global: cli.GlobalOptions{Backend: "sim", Device: 1, Format: report.JSON}}},
	}
	for _, c := range cases {
		h := cmdtest.New(t)
		var got *RulesOptions
		if code := h.Run(withRun(func(o *RulesOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, h.ErrOut)
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

// h200Expectations is the committed H200 expectation file.
func h200Expectations(t *testing.T) string {
	return filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml")
}

// The Markdown output ends with the PR checklist row:
// | rules | <command without output flags> | <device> | Passed (18/18) |
func TestMarkdownChecklistRow(t *testing.T) {
	h := cmdtest.New(t)
	args := []string{"rules", "--backend", "sim", "--action", "device-sync", "--spin", "10ms", "--format", "markdown", "--expect", h200Expectations(t)}
	if code := h.Run(tree, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	row := regexp.MustCompile(`(?m)^\| rules +\| \x60miotool rules --backend sim --action device-sync --spin 10ms --expect \S+h200-cuda.yaml\x60 +\| miotool simulated device \(cuda rules\) \(sim\) +\| Passed \(18/18\) +\|$`)
	if !row.MatchString(h.Out.String()) {
		t.Errorf("no checklist row:\n%s", h.Out)
	}
}

// A command's Markdown checklist row leaves the output flags out of its
// Command column (every command's row comes from report.ChecklistRow; rules
// is the check here that gives the same verdict on a busy machine).
func TestMarkdownCommandColumnHasNoOutputFlags(t *testing.T) {
	h := cmdtest.New(t)
	args := []string{"--no-progress", "rules", "--backend", "sim", "--format=markdown", "--action", "malloc", "--spin", "10ms"}
	if code := h.Run(tree, args...); code != 4 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	row := regexp.MustCompile(`(?m)^\| rules +\| \x60miotool rules --backend sim --action malloc --spin 10ms\x60 +\|`)
	if !row.MatchString(h.Out.String()) {
		t.Errorf("no checklist row without output flags:\n%s", h.Out)
	}
}
