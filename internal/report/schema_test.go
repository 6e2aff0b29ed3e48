package report

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/report/reporttest"
)

// schemaDocs are a document of every kind miotool writes: single checks
// of every verdict (a matrix with code cells, one counted in cells, one
// interrupted with its progress, a shard of a repeat), a suite, an
// interrupted suite, a shard of a suite, a merge of two hosts, a merge of
// single results, and a merge missing a shard.
func schemaDocs(t *testing.T) map[string][]byte {
	t.Helper()
	docs := map[string][]byte{}
	result := func(name string, r *Result) {
		var buf bytes.Buffer
		if err := WriteJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		docs[name] = buf.Bytes()
	}
	suite := func(name string, s *SuiteResult) {
		var buf bytes.Buffer
		if err := WriteSuiteJSON(&buf, s); err != nil {
			t.Fatal(err)
		}
		docs[name] = buf.Bytes()
	}
	result("a single check (rules, FAIL)", sample())
	matrix := captureLike()
	matrix.Cases, matrix.Detail = Cases{Passed: 24, Total: 24}, "fails with --reclaim=lazy (global), passes with --reclaim=worker"
	codes := matrix.AddTable("end of each capture", "reclaim", "end capture", "wall time (ms)")
	codes.AddCells("", TextCell("lazy"), CodeCell("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", 901), TextCell(Millis(43410*time.Microsecond)))
	codes.AddCells("", TextCell("worker"), CodeCell("CUDA_SUCCESS", 0), TextCell("-"))
	result("a matrix (capture, PASS)", matrix)
	for _, v := range []Verdict{Skip, Error} {
		r := New("doctor", "miotool doctor", suiteStart)
		r.Finish(v, "no GPU runtime loaded", suiteStart.Add(time.Millisecond))
		result("a single check ("+string(v)+")", r)
	}
	stopped := New("rules", "miotool rules --dialect cuda", suiteStart)
	stopped.Progress = Progress{Finished: 120, Planned: 243, Unit: "cells"}
	stopped.Finish(Interrupted, "interrupted by SIGTERM", suiteStart.Add(time.Second))
	stopped.ExitStatus = ExitTerminated
	result("a single check (INTERRUPTED by SIGTERM)", stopped)
	usage := New("doctor", "miotool doctor", suiteStart)
	usage.Finish(Error, "unknown key", suiteStart)
	usage.ExitStatus = ExitUsage
	result("a single check (ERROR, a usage error)", usage)
	repeat := New("repeat", "miotool repeat --runs 20 --shard 1/2", suiteStart)
	repeat.Cases, repeat.Shard = Cases{Passed: 10, Total: 10, Unit: "runs"}, &Shard{Index: 1, Count: 2, Split: ShardRuns}
	repeat.Finish(Pass, "10 of 10 runs passed", suiteStart.Add(time.Minute))
	result("a shard of a repeat", repeat)

	suite("a suite", sampleSuite())
	suite("an interrupted suite", nineChecks(4, true))
	shards := shardsOf(oneHostRun(), 3)
	suite("a shard of a suite", shards[0])
	m, err := MergeSuites([]*SuiteResult{hostSuite("node1", h200, Pass), hostSuite("node2", mi300, Fail)}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	suite("a merge of two hosts", m)
	singles := []*SuiteResult{}
	for _, host := range []string{"node1", "node2"} {
		s, err := ReadSuiteJSON(singleCapture(t, host, Pass))
		if err != nil {
			t.Fatal(err)
		}
		singles = append(singles, s)
	}
	m, err = MergeSuites(singles, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	suite("a merge of single results", m)
	m, err = MergeSuitesWith([]*SuiteResult{shards[0], shards[2]}, []string{"1.json", "3.json"}, MergeOptions{TakeMissingShards: true})
	if err != nil {
		t.Fatal(err)
	}
	suite("a merge missing a shard", m)
	suite("a suite pinned to devices", pinnedSuite("node1", "0", "GPU-5e6f7a8b"))
	return docs
}

// Every kind of JSON document miotool writes holds to the schema in
// docs/miotool.schema.json.
func TestEveryDocumentHoldsToTheSchema(t *testing.T) {
	for name, doc := range schemaDocs(t) {
		reporttest.Hold(t, name, doc)
	}
}

// The schema says what each field means and holds a document to it: a
// field of another type or meaning than the one documented is refused.
func TestTheSchemaRefusesOtherMeanings(t *testing.T) {
	schema := reporttest.Load(t)
	edit := func(t *testing.T, doc []byte, change func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		change(m)
		out, _ := json.Marshal(m)
		return out
	}
	docs := schemaDocs(t)
	record := func(m map[string]any) map[string]any {
		tables := m["tables"].([]any)
		return tables[len(tables)-1].(map[string]any)["records"].([]any)[0].(map[string]any)
	}
	for _, tc := range []struct {
		name, doc string
		change    func(map[string]any)
		want      string
	}{
		{"end_capture as text", "a matrix (capture, PASS)", func(m map[string]any) {
			record(m)["end_capture"] = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)"
		}, "/end_capture: a string is not integer or null"},
		{"end_capture_returns", "a matrix (capture, PASS)", func(m map[string]any) { record(m)["end_capture_returns"] = 901 },
			"/end_capture_returns: not allowed here"},
		{"a duration as text", "a matrix (capture, PASS)", func(m map[string]any) { record(m)["released_after"] = "43.41ms" },
			`/released_after: "43.41ms" matches none of anyOf`},
		{"a _ms key as text", "a matrix (capture, PASS)", func(m map[string]any) { record(m)["wall_time_ms"] = "43.41" },
			"/wall_time_ms: a string is not number or null"},
		{"exit_status", "a single check (rules, FAIL)", func(m map[string]any) {
			m["counters"].(map[string]any)["exit_status"] = 1
		}, "/counters/exit_status: not allowed here"},
		{"PASS exiting 1", "a single check (rules, FAIL)", func(m map[string]any) { m["verdict"] = "PASS" },
			"/exit_code: 1 is not 0"},
		{"a status of another word", "a single check (rules, FAIL)", func(m map[string]any) { m["status"] = "Unexpected (expected PASS): FAIL" },
			`/status: "Unexpected (expected PASS): FAIL" does not match`},
		{"an empty miotool version", "a suite", func(m map[string]any) { m["miotool"] = map[string]any{"version": ""} },
			`/miotool/version: "" is shorter than 1`},
		{"a negative duration", "a suite", func(m map[string]any) { m["duration_ms"] = -9.2e12 }, "/duration_ms: -9200000000000 is below 0"},
		{"an undocumented field", "a suite", func(m map[string]any) { m["status"] = "x" }, `"status" is not a field of this object`},
		{"a run's contradiction", "a suite", func(m map[string]any) {
			m["checks"].([]any)[0].(map[string]any)["runs"].([]any)[0].(map[string]any)["exit_code"] = 1
		}, "/checks/0/runs/0/exit_code: 1 is not 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, err := schema.Validate(edit(t, docs[tc.doc], tc.change))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(errs, "\n"), tc.want) {
				t.Errorf("errors %q, want one containing %q", errs, tc.want)
			}
		})
	}
}

