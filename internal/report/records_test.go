package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFieldKey(t *testing.T) {
	for name, want := range map[string]string{
		"reclaim":                    "reclaim",
		"end capture":                "end_capture",
		"time (ms)":                  "time_ms",
		"Pinned after find":          "pinned_after_find",
		"released after (median)":    "released_after_median",
		"wrong results":              "wrong_results",
		"  --weird--  name!":         "weird_name",
		"µs per call":                "s_per_call",
		"(?)":                        "",
		"set-up errors":              "set_up_errors",
		"already_snake_case_2":       "already_snake_case_2",
		"runs with a model replaced": "runs_with_a_model_replaced",
	} {
		if got := FieldKey(name); got != want {
			t.Errorf("FieldKey(%q) = %q, want %q", name, got, want)
		}
	}
	if got := recordKeys([]string{"a b", "A-B", "", "flag"}); strings.Join(got, ",") != "a_b,a_b_2,column_3,flag" {
		t.Errorf("recordKeys = %v", got)
	}
}

// The JSON answers jq's '.tables[0].records[] | select(.reclaim=="lazy")':
// rows as objects keyed by the columns' snake_case keys, flag included,
// details whole; counters keyed in snake_case.
func TestJSONRecordsAndCounterKeys(t *testing.T) {
	in := captureLike()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, in); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema string `json:"schema"`
		RunID  string `json:"run_id"`
		Tables []struct {
			Keys    []string         `json:"keys"`
			Records []map[string]any `json:"records"`
		} `json:"tables"`
		Counters map[string]int64 `json:"counters"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != SchemaVersion || doc.RunID == "" {
		t.Errorf("schema %q run_id %q", doc.Schema, doc.RunID)
	}
	if got := strings.Join(doc.Tables[0].Keys, ","); got != "reclaim,mode,expected,measured,end_capture,detail,differs_from_expected" {
		t.Errorf("keys %s", got)
	}
	var lazy []map[string]any
	for _, rec := range doc.Tables[0].Records {
		if rec["reclaim"] == "lazy" {
			lazy = append(lazy, rec)
		}
	}
	if len(lazy) != 1 || lazy[0]["measured"] != "FAIL" || lazy[0]["end_capture"] != 901.0 || lazy[0]["detail"] != in.Tables[0].Rows[0].Cells[5] {
		t.Errorf("select(.reclaim==\"lazy\") = %v", lazy)
	}
	if got := doc.Tables[0].Records[1]["differs_from_expected"]; got != "expected PASS" {
		t.Errorf("flag of the guarded row = %v", got)
	}
	if doc.Counters["reclaimed_by_callback"] != 2 || len(doc.Counters) != 2 {
		t.Errorf("counters %v", doc.Counters)
	}
	for key := range doc.Counters {
		if strings.ContainsAny(key, " -()") {
			t.Errorf("counter key %q is not snake_case", key)
		}
	}
	// Records follow the column order, as a reader scanning the file expects.
	if i, j := strings.Index(buf.String(), `"reclaim": "lazy"`), strings.Index(buf.String(), `"mode": "global"`); i < 0 || j < i {
		t.Errorf("record keys out of column order:\n%s", buf.String())
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := back.Counter("reclaimed by callback"); !ok || v != 2 {
		t.Errorf("counter looked up by its name after a round trip: %d, %v", v, ok)
	}
	if back.RunID != in.RunID || back.Host != in.Host || len(back.Tables[0].Rows) != 3 {
		t.Errorf("round trip: run %q host %q rows %d", back.RunID, back.Host, len(back.Tables[0].Rows))
	}
}

func TestReadJSONAcceptsVersion1(t *testing.T) {
	r, err := ReadJSON(strings.NewReader(`{"schema":"miotool/result/v1","check":"x","verdict":"FAIL","counters":{"wrong results":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Counter("wrong_results"); v != 3 || r.Verdict != Fail {
		t.Errorf("v1 read as %+v", r)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil || !strings.Contains(buf.String(), `"schema": "`+SchemaVersion+`"`) {
		t.Errorf("a v1 result is written as %s: %v\n%s", SchemaVersion, err, buf.String())
	}
}

func TestNewRunIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := New("x", "", time.Time{}).RunID
		if len(id) != 26 || seen[id] {
			t.Fatalf("run id %q is short or repeated", id)
		}
		seen[id] = true
	}
}

