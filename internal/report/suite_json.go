package report

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// The miotool/suite/v3 layout (docs/report-schema.md). Fields marked
// "derived" are written for readers' convenience and recomputed on reading.
type jsonSuite struct {
	Schema string   `json:"schema"`
	RunID  string   `json:"run_id,omitempty"`
	Suite  string   `json:"suite"`
	Title  string   `json:"title,omitempty"`
	File   string   `json:"file,omitempty"`
	Hosts  []string `json:"hosts"`
	// Miotool and Options are absent from a merged result whose runs
	// differ in them; each run's are in MergedRuns.
	Miotool    *jsonTool         `json:"miotool,omitempty"`
	Started    *time.Time        `json:"started,omitempty"`
	DurationMS float64           `json:"duration_ms"`
	Options    *jsonSuiteOptions `json:"options,omitempty"`
	MergedFrom []string          `json:"merged_from,omitempty"`
	MergedRuns []jsonRunRef      `json:"merged_runs,omitempty"`
	// Interrupted says what stopped the suite early; absent when it finished.
	Interrupted string `json:"interrupted,omitempty"`
	// Failure says how miotool failed while it ran the suite; absent when
	// it did not.
	Failure string `json:"failure,omitempty"`
	// Notes say what the suite did besides its checks' runs.
	Notes    []string    `json:"notes,omitempty"`
	Verdict  Verdict     `json:"verdict"`   // derived
	ExitCode int         `json:"exit_code"` // derived
	Summary  string      `json:"summary"`   // derived
	Totals   jsonTotals  `json:"totals"`    // derived
	Checks   []jsonCheck `json:"checks"`
}

type jsonRunRef struct {
	RunID   string            `json:"run_id"`
	Hosts   []string          `json:"hosts"`
	Started *time.Time        `json:"started,omitempty"`
	File    string            `json:"file,omitempty"`
	Options *jsonSuiteOptions `json:"options,omitempty"`
	Miotool *jsonTool         `json:"miotool,omitempty"`
}

type jsonTool struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go,omitempty"`
}

type jsonSuiteOptions struct {
	Repeat   int      `json:"repeat"`
	Shuffle  bool     `json:"shuffle"`
	Seed     *uint64  `json:"seed,omitempty"`
	CPULoad  int      `json:"cpu_load"`
	Jobs     int      `json:"jobs,omitempty"` // absent: one at a time
	Variants []string `json:"env_variants"`
}

type jsonTotals struct {
	Checks      int `json:"checks"`
	Met         int `json:"met"`
	Unmet       int `json:"unmet"`
	Errors      int `json:"errors"`
	NotRun      int `json:"not_run"`
	Skipped     int `json:"skipped"`
	Interrupted int `json:"interrupted"`
}

type jsonCheck struct {
	Name    string    `json:"name"`
	Test    string    `json:"test"` // derived
	Command string    `json:"command"`
	Variant string    `json:"variant,omitempty"`
	Env     []string  `json:"env"`
	Expect  Verdict   `json:"expect"`
	Skip    string    `json:"skip,omitempty"`
	Met     bool      `json:"met"`     // derived
	Outcome Verdict   `json:"outcome"` // derived
	Status  string    `json:"status"`  // derived
	Devices string    `json:"devices"` // derived
	Runs    []jsonRun `json:"runs"`
}

type jsonRun struct {
	Host       string     `json:"host"`
	Iteration  int        `json:"iteration"`
	Order      int        `json:"order"`
	Verdict    Verdict    `json:"verdict"`
	ExitCode   int        `json:"exit_code"`
	Met        bool       `json:"met"` // derived
	Status     string     `json:"status,omitempty"`
	Summary    string     `json:"summary"`
	Cases      *jsonCases `json:"cases,omitempty"`
	Backend    string     `json:"backend,omitempty"`
	Device     jsonDevice `json:"device"`
	Started    *time.Time `json:"started,omitempty"`
	DurationMS float64    `json:"duration_ms"`
	StderrTail string     `json:"stderr_tail,omitempty"`
}

func toJSONOptions(o SuiteOptions) *jsonSuiteOptions {
	j := &jsonSuiteOptions{Repeat: o.Repeat, Shuffle: o.Shuffle, CPULoad: o.CPULoad, Variants: append([]string{}, o.Variants...)}
	if o.Jobs > 1 {
		j.Jobs = o.Jobs
	}
	if o.Shuffle {
		seed := o.Seed
		j.Seed = &seed
	}
	return j
}

