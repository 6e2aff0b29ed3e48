//go:build linux

package root

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report/reporttest"
	"miotool/internal/testutil"
	"miotool/internal/trace/tracetest"
)

// checklistRows are the rows of the Testing Checklist of a Markdown
// output, cells split at unescaped pipes.
func checklistRows(t *testing.T, md string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(md, "#### Testing Checklist\n\n")
	if !ok {
		t.Fatalf("no Testing Checklist in:\n%s", md)
	}
	var rows [][]string
	for i, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue
		}
		var cells []string
		var cur strings.Builder
		for k := 1; k < len(line); k++ {
			switch {
			case line[k] == '\\' && k+1 < len(line) && line[k+1] == '|':
				k++
				cur.WriteByte('|')
			case line[k] == '|':
				cells = append(cells, strings.TrimSpace(cur.String()))
				cur.Reset()
			default:
				cur.WriteByte(line[k])
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

// statusWords are the checklist's word of each verdict of a single check,
// and those a suite's check may have.
var statusWords = map[string][]string{
	"PASS": {"Passed ("}, "FAIL": {"Failed ("}, "SKIP": {"Skipped ("}, "ERROR": {"Error ("}, "INTERRUPTED": {"Interrupted ("},
}

// Every command's real output, run on the simulator (and trace on the
// stand-in runtime), holds to docs/miotool.schema.json: its --format json
// and its --export-json, and beside them its Markdown checklist's rows
// carry the test, the command, the devices and a status worded for the
// verdict, and its JUnit file validates.
func TestEveryCommandsOutputHoldsToTheSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	bin := cmdtest.BuildMiotool(t)
	root := testutil.ModuleRoot(t)
	dir := t.TempDir()
	env := cmdtest.Env(dir, "MIOPEN_USER_DB_PATH="+filepath.Join(dir, "db"))
	changed := cmdtest.ExpectationWithOneChange(t, dir)
	suiteFile := filepath.Join(dir, "mini.yaml")
	if err := os.WriteFile(suiteFile, []byte(`suite: mini
workdir: `+root+`
checks:
  - name: doctor
    command: miotool doctor
    expect: PASS
  - name: capture-global-lazy
    command: miotool capture --mode=global --reclaim=lazy --problem naive-timeout-sim --samples 1
    expect: FAIL
  - name: not-here
    command: miotool find
    expect: PASS
    skip: no access
`), 0o644); err != nil {
		t.Fatal(err)
	}
	exports := map[string]string{} // a run's name -> its --export-json file
	type run struct {
		name   string
		args   []string
		code   int
		suite  bool
		stdout bool // stdout is the JSON document (trace's is the program's first)
	}
	runs := []run{
		{"doctor", []string{"doctor"}, 0, false, true},
		{"rules, compared", []string{"rules", "--dialect", "cuda", "--action", "malloc", "--spin", "10ms", "--expect", "configs/rules/h200-cuda.yaml"}, 0, false, true},
		{"rules, one cell differs", []string{"rules", "--dialect", "cuda", "--action", "malloc", "--spin", "10ms", "--expect", changed}, 1, false, true},
		{"rules, nothing compared", []string{"rules", "--dialect", "cuda", "--action", "malloc", "--spin", "10ms"}, 4, false, true},
		{"a capture matrix", []string{"capture", "--mode=global,thread-local", "--reclaim=lazy,worker", "--problem", "naive-timeout-sim", "--samples", "1"}, 0, false, true},
		{"capture, lazy", []string{"capture", "--mode=global", "--reclaim=lazy", "--problem", "naive-timeout-sim", "--samples", "1"}, 1, false, true},
		{"capture, worker", []string{"capture", "--mode=global", "--reclaim=worker", "--problem", "naive-timeout-sim", "--samples", "1"}, 0, false, true},
		{"replay", []string{"replay", "--reclaim=worker,guarded", "--problem", "naive-timeout-sim"}, 0, false, true},
		{"find", []string{"find"}, 0, false, true},
		{"heuristic", []string{"heuristic", "--arch", "miotool", "--problem", "resnet50-conv2"}, 0, false, true},
		{"stress-threads", []string{"stress-threads", "--runs", "2"}, 0, false, true},
		{"report --suite", []string{"report", "--suite", suiteFile}, 0, true, true},
		{"repeat", []string{"repeat", "--runs", "3", "--", "true"}, 0, false, true},
		{"repeat, a shard that fails", []string{"repeat", "--runs", "4", "--shard", "1/2", "--", "false"}, 1, false, true},
	}
	check := func(t *testing.T, r run) {
		// In the parent's folder: the merge reads two runs' exports.
		out := filepath.Join(dir, strings.NewReplacer(" ", "-", ",", "").Replace(r.name))
		// The output flags go before any "--", after which a program's own
		// arguments follow.
		args := append([]string{"--backend", "sim", "--no-progress"}, r.args...)
		outputs := []string{"--format", "json", "--junit", out + ".xml", "--export-markdown", out + ".md", "--export-json", out + ".json"}
		if i := slices.Index(args, "--"); i >= 0 {
			args = slices.Concat(args[:i], outputs, args[i:])
		} else {
			args = append(args, outputs...)
		}
		ran := cmdtest.RunBinary(t, bin, root, env, processLimit, args...)
		if ran.Code != r.code {
			t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", ran.Code, r.code, ran.Stdout, ran.Stderr)
		}
		exported, err := os.ReadFile(out + ".json")
		if err != nil {
			t.Fatal(err)
		}
		exports[r.name] = out + ".json"
		reporttest.Hold(t, r.name+" (--export-json)", exported)
		if r.stdout {
			reporttest.Hold(t, r.name+" (--format json)", []byte(ran.Stdout))
		}
		var doc struct {
			Verdict string `json:"verdict"`
			Checks  []struct {
				Outcome string `json:"outcome"`
				Expect  string `json:"expect"`
				Runs    []any  `json:"runs"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(exported, &doc); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(out + ".md")
		if err != nil {
			t.Fatal(err)
		}
		rows := checklistRows(t, string(md))
		for i, row := range rows {
			if len(row) != 4 || row[0] == "" || !strings.HasPrefix(row[1], "`miotool ") || row[2] == "" || row[3] == "" {
				t.Errorf("a checklist row without its four fields: %q", row)
				continue
			}
			words := statusWords[doc.Verdict]
			if r.suite {
				c := doc.Checks[i]
				switch {
				case len(c.Runs) == 0:
					words = []string{"Not run ("}
				case c.Outcome == "PASS" && c.Expect == "FAIL":
					words = []string{"Fails as expected ("}
				default:
					words = statusWords[c.Outcome]
				}
			}
			if !strings.HasPrefix(row[3], words[0]) {
				t.Errorf("status %q, want it to start %q", row[3], words[0])
			}
		}
		junit, err := os.ReadFile(out + ".xml")
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateJUnit(t, junit)
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) { check(t, r) })
	}
	t.Run("report merge", func(t *testing.T) {
		lazy, worker := exports["capture, lazy"], exports["capture, worker"]
		if lazy == "" || worker == "" {
			t.Skip("the capture runs it merges did not run")
		}
		check(t, run{"report merge", []string{"report", "merge", lazy, worker}, 1, true, true})
	})
	t.Run("trace", func(t *testing.T) {
		kit := tracetest.Shared(t)
		traceEnv := append(env, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "LD_LIBRARY_PATH="+kit.Lib)
		for _, r := range []run{
			{"trace, a refused call", []string{"trace", "--", kit.HIPProg, "sync-other-thread"}, 1, false, false},
			{"trace, no capture", []string{"trace", "--", "true"}, 4, false, true},
		} {
			t.Run(r.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out")
				ran := cmdtest.RunBinary(t, bin, root, traceEnv, processLimit, append(r.args[:1:1], append([]string{"--format", "json",
					"--junit", out + ".xml", "--export-markdown", out + ".md", "--export-json", out + ".json"}, r.args[1:]...)...)...)
				if ran.Code != r.code {
					t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", ran.Code, r.code, ran.Stdout, ran.Stderr)
				}
				exported, err := os.ReadFile(out + ".json")
				if err != nil {
					t.Fatal(err)
				}
				reporttest.Hold(t, r.name, exported)
				md, err := os.ReadFile(out + ".md")
				if err != nil {
					t.Fatal(err)
				}
				if rows := checklistRows(t, string(md)); len(rows) != 1 || len(rows[0]) != 4 || rows[0][2] == "" ||
					!strings.HasPrefix(rows[0][3], map[int]string{1: "Failed (", 4: "Skipped ("}[r.code]) {
					t.Errorf("checklist rows %q", rows)
				}
				junit, err := os.ReadFile(out + ".xml")
				if err != nil {
					t.Fatal(err)
				}
				testutil.ValidateJUnit(t, junit)
			})
		}
	})
}