// A cell written for people with a value for machines (a runtime's status,
// "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)") is that value in the
// records, the whole column a number (null where a row has none), in
// every table alike; the rows keep the text and the values, and a result
// read back writes the same records.
func TestCodeCellsAreNumbersInTheRecords(t *testing.T) {
	r := New("capture", "miotool capture", time.Time{})
	tab := r.AddTable("capture", "reclaim", "end capture")
	tab.AddCells("", TextCell("lazy"), CodeCell("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", 901))
	tab.AddCells("", TextCell("worker"), CodeCell("CUDA_SUCCESS", 0))
	tab.AddRow("guarded", "never ended")
	tab.AddRow("poller", "7")
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tables []struct {
			Rows []struct {
				Cells  []string `json:"cells"`
				Values []any    `json:"values"`
			} `json:"rows"`
			Records []map[string]any `json:"records"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, rec := range doc.Tables[0].Records {
		got = append(got, rec["end_capture"])
	}
	if want := []any{901.0, 0.0, nil, 7.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("end_capture records %v, want %v\n%s", got, want, buf.String())
	}
	rows := doc.Tables[0].Rows
	if rows[0].Cells[1] != "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)" || len(rows[0].Values) != 2 || rows[0].Values[1] != 901.0 || rows[2].Values != nil {
		t.Errorf("rows %+v", rows)
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteJSON(&again, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Errorf("read back, the result writes otherwise:\n%s\n---\n%s", buf.String(), again.String())
	}
	// A value that is no number is refused on reading.
	bad := strings.Replace(buf.String(), `"values": [
            null,
            901`, `"values": [
            null,
            "901"`, 1)
	if _, err := ReadJSON(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `tables[0].rows[0].values[1]: "901" is neither a number nor null`) {
		t.Errorf("a string value: %v", err)
	}
	if Millis(43410*time.Microsecond) != "43.410" {
		t.Errorf("Millis %q", Millis(43410*time.Microsecond))
	}
}

// A miotool/result/v3 or miotool/suite/v3 file, whose status a command
// worded in place of the verdict's word, reads with that status as the
// detail where it says more than the verdict, and is written as v4.
func TestReadsVersion3Statuses(t *testing.T) {
	for _, tc := range []struct{ status, detail, checklist string }{
		{"Fails with --reclaim=lazy (global), passes with --reclaim=worker", "Fails with --reclaim=lazy (global), passes with --reclaim=worker",
			"Passed (24/24): Fails with --reclaim=lazy (global), passes with --reclaim=worker"},
		{"Passed (24/24)", "", "Passed (24/24)"},
		{"Passed for the 200 of 243 cells compared", "Passed for the 200 of 243 cells compared", "Passed (24/24): Passed for the 200 of 243 cells compared"},
	} {
		doc := `{"schema":"miotool/result/v3","check":"capture","verdict":"PASS","exit_code":0,"status":"` + tc.status + `","cases":{"passed":24,"total":24}}`
		r, err := ReadJSON(strings.NewReader(doc))
		if err != nil || r.Detail != tc.detail || r.ChecklistStatus() != tc.checklist {
			t.Errorf("v3 status %q: %v, detail %q, status %q", tc.status, err, r.Detail, r.ChecklistStatus())
		}
	}
	suite := `{"schema":"miotool/suite/v3","suite":"s","hosts":["n1"],"checks":[{"name":"m","command":"miotool capture","expect":"PASS",
		"runs":[{"host":"n1","iteration":1,"order":1,"verdict":"PASS","exit_code":0,"status":"Fails with --reclaim=lazy (global), passes with --reclaim=worker"}]}]}`
	s, err := ReadSuiteJSON(strings.NewReader(suite))
	if err != nil || s.StatusOf(s.Checks[0]) != "Passed (1/1 run): Fails with --reclaim=lazy (global), passes with --reclaim=worker" {
		t.Errorf("v3 suite: %v, %q", err, s.StatusOf(s.Checks[0]))
	}
}