func (j *jsonSuiteOptions) options() SuiteOptions {
	if j == nil {
		return SuiteOptions{}
	}
	o := SuiteOptions{Repeat: j.Repeat, Shuffle: j.Shuffle, CPULoad: j.CPULoad, Jobs: j.Jobs, Variants: j.Variants}
	if j.Seed != nil {
		o.Seed = *j.Seed
	}
	return o
}

func toJSONTool(t Tool) *jsonTool {
	return &jsonTool{Version: t.Version, Commit: t.Commit, Go: t.GoVersion}
}

func (j *jsonTool) tool() Tool {
	if j == nil {
		return Tool{}
	}
	return Tool{Version: j.Version, Commit: j.Commit, GoVersion: j.Go}
}

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromMS(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// MarshalJSON encodes the suite result in the miotool/suite/v3 layout.
func (s *SuiteResult) MarshalJSON() ([]byte, error) {
	t := s.Totals()
	j := jsonSuite{
		Schema:      SuiteSchemaVersion,
		RunID:       s.RunID,
		Suite:       s.Suite,
		Title:       s.Title,
		File:        s.File,
		Hosts:       append([]string{}, s.Hosts...),
		Started:     timePtr(s.Started),
		DurationMS:  durationMS(s.Duration),
		MergedFrom:  s.Sources,
		Interrupted: s.Interrupted,
		Failure:     s.Failure,
		Notes:       s.Notes,
		Verdict:     s.Verdict(),
		ExitCode:    s.ExitCode(),
		Summary:     s.Summary(),
		Totals:      jsonTotals(t),
		Checks:      make([]jsonCheck, len(s.Checks)),
	}
	options, tool := s.uniform()
	if options {
		j.Options = toJSONOptions(s.Options)
	}
	if tool {
		j.Miotool = toJSONTool(s.Tool)
	}
	for _, ref := range s.MergedRuns {
		j.MergedRuns = append(j.MergedRuns, jsonRunRef{RunID: ref.RunID, Hosts: append([]string{}, ref.Hosts...),
			Started: timePtr(ref.Started), File: ref.File, Options: toJSONOptions(ref.Options), Miotool: toJSONTool(ref.Tool)})
	}
	label := s.deviceLabeler()
	for i, c := range s.Checks {
		jc := jsonCheck{
			Name:    c.Name,
			Test:    c.Test(),
			Command: c.Command,
			Variant: c.Variant,
			Env:     append([]string{}, c.Env...),
			Expect:  c.Expect,
			Skip:    c.Skip,
			Met:     c.Met(),
			Outcome: c.Outcome(),
			Status:  s.statusOf(c),
			Devices: s.devicesCell(c, label),
			Runs:    make([]jsonRun, len(c.Runs)),
		}
		for k, r := range c.Runs {
			jc.Runs[k] = jsonRun{
				Host:       r.Host,
				Iteration:  r.Iteration,
				Order:      r.Order,
				Verdict:    r.Verdict,
				ExitCode:   r.ExitCode,
				Met:        c.runMet(r),
				Status:     r.Status,
				Summary:    r.Summary,
				Cases:      toJSONCases(r.Cases),
				Backend:    r.Backend,
				Device:     jsonDevice(r.Device),
				Started:    timePtr(r.Started),
				DurationMS: durationMS(r.Duration),
				StderrTail: r.StderrTail,
			}
		}
		j.Checks[i] = jc
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the miotool/suite/v3 layout, and v2 and v1 before it.
// Derived fields are ignored and recomputed from the runs.
func (s *SuiteResult) UnmarshalJSON(data []byte) error {
	var j jsonSuite
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if isResultSchema(j.Schema) {
		// A single check's result: a suite of that one check.
		var r Result
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("a single check's result (%s): %w", j.Schema, err)
		}
		*s = *SuiteFromResult(&r)
		return nil
	}
	if j.Schema != SuiteSchemaVersion && j.Schema != suiteSchemaV2 && j.Schema != suiteSchemaV1 {
		return fmt.Errorf("suite result schema %q is not %q (nor a check's result, %q)", j.Schema, SuiteSchemaVersion, SchemaVersion)
	}
	*s = SuiteResult{
		Schema:      j.Schema,
		RunID:       j.RunID,
		Suite:       j.Suite,
		Title:       j.Title,
		File:        j.File,
		Hosts:       j.Hosts,
		Tool:        j.Miotool.tool(),
		Duration:    fromMS(j.DurationMS),
		Options:     j.Options.options(),
		Sources:     j.MergedFrom,
		Interrupted: j.Interrupted,
		Failure:     j.Failure,
		Notes:       j.Notes,
	}
	if j.Started != nil {
		s.Started = *j.Started
	}
	for i, jr := range j.MergedRuns {
		if jr.RunID == "" {
			return fmt.Errorf("merged_runs[%d] has no run_id", i)
		}
		// A merged result written before runs kept their own options and
		// version has only the top level's, which it took from its first
		// input.
		ref := SuiteRunRef{RunID: jr.RunID, Hosts: jr.Hosts, File: jr.File, Options: s.Options, Tool: s.Tool}
		if jr.Options != nil {
			ref.Options = jr.Options.options()
		}
		if jr.Miotool != nil {
			ref.Tool = jr.Miotool.tool()
		}
		if jr.Started != nil {
			ref.Started = *jr.Started
		}
		s.MergedRuns = append(s.MergedRuns, ref)
	}
	for i, jc := range j.Checks {
		expect, err := ParseVerdict(string(jc.Expect))
		if err != nil {
			return fmt.Errorf("check %d (%s): expect: %w", i+1, jc.Name, err)
		}
		c := &SuiteCheck{Name: jc.Name, Command: jc.Command, Variant: jc.Variant, Env: jc.Env, Expect: expect, Skip: jc.Skip}
		for k, jr := range jc.Runs {
			v, err := ParseVerdict(string(jr.Verdict))
			if err != nil {
				return fmt.Errorf("check %d (%s) run %d: %w", i+1, jc.Name, k+1, err)
			}
			r := SuiteRun{
				Host:       jr.Host,
				Iteration:  jr.Iteration,
				Order:      jr.Order,
				Verdict:    v,
				ExitCode:   jr.ExitCode,
				Status:     jr.Status,
				Summary:    jr.Summary,
				Cases:      jr.Cases.cases(),
				Backend:    jr.Backend,
				Device:     Device(jr.Device),
				Duration:   fromMS(jr.DurationMS),
				StderrTail: jr.StderrTail,
			}
			if jr.Started != nil {
				r.Started = *jr.Started
			}
			c.Runs = append(c.Runs, r)
		}
		s.Checks = append(s.Checks, c)
	}
	return nil
}

// SuiteFromResult is a single check's result as a suite of that one check
// on the result's host, so that it merges beside suite results: the
// check is named after the result's, runs once as the result's command
// without its output flags, and is expected to PASS (a check's own exit
// status is 0 only for PASS). The suite run keeps the result's run id.
func SuiteFromResult(r *Result) *SuiteResult {
	s := &SuiteResult{Schema: SuiteSchemaVersion, RunID: r.RunID, Suite: r.Check, Started: r.Started, Duration: r.Duration,
		Options: SuiteOptions{Repeat: 1}}
	if r.Host != "" {
		s.Hosts = []string{r.Host}
	}
	run := SuiteRun{Host: r.Host, Iteration: 1, Order: 1, Verdict: r.Verdict, ExitCode: r.ExitCode(),
		Status: r.Status, Summary: r.Summary, Cases: r.Cases, Backend: r.Backend, Device: r.Device, Started: r.Started, Duration: r.Duration}
	s.Checks = []*SuiteCheck{{Name: r.Check, Command: ChecklistCommand(r.Command), Expect: Pass, Runs: []SuiteRun{run}}}
	return s
}

// WriteSuiteJSON writes s as indented JSON followed by a newline.
func WriteSuiteJSON(w io.Writer, s *SuiteResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}

// ReadSuiteJSON decodes one suite result written by WriteSuiteJSON.
func ReadSuiteJSON(rd io.Reader) (*SuiteResult, error) {
	var s SuiteResult
	if err := json.NewDecoder(rd).Decode(&s); err != nil {
		return nil, fmt.Errorf("reading suite result: %w", err)
	}
	return &s, nil
}
