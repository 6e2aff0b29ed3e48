//go:build unix

package heuristic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
)

// Bad input, run as a user would with the built binary: exit 2, a first
// stderr line that says what is wrong, nothing on stdout, and the user's
// config and find-db unchanged by bytes, mode and inode.
func TestHeuristicBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		name  string
		args  []string
		first string
	}{
		{"zero channels", []string{"-c", "0"}, "miotool: problem: c must be at least 1, got 0"},
		{"negative batch", []string{"-n", "-4"}, "miotool: problem: n must be at least 1, got -4"},
		{"batch not a number", []string{"-n", "many"}, `miotool: invalid argument "many" for "-n, --batchsize" flag`},
		{"groups that do not divide", []string{"-c", "6", "-g", "4"}, "miotool: problem: groups 4 must divide c 6"},
		{"filter past the input", []string{"-H", "2", "-y", "5"}, "miotool: problem: the filter 5x3"},
		{"unknown problem", []string{"--problem", "nope"}, `miotool: --problem: no problem named "nope"`},
		{"named problem made invalid", []string{"--problem", "resnet50-conv2", "-u", "0"}, "miotool: problem resnet50-conv2 with -u 0: invalid problem: stride_h must be >= 1"},
		{"unknown direction", []string{"--direction", "up"}, `miotool: invalid argument "up" for "--direction" flag`},
		{"unknown data type", []string{"--dtype", "FP64"}, `miotool: invalid argument "FP64" for "--dtype" flag`},
		{"an arch with no model", []string{"--arch", "gfx000"}, "miotool: no TunaNet model for gfx000"},
		{"no such model folder", []string{"--model-dir", "/nonexistent/models"}, "miotool: --model-dir: model directory: stat /nonexistent/models"},
		{"an argument", []string{"gfx942"}, `miotool: unknown command "gfx942" for "miotool heuristic"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
			before := cmdtest.Snapshot(t, u.Files()...)
			ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env(), time.Minute, append([]string{"heuristic"}, tt.args...)...)
			cmdtest.WantRefused(t, ran, tt.first)
			cmdtest.Unchanged(t, "the user's files", before)
			if left, _ := filepath.Glob(filepath.Join(u.Tmp, "*")); len(left) > 0 {
				t.Errorf("left in TMPDIR: %v", left)
			}
		})
	}
}

// A model that is there but does not load is the model's failure, as the
// help says: an ERROR result, exit 3, written to every output the user
// asked for, not a usage error that writes nothing.
func TestHeuristicBrokenModelIsAnError(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
	models := t.TempDir()
	for _, name := range []string{"gfx942.tn.model", "gfx942_metadata.tn.model"} {
		if err := os.WriteFile(filepath.Join(models, name), []byte(`{"broken": true}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	junit, js := filepath.Join(out, "h.xml"), filepath.Join(out, "h.json")
	ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env(), time.Minute, "heuristic", "--model-dir", models, "--arch", "gfx942",
		"--junit", junit, "--export-json", js)
	if ran.Code != 3 {
		t.Fatalf("exit %d, want 3\nstdout: %s\nstderr: %s", ran.Code, ran.Stdout, ran.Stderr)
	}
	if !strings.Contains(ran.Stdout, "heuristic: ERROR - ") || !strings.Contains(ran.Stdout, "TunaNet metadata") {
		t.Errorf("stdout does not say the model failed:\n%s", ran.Stdout)
	}
	data, err := os.ReadFile(js)
	if err != nil || !strings.Contains(string(data), `"verdict": "ERROR"`) || !strings.Contains(string(data), `"exit_code": 3`) {
		t.Errorf("--export-json: %v\n%s", err, data)
	}
	if data, err := os.ReadFile(junit); err != nil || !strings.Contains(string(data), "<error") {
		t.Errorf("--junit: %v\n%s", err, data)
	}
}
