package rules

// rules as a user runs it: the built binary, a clean environment, the
// user's expectation files and config compared before and after.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/rules"
)

// userFiles are an expectation file (the committed H200 one, with a
// comment of the user's), a link and a hard link to it, a broken
// expectation file and a config file, in dir.
type userFiles struct {
	expect, symlink, hardlink, broken, config string
}

func newUserFiles(t *testing.T, dir string) userFiles {
	t.Helper()
	data, err := os.ReadFile(h200Expectations(t))
	if err != nil {
		t.Fatal(err)
	}
	u := userFiles{expect: filepath.Join(dir, "mine.yaml"), symlink: filepath.Join(dir, "link.yaml"), hardlink: filepath.Join(dir, "hard.yaml"),
		broken: filepath.Join(dir, "broken.yaml"), config: filepath.Join(dir, "miotool.yaml")}
	if err := os.WriteFile(u.expect, append([]byte("# my notes, which a rewrite would lose\n"), data...), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("mine.yaml", u.symlink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(u.expect, u.hardlink); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.broken, []byte("schema: miotool/rules-expect/v1\ndialect: cuda\ncells: [{action: nope}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.config, []byte("# my config\nrules:\n  dialect: cuda\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u userFiles) all() []string {
	return []string{u.expect, u.symlink, u.hardlink, u.broken, u.config}
}

// Bad input is exit 2 with one clear line before any cell is measured,
// and the user's files keep their bytes, mode and inode; above all an
// output that is one of the inputs is refused.
func TestRulesBinaryBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	u := newUserFiles(t, dir)
	folder := filepath.Join(dir, "a-folder")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		args  []string
		first string
	}{
		{"write-expect over expect", []string{"--expect", u.expect, "--write-expect", u.expect},
			"miotool: --write-expect " + u.expect + ": is the file " + u.expect + " --expect names, which miotool rules reads; write the result to another file"},
		{"write-expect over expect by another spelling", []string{"--expect", u.expect, "--write-expect", "./mine.yaml"},
			"miotool: --write-expect ./mine.yaml: is the file " + u.expect + " --expect names"},
		{"write-expect through a symlink", []string{"--expect", u.expect, "--write-expect", u.symlink}, "miotool: --write-expect " + u.symlink + ": is the file " + u.expect + " --expect names"},
		{"write-expect to a hard link", []string{"--expect", u.expect, "--write-expect", u.hardlink}, "miotool: --write-expect " + u.hardlink + ": is the file " + u.expect + " --expect names"},
		{"write-expect over the config", []string{"--write-expect", u.config}, "miotool: --write-expect " + u.config + ": is the file " + u.config + " the config file names"},
		{"write-expect in a missing folder", []string{"--write-expect", filepath.Join(dir, "none", "x.yaml")}, "miotool: --write-expect " + filepath.Join(dir, "none", "x.yaml") + ": the folder " + filepath.Join(dir, "none") + " does not exist"},
		{"write-expect a folder", []string{"--write-expect", folder}, "miotool: --write-expect " + folder + ": is a folder"},
		{"expect missing", []string{"--expect", filepath.Join(dir, "none.yaml")}, "miotool: expectation file " + filepath.Join(dir, "none.yaml") + ": no such file or directory"},
		{"expect broken", []string{"--expect", u.broken}, "miotool: expectation file " + u.broken + " line 3:"},
		{"spin of an hour", []string{"--spin", "1h"}, "miotool: --spin 1h0m0s: want a positive duration up to 10s"},
		{"spin negative", []string{"--spin", "-1s"}, "miotool: --spin -1s: want a positive duration up to 10s"},
		{"unknown action", []string{"--action", "mallocc"}, `miotool: --action: unknown action "mallocc"`},
		{"unknown dialect", []string{"--dialect", "opencl"}, `miotool: invalid argument "opencl" for "--dialect" flag`},
		{"a table of another runtime", []string{"--dialect", "hip", "--expect", h200Expectations(t)},
			"miotool: --expect " + h200Expectations(t) + " holds cuda rules, but the device speaks hip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := cmdtest.Snapshot(t, u.all()...)
			r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute, append([]string{"--backend", "sim", "rules"}, tt.args...)...)
			cmdtest.WantRefused(t, r, tt.first)
			cmdtest.Unchanged(t, tt.name, before)
		})
	}
}

