package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func markdownOf(t *testing.T, s *SuiteResult) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSuiteMarkdown(&buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func textOf(t *testing.T, s *SuiteResult) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSuiteText(&buf, s, Options{}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// A merged result says how each host's runs were made and by which
// miotool: it does not stamp the first file's options and version on all.
func TestMergeKeepsEachHostsOptionsAndVersion(t *testing.T) {
	plain := hostSuite("node1", h200, Pass)
	plain.Options = SuiteOptions{Repeat: 1}
	plain.Tool = Tool{Version: "1.2.3", Commit: "c0ffee", GoVersion: "go1.26.8"}
	fancy := hostSuite("node2", h200, Pass, Pass)
	fancy.Options = SuiteOptions{Repeat: 2, Shuffle: true, Seed: 7, CPULoad: 2, Variants: []string{"GPU_MAX_HW_QUEUES=3"}}
	fancy.Tool = Tool{Version: "1.3.0", Commit: "beef"}
	m, err := MergeSuites([]*SuiteResult{plain, fancy}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := "node1: each check once; node2: each check 2 times, in shuffled order (seed 7), beside 2 busy CPU workers, in the baseline environment and with GPU_MAX_HW_QUEUES=3"
	wantTool := "node1: 1.2.3 (commit c0ffee, go1.26.8); node2: 1.3.0 (commit beef)"
	for _, s := range []*SuiteResult{m, roundTrip(t, m)} {
		md := markdownOf(t, s)
		if !strings.Contains(md, "- **Runs:** "+wantRuns+"\n") || !strings.Contains(md, "- **miotool:** "+wantTool+"\n") {
			t.Errorf("Markdown header:\n%s", md)
		}
		text := textOf(t, s)
		if !strings.Contains(text, strings.ReplaceAll(wantRuns, `\_`, "_")) || !strings.Contains(text, wantTool) {
			t.Errorf("text header:\n%s", text)
		}
	}
	// The JSON keeps each run's own; the top level claims none of them.
	var buf bytes.Buffer
	if err := WriteSuiteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Options    *json.RawMessage `json:"options"`
		Miotool    *json.RawMessage `json:"miotool"`
		MergedRuns []struct {
			Options struct {
				Repeat  int  `json:"repeat"`
				Shuffle bool `json:"shuffle"`
				Seed    *int `json:"seed"`
			} `json:"options"`
			Miotool struct {
				Version string `json:"version"`
			} `json:"miotool"`
		} `json:"merged_runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Options != nil || doc.Miotool != nil {
		t.Errorf("the merged document claims one set of options or one version for runs that differ:\n%s", buf.String())
	}
	if len(doc.MergedRuns) != 2 || doc.MergedRuns[0].Options.Repeat != 1 || doc.MergedRuns[1].Options.Repeat != 2 ||
		!doc.MergedRuns[1].Options.Shuffle || doc.MergedRuns[1].Options.Seed == nil || *doc.MergedRuns[1].Options.Seed != 7 ||
		doc.MergedRuns[0].Miotool.Version != "1.2.3" || doc.MergedRuns[1].Miotool.Version != "1.3.0" {
		t.Errorf("merged runs: %+v", doc.MergedRuns)
	}
	// Merged again, each run keeps its own.
	third := hostSuite("node3", h200, Pass, Pass, Pass)
	third.Options, third.Tool = SuiteOptions{Repeat: 3}, plain.Tool
	again, err := MergeSuites([]*SuiteResult{roundTrip(t, m), third}, []string{"m.json", "c.json"})
	if err != nil {
		t.Fatal(err)
	}
	if md := markdownOf(t, again); !strings.Contains(md, "- **Runs:** "+wantRuns+"; node3: each check 3 times\n") ||
		!strings.Contains(md, "- **miotool:** node1, node3: 1.2.3 (commit c0ffee, go1.26.8); node2: 1.3.0 (commit beef)\n") {
		t.Errorf("re-merged header:\n%s", md)
	}
}

// The header says what the merged rows hold.
func TestMergedRunsHeader(t *testing.T) {
	a := hostSuite("node1", h200, Pass, Pass)
	a.Options = SuiteOptions{Repeat: 2}
	b := hostSuite("node2", h200, Pass, Pass, Pass)
	b.Options = SuiteOptions{Repeat: 3}
	m, err := MergeSuites([]*SuiteResult{a, b}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if md := markdownOf(t, m); !strings.Contains(md, "- **Runs:** node1: each check 2 times; node2: each check 3 times\n") {
		t.Errorf("header:\n%s", md)
	}
	c := hostSuite("node3", h200, Pass, Pass)
	c.Options = SuiteOptions{Repeat: 2}
	m, err = MergeSuites([]*SuiteResult{a, c}, []string{"a.json", "c.json"})
	if err != nil {
		t.Fatal(err)
	}
	if md := markdownOf(t, m); !strings.Contains(md, "- **Runs:** node1, node3: each check 2 times\n") {
		t.Errorf("header:\n%s", md)
	}
}

// Twenty identical failures are one bullet that says how many.
func TestRepeatedFailuresAreOneBullet(t *testing.T) {
	summary := "end capture: cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) " + strings.Repeat("after the launch path polled the abandoned stream; ", 7)
	s := hostSuite("node1", h200)
	for i := range 20 {
		s.Checks[0].Runs = append(s.Checks[0].Runs, run("node1", i+1, Fail, summary, time.Second))
	}
	s.Checks[0].Runs[6].Summary = "another reason"
	md, text := markdownOf(t, s), textOf(t, s)
	for name, out := range map[string]string{"Markdown": md, "text": text} {
		if n := strings.Count(out, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"); n != 1 {
			t.Errorf("%s: the failure is told %d times, want once:\n%s", name, n, out)
		}
		if !strings.Contains(out, "runs 1-6, 8-20 on node1 (19 of 20 runs): FAIL, expected PASS: end capture") ||
			!strings.Contains(out, "run 7 on node1: FAIL, expected PASS: another reason") {
			t.Errorf("%s bullets:\n%s", name, out)
		}
	}
}

// A merged result written as miotool/suite/v2 has options only at its
// top level; each of its runs takes them, as the file claimed.
func TestReadsVersion2MergedOptions(t *testing.T) {
	doc := `{"schema":"miotool/suite/v2","run_id":"M","suite":"s","hosts":["n1","n2"],"miotool":{"version":"1.2.3"},
		"options":{"repeat":2,"shuffle":false,"cpu_load":0,"env_variants":[]},
		"merged_runs":[{"run_id":"A","hosts":["n1"]},{"run_id":"B","hosts":["n2"]}],
		"checks":[{"name":"a","command":"miotool find","expect":"PASS","runs":[{"host":"n1","iteration":1,"order":1,"verdict":"PASS"}]}]}`
	s, err := ReadSuiteJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if md := markdownOf(t, s); !strings.Contains(md, "- **Runs:** n1, n2: each check 2 times\n") || !strings.Contains(md, "- **miotool:** 1.2.3\n") {
		t.Errorf("header:\n%s", md)
	}
}
