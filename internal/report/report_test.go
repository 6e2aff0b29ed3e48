package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// sample is a result with every part filled: two tables (one with a
// flagged row and a pipe in a cell), notes and counters.
func sample() *Result {
	start := time.Date(2026, 11, 29, 18, 30, 0, 0, time.UTC)
	r := New("rules", "miotool rules --dialect cuda --expect configs/rules/h200-cuda.yaml", start)
	r.RunID, r.Host = "R7QK2M4XW3N5P6Y8Z9A2B3C4D5", "node1"
	r.Backend = "cuda"
	r.BackendReason = "requested with --backend cuda"
	r.Device = Device{Name: "NVIDIA H200", Arch: "sm_90", Description: "NVIDIA H200 (sm_90, 132 CUs, cuda)"}
	t := r.AddTable("Capture rules", "action", "capture mode", "acting thread", "action returns", "end capture")
	t.FlagColumn = "compared with expected"
	unsupported, invalidated, success := CodeCell("STREAM_CAPTURE_UNSUPPORTED", 900), CodeCell("STREAM_CAPTURE_INVALIDATED", 901), CodeCell("SUCCESS", 0)
	t.AddCells("", TextCell("cuStreamQuery(B)"), TextCell("global"), TextCell("same"), unsupported, invalidated)
	t.AddCells("differs: expected NOT_READY (600) / SUCCESS (0)", TextCell("cuStreamQuery(B)"), TextCell("global"), TextCell("other, relaxed{}"), unsupported, invalidated)
	t.AddCells("", TextCell("a|b"), TextCell("relaxed"), TextCell("same"), success, success)
	s := r.AddTable("Setup", "key", "value")
	s.AddRow("spin (ms)", Millis(300*time.Millisecond))
	r.Note("spin kernel: %s", "300ms")
	r.Note("a note\nover two lines")
	r.Count("cells", 3)
	r.Count("differences", 1)
	r.Finish(Fail, "1 of 3 cells differs from configs/rules/h200-cuda.yaml", start.Add(73500*time.Millisecond))
	return r
}

func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		opts   Options
	}{
		{"text_plain", Text, Options{}},
		{"text_tty", Text, Options{TTY: true}},
		{"text_tty_color", Text, Options{TTY: true, Color: true}},
		{"markdown", Markdown, Options{}},
		{"json", JSON, Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, tc.format, sample(), tc.opts); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), buf.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestTextPlainHasNoColourOrBoxLines(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteText(&buf, sample(), Options{TTY: false, Color: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "\x1b[") {
		t.Error("plain text output contains an ANSI escape")
	}
	if strings.ContainsAny(out, "│─┌") {
		t.Error("plain text output contains box-drawing lines")
	}
	for line := range strings.Lines(out) {
		if strings.HasSuffix(strings.TrimSuffix(line, "\n"), " ") {
			t.Errorf("line has trailing blanks: %q", line)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	in := sample()
	if err := WriteJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(buf.Bytes(), &generic); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	for _, key := range []string{"schema", "check", "command", "backend", "backend_reason", "device", "verdict", "exit_code", "summary", "started", "duration_ms", "tables", "notes", "counters"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("JSON lacks field %q", key)
		}
	}
	if generic["exit_code"] != float64(1) {
		t.Errorf("exit_code = %v, want 1 for FAIL", generic["exit_code"])
	}
	out, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != in.Verdict || out.Command != in.Command || out.Device != in.Device || !out.Started.Equal(in.Started) || out.Duration != in.Duration {
		t.Errorf("round trip changed the header: got %+v", out)
	}
	if len(out.Tables) != 2 || out.Tables[0].Rows[1].Flag != in.Tables[0].Rows[1].Flag || out.Tables[0].FlagColumn != in.Tables[0].FlagColumn {
		t.Errorf("round trip changed the tables: %+v", out.Tables)
	}
	if v, ok := out.Counter("differences"); !ok || v != 1 {
		t.Errorf("counter differences = %d, %v", v, ok)
	}
}

func TestEmptyResultJSONHasStableArrays(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, New("doctor", "miotool doctor", time.Time{})); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{`"tables": []`, `"notes": []`, `"counters": {}`} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON of an empty result lacks %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, `"started"`) {
		t.Error("a zero start time is written")
	}
}