// --write-expect beside --expect: the reference stays as it was, and the
// new file holds exactly the cells measured; a file already there keeps
// its mode.
func TestRulesBinaryWriteExpectBesideExpect(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	u := newUserFiles(t, dir)
	out := filepath.Join(dir, "measured.yaml")
	if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := cmdtest.Snapshot(t, u.all()...)
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute,
		"--backend", "sim", "rules", "--action", "malloc", "--spin", "10ms", "--expect", u.expect, "--write-expect", out)
	if r.Code != 0 || !strings.Contains(r.Stdout, "compared 18 of 18 with "+u.expect) || !strings.Contains(r.Stdout, "wrote 18 measured cells to "+out) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	cmdtest.Unchanged(t, "the reference", before)
	e, err := rules.ReadExpectation(out)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Cells) != 18 || info.Mode().Perm() != 0o600 {
		t.Errorf("wrote %d cells with mode %v; want 18 with the file's own 0600", len(e.Cells), info.Mode().Perm())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*miotool*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// A comparison says how many cells it compared of how many it measured:
// a file with one cell passes for that one only, and saying so; no file
// is a measurement, SKIP with exit 4, never a PASS.
func TestRulesBinaryComparedCells(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	one := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(one, []byte("schema: miotool/rules-expect/v1\ndialect: cuda\ncells:\n"+
		"  - {action: malloc, capture: global, thread: same, mode: global, returns: 900, end: 901}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		args     []string
		code     int
		headline string
		status   string
		compared int64
	}{
		{"one cell of 18", []string{"--expect", one}, 0, "rules: PASS - 18 cells measured; compared 1 of 18 with " + one + "; all 1 match; the other 17 have no expectation there and were not compared",
			"Passed (1/1 cells compared): 17 of 18 cells measured have no expectation", 1},
		{"no expectations", nil, 4, "rules: SKIP - 18 cells measured, compared none: no expectations given (--expect)",
			"Skipped (1/1 run skipped): 18 cells measured, compared none: no expectations given (--expect)", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := append([]string{"--backend", "sim", "--no-progress", "rules", "--action", "malloc", "--spin", "10ms"}, tt.args...)
			r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute, base...)
			if r.Code != tt.code || cmdtest.FirstLine(r.Stdout) != tt.headline {
				t.Errorf("exit %d, headline %q; want %d, %q", r.Code, cmdtest.FirstLine(r.Stdout), tt.code, tt.headline)
			}
			r = cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute, append(base, "--format", "json")...)
			var doc struct {
				Verdict  string           `json:"verdict"`
				ExitCode int              `json:"exit_code"`
				Status   string           `json:"status"`
				Counters map[string]int64 `json:"counters"`
				Tables   []struct {
					Title string `json:"title"`
				} `json:"tables"`
			}
			if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
				t.Fatalf("%v\n%s", err, r.Stdout)
			}
			if doc.ExitCode != r.Code || doc.Status != tt.status || doc.Counters["compared"] != tt.compared || doc.Counters["cells"] != 18 ||
				!strings.Contains(doc.Tables[0].Title, map[bool]string{true: "compared 1 of 18 cells", false: "18 cells measured, none compared"}[tt.compared == 1]) {
				t.Errorf("exit %d: %+v", r.Code, doc)
			}
		})
	}
}

// SIGINT and SIGTERM while cells are measured: exit 130 or 143 within
// 2 s, even with a spin of 3 s in flight, an INTERRUPTED result holding
// the cells measured, its exit_code the process's own, and nothing
// written to --write-expect.
func TestRulesBinarySignals(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, 130, "SIGINT"}, {syscall.SIGTERM, 143, "SIGTERM"}} {
		for _, spin := range []string{"10ms", "3s"} {
			t.Run(tt.name+"/spin "+spin, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out.yaml")
				p := cmdtest.StartBinary(t, bin, dir, cmdtest.Env(dir), "--backend", "sim", "--format", "json", "--no-progress", "--verbose",
					"rules", "--spin", spin, "--expect", h200Expectations(t), "--write-expect", out)
				total := len(rules.Matrix())
				p.WaitForLine(fmt.Sprintf("cell 1 of %d measured", total), time.Minute)
				code, took, stdout := p.Signal(tt.sig, 2*time.Second)
				t.Logf("exited %v after %s", took, tt.name)
				var doc struct {
					Verdict  string           `json:"verdict"`
					ExitCode int              `json:"exit_code"`
					Summary  string           `json:"summary"`
					Counters map[string]int64 `json:"counters"`
				}
				if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
					t.Fatalf("%v\n%s", err, stdout)
				}
				if code != tt.code || doc.Verdict != "INTERRUPTED" || doc.ExitCode != code {
					t.Errorf("exit %d (want %d), verdict %s, exit_code %d", code, tt.code, doc.Verdict, doc.ExitCode)
				}
				if n := doc.Counters["cells"]; n < 1 || n >= int64(total) || doc.Counters["compared"] != n ||
					!strings.HasPrefix(doc.Summary, fmt.Sprintf("interrupted by %s: %d of %d cells finished, %d not started; so far compared %d with ", tt.name, n, total, int64(total)-n, n)) {
					t.Errorf("counters %v, summary %q", doc.Counters, doc.Summary)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("--write-expect was written by an interrupted run: %v", err)
				}
			})
		}
	}
}
