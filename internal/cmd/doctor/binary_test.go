package doctor

// doctor as a user runs it: the built binary in a clean environment.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
)

// A setting another command refuses, or a bad flag or config file, is
// exit 2 with the cause on stderr's first line, in every format; a
// document is written only for a setting, and then it is an ERROR whose
// exit_code is 2: never a PASS beside exit 2. The user's files stay as
// they were.
func TestDoctorBinaryBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(config, []byte("doctor:\n  dialekt: cuda\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		env      []string
		args     []string
		first    string
		document bool // a report is written: an ERROR with exit_code 2
	}{
		{"naive timeout not whole", []string{"MIOPEN_NAIVE_TIMEOUT=2.5"}, nil, `miotool: MIOPEN_NAIVE_TIMEOUT="2.5" is not a whole number`, true},
		{"naive timeout negative", []string{"MIOPEN_NAIVE_TIMEOUT=-5"}, nil, "miotool: MIOPEN_NAIVE_TIMEOUT=-5 is negative", true},
		{"find mode unknown", []string{"MIOPEN_FIND_MODE=4"}, nil, `miotool: MIOPEN_FIND_MODE="4" is not a find mode`, true},
		{"user db a file", []string{"MIOPEN_USER_DB_PATH=" + file}, nil, "miotool: MIOPEN_USER_DB_PATH=" + file + ": not a folder: find refuses it", true},
		{"user db below a file", []string{"MIOPEN_USER_DB_PATH=" + filepath.Join(file, "db")}, nil, "miotool: MIOPEN_USER_DB_PATH=" + filepath.Join(file, "db") + ": " + file + " is not a folder", true},
		{"unknown dialect", nil, []string{"--dialect", "opencl"}, `miotool: invalid argument "opencl" for "--dialect" flag`, false},
		{"unknown backend", nil, []string{"--backend", "opencl"}, `miotool: invalid argument "opencl" for "--backend" flag`, false},
		{"a config key misspelt", nil, []string{"--config", config}, "miotool: config file " + config + `: line 2: unknown key "doctor.dialekt"`, false},
	} {
		for _, format := range []string{"text", "markdown", "json"} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				before := cmdtest.Snapshot(t, file, config)
				args := append([]string{"doctor", "--format", format}, tt.args...)
				if tt.args == nil || tt.args[0] != "--backend" {
					args = append(args, "--backend", "sim")
				}
				r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir, tt.env...), time.Minute, args...)
				cmdtest.WantUsageError(t, r, tt.first)
				if strings.Contains(r.Stdout, "PASS") || strings.Contains(r.Stdout, "Passed") {
					t.Errorf("exit %d beside a document that says it passed:\n%s", r.Code, r.Stdout)
				}
				switch {
				case !tt.document && r.Stdout != "":
					t.Errorf("a refused command printed a document:\n%s", r.Stdout)
				case tt.document && format == "json":
					var doc struct {
						Verdict  string `json:"verdict"`
						ExitCode int    `json:"exit_code"`
						Summary  string `json:"summary"`
					}
					if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
						t.Fatalf("%v\n%s", err, r.Stdout)
					}
					if doc.Verdict != "ERROR" || doc.ExitCode != r.Code || !strings.HasPrefix("miotool: "+doc.Summary, tt.first) {
						t.Errorf("document %+v for exit %d", doc, r.Code)
					}
				case tt.document && !strings.Contains(r.Stdout, "ERROR"):
					t.Errorf("the %s report does not say ERROR:\n%s", format, r.Stdout)
				}
				cmdtest.Unchanged(t, tt.name, before)
			})
		}
	}
}

// A clean environment on the simulator passes, and says what find does
// with MIOPEN_FIND_MODE unset.
func TestDoctorBinaryPasses(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	r := cmdtest.RunBinary(t, bin, dir, cmdtest.Env(dir), time.Minute, "--backend", "sim", "doctor")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "doctor: PASS") {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, line := range strings.Split(r.Stdout, "\n") {
		if strings.HasPrefix(line, "MIOPEN_FIND_MODE") && (!strings.Contains(line, "NORMAL (1)") || !strings.Contains(line, "even when the find-db has a record")) {
			t.Errorf("MIOPEN_FIND_MODE row: %q", line)
		}
	}
}
