package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// These run the scenario commands end to end on the simulator. The naive
// deadline is 10% of the best time rather than 300%: under the race
// detector the tiled twin slows down as much as the naive one, and the
// tests must not depend on their ratio.
var testEnv = map[string]string{"MIOPEN_NAIVE_TIMEOUT": "10"}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		v, ok := testEnv[k]
		return v, ok
	}
}

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
		{"find with MIOpenDriver flags", []string{"find", "--backend", "sim", "-n", "1", "-c", "4", "-H", "9", "-W", "9", "-k", "4", "-y", "3", "-x", "3", "-u", "2", "-v", "2", "--samples", "1"}, nil, 0, "4-9-9-3x3-4-4-4-1-0x0-2x2-1x1-0-NCHW-FP32-F", ""},
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
			h := newHarness(t)
			h.f.LookupEnv = lookup(tt.env)
			code := h.run(tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, h.out, h.errOut)
			}
			if !strings.Contains(h.out.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, h.out)
			}
			if !strings.Contains(h.errOut.String(), tt.err) {
				t.Errorf("stderr lacks %q:\n%s", tt.err, h.errOut)
			}
			// A refusal does not claim a fallback it will not use.
			if tt.code == 2 && strings.Contains(h.errOut.String(), "using") {
				t.Errorf("a refusal claims a fallback:\n%s", h.errOut)
			}
			if tt.code == 2 && strings.Count(strings.TrimSpace(h.errOut.String()), "\n") > 1 {
				t.Errorf("a usage error is one line plus a hint:\n%s", h.errOut)
			}
		})
	}
}

func TestCaptureMatrixJSON(t *testing.T) {
	h := newHarness(t)
	h.f.LookupEnv = lookup(nil)
	code := h.run("capture", "--backend", "sim", "--mode=global,thread-local", "--reclaim=lazy,worker", "--problem", "naive-timeout-sim", "--samples", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, h.errOut)
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
	if err := json.Unmarshal(h.out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, h.out)
	}
	if got.Verdict != "PASS" || !strings.HasPrefix(got.Status, "Fails with --reclaim=lazy") || !strings.Contains(got.Status, "passes with --reclaim=worker") {
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
				h := newHarness(t)
				h.f.LookupEnv = lookup(env)
				code := h.run("doctor", "--backend", "sim", "--no-progress")
				if code != 2 {
					t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, h.out, h.errOut)
				}
				out := h.out.String()
				row := ""
				for _, line := range strings.Split(out, "\n") {
					if strings.Contains(line, name) && strings.Contains(line, "error:") {
						row = line
					}
				}
				if row == "" || !strings.Contains(row, value) || !strings.Contains(row, "invalid") {
					t.Errorf("no error row showing %s=%s:\n%s", name, value, out)
				}
				if strings.Contains(out+h.errOut.String(), "using") {
					t.Errorf("doctor claims a fallback:\n%s\n%s", out, h.errOut)
				}
				if !strings.Contains(h.errOut.String(), name) {
					t.Errorf("stderr does not name %s:\n%s", name, h.errOut)
				}
			})
		}
	}
}
