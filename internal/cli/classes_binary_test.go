//go:build linux

package cli_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/finddb"
)

// binaryLimit bounds every run of the built binary: wide for a loaded
// machine, and a failure rather than a hang.
const binaryLimit = 3 * time.Minute

// The built binary, run as a user would: every file it rewrites keeps its
// names, links and mode, and every name it reads is checked.
func TestClassesBinary(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	t.Run("a find-db with other names", func(t *testing.T) { findDBKeepsItsNames(t, bin) })
	t.Run("output files with other names", func(t *testing.T) { outputFilesKeepTheirNames(t, bin) })
	t.Run("names that are read", func(t *testing.T) { namesAreChecked(t, bin) })
}

// tinyFind is a find that takes a second on the simulator.
var tinyFind = []string{"--backend", "sim", "--no-progress", "find", "-n", "1", "-c", "4", "-H", "8", "-W", "8", "-k", "4", "--samples", "1"}

func findDBKeepsItsNames(t *testing.T, bin string) {
	const mine = "# my notes\nother=Mine:1,0,x\n"
	for _, kind := range []string{"hard link", "symbolic link"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dbDir := filepath.Join(dir, "db")
			if err := os.MkdirAll(dbDir, 0o755); err != nil {
				t.Fatal(err)
			}
			db := finddb.UserFile(dbDir, "sim", runtime.NumCPU(), "sim")
			other := filepath.Join(dir, "mine.txt")
			write(t, other, mine, 0o664)
			if kind == "hard link" {
				if err := os.Link(other, db); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(other, db); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Stat(other)
			r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir, "MIOPEN_USER_DB_PATH="+dbDir, "MIOPEN_NAIVE_TIMEOUT=300"), binaryLimit, tinyFind...)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
			after, err := os.Stat(other)
			if err != nil || !os.SameFile(before, after) || after.Mode().Perm() != 0o664 {
				t.Fatalf("%s: %v, the same file %v, mode %04o; want the same file, 0664", other, err, os.SameFile(before, after), after.Mode().Perm())
			}
			for _, p := range []string{db, other} {
				data, _ := os.ReadFile(p)
				if !strings.HasPrefix(string(data), mine) || !strings.Contains(string(data), "-NCHW-FP32-F=") {
					t.Errorf("%s: %q, want the user's lines and the record", filepath.Base(p), data)
				}
			}
			if kind == "symbolic link" {
				if info, err := os.Lstat(db); err != nil || info.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the db's symbolic link was replaced: %v", err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dbDir, "*.miotool-*")); len(left) > 0 {
				t.Errorf("left beside the db: %v", left)
			}
		})
	}
}

func outputFilesKeepTheirNames(t *testing.T, bin string) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real.xml"), filepath.Join(dir, "link.xml")
	linked, other := filepath.Join(dir, "linked.json"), filepath.Join(dir, "other.json")
	write(t, real, "old", 0o664)
	write(t, linked, "old", 0o664)
	if err := os.Symlink("real.xml", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(linked, other); err != nil {
		t.Fatal(err)
	}
	realBefore, _ := os.Stat(real)
	linkedBefore, _ := os.Stat(linked)
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), binaryLimit, "--backend", "sim", "doctor", "--junit", link, "--export-json", linked)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	for _, c := range []struct {
		path   string
		before os.FileInfo
		want   string
	}{{real, realBefore, "<testsuite"}, {other, linkedBefore, `"verdict"`}} {
		info, _ := os.Stat(c.path)
		data, _ := os.ReadFile(c.path)
		if !os.SameFile(c.before, info) || info.Mode().Perm() != 0o664 || !strings.Contains(string(data), c.want) {
			t.Errorf("%s: the same file %v, mode %04o, %.60q", filepath.Base(c.path), os.SameFile(c.before, info), info.Mode().Perm(), data)
		}
	}
	if info, err := os.Lstat(link); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symbolic link was replaced: %v", err)
	}
}

func namesAreChecked(t *testing.T, bin string) {
	for _, tt := range []struct {
		name   string
		env    []string
		config string // the working folder's miotool.yaml
		files  map[string]string
		args   []string
		code   int
		stderr string
	}{
		{name: "a mistyped variable", env: []string{"MIOTOOL_FROMAT=json"}, args: []string{"--backend", "sim", "doctor"}, code: 0,
			stderr: "miotool: warning: MIOTOOL_FROMAT is set, but miotool reads no such variable (did you mean MIOTOOL_FORMAT?): it changes nothing"},
		{name: "a result file from a variable", env: []string{"MIOTOOL_DOCTOR_JUNIT=d.xml"}, args: []string{"--backend", "sim", "doctor"}, code: 0,
			stderr: "miotool: warning: MIOTOOL_DOCTOR_JUNIT is set, but --junit is given on the command line only: the variable changes nothing"},
		{name: "a mistyped section", config: "captrue:\n  mode: global\n", args: []string{"--backend", "sim", "doctor"}, code: 2,
			stderr: `line 1: unknown key "captrue" (did you mean capture?)`},
		{name: "a mistyped key", config: "capture:\n  mdoe: global\n", args: []string{"--backend", "sim", "doctor"}, code: 2,
			stderr: `line 2: unknown key "capture.mdoe" (did you mean capture.mode?)`},
		{name: "a problem defined twice", files: map[string]string{"p.yaml": "a:\n  in_h: 8\nb:\n  in_h: 9\na:\n  in_h: 10\n"},
			args: append(tinyFind[:4:4], "--problems", "p.yaml", "--problem", "b"), code: 2,
			stderr: "miotool: --problem: p.yaml:5: problem a is defined twice, at lines 1 and 5"},
		{name: "a mistyped problem", args: append(tinyFind[:4:4], "--problem", "naive-long-simm"), code: 2,
			stderr: `miotool: --problem: no problem named "naive-long-simm" (did you mean naive-long-sim?)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				write(t, filepath.Join(dir, "miotool.yaml"), tt.config, 0o644)
			}
			for name, text := range tt.files {
				write(t, filepath.Join(dir, name), text, 0o644)
			}
			r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir, tt.env...), binaryLimit, tt.args...)
			if r.Code != tt.code || !strings.Contains(r.Stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.Code, r.Stderr, tt.code, tt.stderr)
			}
			if tt.code == 0 && strings.HasPrefix(r.Stdout, "{") {
				t.Errorf("a variable that changes nothing changed the output to JSON")
			}
		})
	}
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