// The schema's validator answers as the reference implementation does
// (Python's jsonschema, draft 2020-12), on every document and on a
// broken copy of each; the test skips where that is not installed.
func TestTheSchemaValidatorAgreesWithJSONSchema(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed, so jsonschema cannot check the validator")
	}
	if err := exec.Command(python, "-c", "import jsonschema").Run(); err != nil {
		t.Skip("Python's jsonschema is not installed (pip install jsonschema), so it cannot check the validator")
	}
	schemaFile := reporttest.RepoFile(t, reporttest.SchemaPath)
	schema := reporttest.Load(t)
	dir := t.TempDir()
	var files []string
	want := map[string]bool{}
	for name, doc := range schemaDocs(t) {
		broken := bytes.Replace(doc, []byte(`"exit_code": `), []byte(`"exit_code": 1`), 1)
		for i, d := range [][]byte{doc, broken} {
			errs, err := schema.Validate(d)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(dir, strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "").Replace(name)+[]string{".json", ".broken.json"}[i])
			if err := os.WriteFile(f, d, 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			want[f] = len(errs) == 0
		}
	}
	const script = `import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
for f in sys.argv[2:]:
    print(f, "valid" if v.is_valid(json.load(open(f))) else "invalid")`
	out, err := exec.Command(python, append([]string{"-c", script, schemaFile}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("jsonschema: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f, verdict, _ := strings.Cut(line, " ")
		got[f] = verdict == "valid"
	}
	for _, f := range files {
		if got[f] != want[f] {
			t.Errorf("%s: jsonschema says valid=%v, the validator valid=%v", filepath.Base(f), got[f], want[f])
		}
	}
}
