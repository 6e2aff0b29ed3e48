package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// An input's interruption survives the merge: merged with results that
// finished, an interrupted suite result makes the merge INTERRUPTED (exit
// 130) with the file and what stopped it named, in the summary, the text
// and Markdown headlines, the JSON and the JUnit properties alike; never
// PASS. The merge reads its inputs from their JSON files, so they go
// through JSON here too.
func TestMergeKeepsAnInputsInterruption(t *testing.T) {
	done := hostSuite("node1", h200, Pass)
	stopped := hostSuite("node2", h200, Pass)
	stopped.Interrupted = "interrupted by SIGINT"
	twice := hostSuite("node3", h200, Pass)
	twice.Interrupted = "terminated by SIGTERM"

	for _, tc := range []struct {
		name    string
		inputs  []*SuiteResult
		sources []string
		want    string
	}{
		{"interrupted last", []*SuiteResult{done, stopped}, []string{"node1.json", "node2.json"}, "node2.json: interrupted by SIGINT"},
		{"interrupted first", []*SuiteResult{stopped, done}, []string{"node2.json", "node1.json"}, "node2.json: interrupted by SIGINT"},
		{"both interrupted", []*SuiteResult{stopped, done, twice}, []string{"node2.json", "node1.json", "node3.json"},
			"node2.json: interrupted by SIGINT; node3.json: terminated by SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inputs []*SuiteResult
			for _, in := range tc.inputs {
				inputs = append(inputs, roundTrip(t, in))
			}
			m, err := MergeSuites(inputs, tc.sources)
			if err != nil {
				t.Fatal(err)
			}
			if m.Interrupted != tc.want {
				t.Errorf("merged interruption %q, want %q", m.Interrupted, tc.want)
			}
			if v, code := m.Verdict(), m.ExitCode(); v != Interrupted || code != ExitInterrupted {
				t.Errorf("merged verdict %s, exit %d; want %s, exit %d", v, code, Interrupted, ExitInterrupted)
			}
			if s := m.Summary(); !strings.HasPrefix(s, tc.want+" before the suite finished: ") {
				t.Errorf("summary %q does not start with what stopped the suite", s)
			}

			for _, f := range []Format{Text, Markdown} {
				var out bytes.Buffer
				if err := RenderSuite(&out, f, m, Options{}); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out.String(), "INTERRUPTED") || !strings.Contains(out.String(), tc.want) {
					t.Errorf("%s output does not say the merge was interrupted by %q:\n%s", f, tc.want, out.String())
				}
			}

			var js bytes.Buffer
			if err := WriteSuiteJSON(&js, m); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Verdict     string `json:"verdict"`
				Interrupted string `json:"interrupted"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Verdict != string(Interrupted) || doc.Interrupted != tc.want {
				t.Errorf("JSON verdict %q, interrupted %q; want %q, %q", doc.Verdict, doc.Interrupted, Interrupted, tc.want)
			}
			if back := roundTrip(t, m); back.Verdict() != Interrupted {
				t.Errorf("the merged file read back is %s", back.Verdict())
			}

			var ju bytes.Buffer
			if err := WriteJUnit(&ju, m); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ju.String(), `value="INTERRUPTED"`) {
				t.Errorf("JUnit does not carry the INTERRUPTED verdict:\n%s", ju.String())
			}
		})
	}
}

// An input that miotool itself failed while it ran is an ERROR, and so is
// the merge that holds it: its checks' passes do not make it a PASS.
func TestMergeKeepsAnInputsFailure(t *testing.T) {
	failed := hostSuite("node2", h200, Pass)
	failed.Failure = "the scratch find-db cannot be created: no space left on device"
	m, err := MergeSuites([]*SuiteResult{hostSuite("node1", h200, Pass), roundTrip(t, failed)}, []string{"node1.json", "node2.json"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Verdict() != Error || m.Failure != "node2.json: "+failed.Failure || !strings.Contains(m.Summary(), "node2.json: the scratch find-db") {
		t.Errorf("verdict %s, failure %q, summary %q", m.Verdict(), m.Failure, m.Summary())
	}
}

// A suite miotool failed while it ran is red in JUnit too, whatever its
// cases say.
func TestJUnitOfAFailedSuiteIsRed(t *testing.T) {
	s := hostSuite("node1", h200, Pass)
	s.Failure = "the scratch find-db cannot be created"
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, s); err != nil {
		t.Fatal(err)
	}
	validateJUnit(t, buf.Bytes())
	if ci := readJUnitCounts(t, buf.Bytes()); ci.Errors != 1 || ci.Declared[2] != 1 || ci.Passed != 1 {
		t.Errorf("JUnit %+v:\n%s", ci, buf.String())
	}
}