func TestReadJSONRejectsOtherSchemas(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"schema":"other/v9","verdict":"PASS"}`))
	if err == nil || !strings.Contains(err.Error(), "other/v9") {
		t.Fatalf("err = %v, want one naming the schema", err)
	}
}

func TestVerdicts(t *testing.T) {
	cases := []struct {
		v      Verdict
		code   int
		status string
	}{
		{Pass, 0, "Passed"},
		{Fail, 1, "Failed"},
		{Error, 3, "Error"},
		{Skip, 4, "Skipped"},
		{Verdict("bogus"), 3, "Error"},
	}
	for _, tc := range cases {
		if got := tc.v.ExitCode(); got != tc.code {
			t.Errorf("%s.ExitCode() = %d, want %d", tc.v, got, tc.code)
		}
		if got := tc.v.Status(); got != tc.status {
			t.Errorf("%s.Status() = %q, want %q", tc.v, got, tc.status)
		}
	}
	if got := Worst(Pass, Skip, Fail); got != Fail {
		t.Errorf("Worst(PASS, SKIP, FAIL) = %s", got)
	}
	if got := Worst(Fail, Error, Pass); got != Error {
		t.Errorf("Worst(FAIL, ERROR, PASS) = %s", got)
	}
	if got := Worst(); got != Pass {
		t.Errorf("Worst() = %s", got)
	}
	if _, err := ParseVerdict("maybe"); err == nil {
		t.Error("ParseVerdict accepted maybe")
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"text": Text, "Markdown": Markdown, "md": Markdown, "json": JSON} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Errorf("ParseFormat(yaml) err = %v", err)
	}
	if err := Render(&bytes.Buffer{}, Format("yaml"), sample(), Options{}); err == nil {
		t.Error("Render accepted an unknown format")
	}
}

func TestMarkdownChecklistOneRowPerResult(t *testing.T) {
	a := sample()
	b := New("doctor", "miotool doctor", time.Time{})
	b.Device = Device{Name: "miotool simulated device (cuda rules)", Arch: "sim"}
	b.Finish(Pass, "", time.Time{})
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, a, b); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| Test   | Command ",
		"| rules  | `miotool rules --dialect cuda --expect configs/rules/h200-cuda.yaml` | NVIDIA H200 (sm_90)",
		"| Failed (1/1 run failed) |",
		"| doctor | `miotool doctor` ",
		"| miotool simulated device (cuda rules) (sim) | Passed (1/1 run)        |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestMarkdownEscapesPipes(t *testing.T) {
	r := New("x", "miotool x --filter 'a|b'", time.Time{})
	r.AddTable("t", "c").AddRow("left|right")
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `left\|right`) || !strings.Contains(out, `miotool x --filter 'a\|b'`) {
		t.Errorf("pipes not escaped:\n%s", out)
	}
}

func TestCountKeepsOrderAndUpdates(t *testing.T) {
	r := New("x", "", time.Time{})
	r.Count("b", 1)
	r.Count("a", 2)
	r.Count("b", 5)
	if len(r.Counters) != 2 || r.Counters[0] != (Counter{"b", 5}) || r.Counters[1] != (Counter{"a", 2}) {
		t.Errorf("counters = %+v", r.Counters)
	}
}

func TestDurationText(t *testing.T) {
	cases := map[time.Duration]string{
		812 * time.Microsecond:  "812µs",
		43 * time.Millisecond:   "43ms",
		7310 * time.Millisecond: "7.31s",
		125 * time.Second:       "2m5s",
	}
	for d, want := range cases {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %q, want %q", d, got, want)
		}
	}
}

// A table filled after later tables were added still lands in the result.
func TestTableFilledAfterLaterTablesAreAdded(t *testing.T) {
	r := New("x", "", time.Time{})
	first := r.AddTable("first", "c")
	for i := 0; i < 10; i++ {
		r.AddTable("more", "c")
	}
	first.AddRow("late row")
	if len(r.Tables[0].Rows) != 1 || r.Tables[0].Rows[0].Cells[0] != "late row" {
		t.Fatalf("the first table lost its row: %+v", r.Tables[0])
	}
}
