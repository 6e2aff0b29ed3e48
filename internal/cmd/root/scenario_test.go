package root

import (
	"encoding/json"
	"strings"
	"testing"

	"miotool/internal/cmd/cmdtest"
)

// These run the scenario commands end to end on the simulator, in
// cmdtest.ScenarioEnv.

func TestScenarioCommandsExitCodes(t *testing.T) {
	small := []string{"--backend", "sim", "--problem", "naive-timeout-sim", "--samples", "1", "--no-progress"}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{"capture lazy global fails with 901", append([]string{"capture", "--mode=global", "--reclaim=lazy"}, small...), nil, 1, "STREAM_CAPTURE_INVALIDATED (901)", ""},
		{"capture worker passes", append([]string{"capture", "--mode=global", "--reclaim=worker"}, small...), nil, 0, "PASS", ""},
		{"capture hip dialect names", append([]string{"capture", "--mode=thread-local", "--reclaim=lazy", "--dialect", "hip"}, small...), nil, 1, "hipErrorStreamCaptureInvalidated (901)", ""},
		{"find passes", append([]string{"find"}, small...), nil, 0, "timed out and abandoned", ""},
		{"find with MIOpenDriver flags", []string{"find", "--backend", "sim", "-n", "1", "-c", "4", "-H", "9", "-W", "9", "-k", "4", "-y", "3", "-x", "3", "-p", "0", "-q", "0", "-u", "2", "-v", "2", "--samples", "1"}, nil, 0, "4-9-9-3x3-4-4-4-1-0x0-2x2-1x1-0-NCHW-FP32-F", ""},
		{"invalid problem names the field", []string{"find", "--backend", "sim", "-u", "0"}, nil, 2, "", "stride_h"},
		{"unknown problem", []string{"find", "--backend", "sim", "--problem", "nope"}, nil, 2, "", "no problem named"},
		{"unknown mode", []string{"capture", "--backend", "sim", "--mode", "sideways"}, nil, 2, "", "--mode"},
		{"unparseable naive timeout", []string{"find", "--backend", "sim"}, map[string]string{"MIOPEN_NAIVE_TIMEOUT": "abc"}, 2, "", "MIOPEN_NAIVE_TIMEOUT"},
		{"negative naive timeout", []string{"capture", "--backend", "sim"}, map[string]string{"MIOPEN_NAIVE_TIMEOUT": "-5"}, 2, "", "negative"},
		{"huge naive timeout", []string{"replay", "--backend", "sim"}, map[string]string{"MIOPEN_NAIVE_TIMEOUT": "1e99"}, 2, "", `MIOPEN_NAIVE_TIMEOUT="1e99" is not a whole number`},
		{"unknown find mode", []string{"find", "--backend", "sim"}, map[string]string{"MIOPEN_FIND_MODE": "bogus"}, 2, "", `MIOPEN_FIND_MODE="bogus" is not a find mode`},
		{"bad replay deadline", []string{"replay", "--backend", "sim", "--deadline", "0s"}, nil, 2, "", "--deadline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := cmdtest.New(t)
			h.F.LookupEnv = cmdtest.ScenarioEnv(tt.env)
			code := h.Run(New, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, h.Out, h.ErrOut)
			}
			if !strings.Contains(h.Out.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, h.Out)
			}
			if !strings.Contains(h.ErrOut.String(), tt.err) {
				t.Errorf("stderr lacks %q:\n%s", tt.err, h.ErrOut)
			}
			// A refusal does not claim a fallback it will not use.
			if tt.code == 2 && strings.Contains(h.ErrOut.String(), "using") {
				t.Errorf("a refusal claims a fallback:\n%s", h.ErrOut)
			}
			if tt.code == 2 && strings.Count(strings.TrimSpace(h.ErrOut.String()), "\n") > 1 {
				t.Errorf("a usage error is one line plus a hint:\n%s", h.ErrOut)
			}
		})
	}
}

func TestCaptureMatrixJSON(t *testing.T) {
	h := cmdtest.New(t)
	h.F.LookupEnv = cmdtest.ScenarioEnv(nil)
	code := h.Run(New, "capture", "--backend", "sim", "--mode=global,thread-local", "--reclaim=lazy,worker", "--problem", "naive-timeout-sim", "--samples", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	var got struct {
		Check   string `json:"check"`
		Verdict string `json:"verdict"`
		Status  string `json:"status"`
		Tables  []struct {
			Rows []struct {
				Cells []string `json:"cells"`
				Flag  string   `json:"flag"`
			} `json:"rows"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(h.Out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, h.Out)
	}
	if got.Verdict != "PASS" || !strings.HasPrefix(got.Status, "Passed (8/8): Fails with --reclaim=lazy") || !strings.Contains(got.Status, "passes with --reclaim=worker") {
		t.Errorf("verdict %q status %q", got.Verdict, got.Status)
	}
	// 2 modes x 2 policies x both variants (a matrix run covers both).
	if len(got.Tables) == 0 || len(got.Tables[0].Rows) != 8 {
		t.Fatalf("want 8 rows: %+v", got.Tables)
	}
}

// doctor shows a runtime variable the scenario commands refuse as an
// error, with the environment's own value, and exits 2 after its report.
func TestDoctorRefusesWhatTheCommandsRefuse(t *testing.T) {
	for _, env := range []map[string]string{
		{"MIOPEN_NAIVE_TIMEOUT": "abc"},
		{"MIOPEN_NAIVE_TIMEOUT": "-5"},
		{"MIOPEN_NAIVE_TIMEOUT": "1e99"},
		{"MIOPEN_FIND_MODE": "bogus"},
	} {
		for name, value := range env {
			t.Run(name+"="+value, func(t *testing.T) {
				h := cmdtest.New(t)
				h.F.LookupEnv = cmdtest.ScenarioEnv(env)
				code := h.Run(New, "doctor", "--backend", "sim", "--no-progress")
				if code != 2 {
					t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, h.Out, h.ErrOut)
				}
				out := h.Out.String()
				row := ""
				for _, line := range strings.Split(out, "\n") {
					if strings.Contains(line, name) && strings.Contains(line, "error:") {
						row = line
					}
				}
				if row == "" || !strings.Contains(row, value) || !strings.Contains(row, "invalid") {
					t.Errorf("no error row showing %s=%s:\n%s", name, value, out)
				}
				if strings.Contains(out+h.ErrOut.String(), "using") {
					t.Errorf("doctor claims a fallback:\n%s\n%s", out, h.ErrOut)
				}
				if !strings.Contains(h.ErrOut.String(), name) {
					t.Errorf("stderr does not name %s:\n%s", name, h.ErrOut)
				}
			})
		}
	}
}
