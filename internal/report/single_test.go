package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// singleCapture is `miotool capture --format json` as a file holds it.
func singleCapture(t *testing.T, host string, v Verdict) *bytes.Buffer {
	t.Helper()
	r := New("capture", "miotool capture --mode=global --reclaim=worker --format json", suiteStart)
	r.Host, r.Backend, r.Device, r.Detail = host, "cuda", h200, "Passes with --reclaim=worker"
	r.AddTable("capture", "reclaim", "measured").AddRow("worker", string(v))
	r.Finish(v, "graph output correct", suiteStart.Add(400*time.Millisecond))
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// report merge takes a single check's result as a suite of one check on
// its host, beside suite results.
func TestMergeAcceptsSingleResults(t *testing.T) {
	single, err := ReadSuiteJSON(singleCapture(t, "node2", Pass))
	if err != nil {
		t.Fatalf("a single check's result is refused: %v", err)
	}
	if len(single.Checks) != 1 || single.Suite != "capture" || strings.Join(single.Hosts, ",") != "node2" || single.RunID == "" {
		t.Fatalf("as a suite: %+v", single)
	}
	c := single.Checks[0]
	if c.Command != "miotool capture --mode=global --reclaim=worker" || c.Expect != Pass || len(c.Runs) != 1 ||
		c.Runs[0].Host != "node2" || c.Runs[0].Device != h200 || c.Runs[0].Duration != 400*time.Millisecond || c.Status() != "Passed (1/1 run): Passes with --reclaim=worker" {
		t.Errorf("its check: %+v, status %q", c, c.Status())
	}
	suite := hostSuite("node1", h200, Pass)
	m, err := MergeSuites([]*SuiteResult{suite, single}, []string{"node1.json", "capture.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Checks) != 2 || m.Suite != "pr12265 + capture" || strings.Join(m.Hosts, ",") != "node1,node2" || m.Verdict() != Pass {
		t.Errorf("merged: suite %q hosts %v, %d rows, verdict %s", m.Suite, m.Hosts, len(m.Checks), m.Verdict())
	}
	// The same result given twice is refused by its run id, as a suite is.
	again, _ := ReadSuiteJSON(singleCapture(t, "node2", Pass))
	again.RunID, again.MergedRuns = single.RunID, nil
	if _, err := MergeSuites([]*SuiteResult{single, again}, []string{"a.json", "b.json"}); err == nil || !strings.Contains(err.Error(), "the same suite run") {
		t.Errorf("the same single result twice: %v", err)
	}
	// A failed check is a row that did not meet its expectation.
	failed, err := ReadSuiteJSON(singleCapture(t, "node3", Fail))
	if err != nil {
		t.Fatal(err)
	}
	if failed.Verdict() != Fail || failed.Checks[0].Status() != "Failed (1/1 run failed; expected PASS): Passes with --reclaim=worker" {
		t.Errorf("failed single result: %s %q", failed.Verdict(), failed.Checks[0].Status())
	}
	// Without a host, it takes its file's name, as a suite's runs do.
	hostless, _ := ReadSuiteJSON(singleCapture(t, "", Pass))
	m, err = MergeSuites([]*SuiteResult{suite, hostless}, []string{"node1.json", "results/gpu-b.json"})
	if err != nil || strings.Join(m.Hosts, ",") != "node1,gpu-b" {
		t.Errorf("hostless single result: %v, hosts %v", err, m.Hosts)
	}
}

// In the JSON, the records of a numeric column are numbers (jq's
// select(.pinned > 2) works), blanks in it null; other columns and the
// row cells stay strings, and the result reads back unchanged.
func TestJSONNumericCells(t *testing.T) {
	r := New("replay", "miotool replay", time.Time{})
	tab := r.AddTable("replay", "reclaim", "pinned", "ratio", "mixed", "code")
	tab.FlagColumn = "differs"
	tab.AddRow("lazy", "3", "0.50", "12", "007")
	tab.AddFlaggedRow("1", "worker", "-", "-1.25e3", "n/a", "1")
	tab.AddRow("poller", "", "2", "7", "2")
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema string `json:"schema"`
		Tables []struct {
			Rows []struct {
				Cells []any `json:"cells"`
			} `json:"rows"`
			Records []map[string]any `json:"records"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != SchemaVersion {
		t.Errorf("schema %q", doc.Schema)
	}
	recs := doc.Tables[0].Records
	want := []map[string]any{
		{"reclaim": "lazy", "pinned": 3.0, "ratio": 0.5, "mixed": "12", "code": "007", "differs": ""},
		{"reclaim": "worker", "pinned": nil, "ratio": -1250.0, "mixed": "n/a", "code": "1", "differs": "1"},
		{"reclaim": "poller", "pinned": nil, "ratio": 2.0, "mixed": "7", "code": "2", "differs": ""},
	}
	for i := range want {
		for k, v := range want[i] {
			if got, ok := recs[i][k]; !ok || got != v {
				t.Errorf("record %d %s = %#v, want %#v", i, k, got, v)
			}
		}
	}
	if !strings.Contains(buf.String(), `"ratio": 0.50`) {
		t.Errorf("a number is not written as its cell's text:\n%s", buf.String())
	}
	for _, row := range doc.Tables[0].Rows {
		for _, cell := range row.Cells {
			if _, ok := cell.(string); !ok {
				t.Errorf("row cell %#v is not a string", cell)
			}
		}
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Tables[0].Rows[1].Cells; strings.Join(got, ",") != "worker,-,-1.25e3,n/a,1" {
		t.Errorf("read back %q", got)
	}
	for _, old := range []string{"miotool/result/v1", "miotool/result/v2"} {
		if _, err := ReadJSON(strings.NewReader(`{"schema":"` + old + `","check":"x","verdict":"PASS"}`)); err != nil {
			t.Errorf("%s: %v", old, err)
		}
	}
}

// A merge of single checks' results, which do not record the build that
// made them, writes no miotool version rather than an empty one, at the
// top and in each merged run.
func TestMergeOfSingleResultsWritesNoEmptyVersion(t *testing.T) {
	a, err := ReadSuiteJSON(singleCapture(t, "node1", Pass))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadSuiteJSON(singleCapture(t, "node2", Pass))
	if err != nil {
		t.Fatal(err)
	}
	m, err := MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSuiteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `"miotool"`) || strings.Contains(buf.String(), `"version": ""`) {
		t.Errorf("an unknown version is written:\n%s", buf.String())
	}
	// A known one is kept.
	a.Tool, b.Tool = Tool{Version: "1.2.3"}, Tool{Version: "1.2.3"}
	a.RunID, b.RunID = NewRunID(), NewRunID()
	m, err = MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := WriteSuiteJSON(&buf, m); err != nil || !strings.Contains(buf.String(), `"miotool": {`) {
		t.Errorf("a known version is lost: %v\n%s", err, buf.String())
	}
}
