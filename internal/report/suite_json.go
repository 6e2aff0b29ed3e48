package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// The miotool/suite/v4 layout (docs/report-schema.md). Fields marked
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
	Notes []string `json:"notes,omitempty"`
	// Shard names the part of a split run this result is; MissingShards
	// the shards a merge was told to do without.
	Shard         *jsonShard         `json:"shard,omitempty"`
	MissingShards []jsonMissingShard `json:"missing_shards,omitempty"`
	Verdict       Verdict            `json:"verdict"`   // derived
	ExitCode      int                `json:"exit_code"` // derived
	Summary       string             `json:"summary"`   // derived
	Totals        jsonTotals         `json:"totals"`    // derived
	Checks        []jsonCheck        `json:"checks"`
}

type jsonMissingShard struct {
	Suite string `json:"suite"`
	jsonShard
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
	Shard   int       `json:"shard,omitempty"`
	Met     bool      `json:"met"`     // derived
	Outcome Verdict   `json:"outcome"` // derived
	Status  string    `json:"status"`  // derived
	Devices string    `json:"devices"` // derived
	Runs    []jsonRun `json:"runs"`
}

type jsonRun struct {
	Host      string  `json:"host"`
	Iteration int     `json:"iteration"`
	Order     int     `json:"order"`
	Verdict   Verdict `json:"verdict"`
	ExitCode  *int    `json:"exit_code"`
	Met       bool    `json:"met"` // derived
	// Mismatch says how the run ran on another backend or dialect than
	// the check asks for (derived).
	Mismatch string `json:"mismatch,omitempty"`
	// Status is read from v3 and before: the child's status then.
	Status   string        `json:"status,omitempty"`
	Detail   string        `json:"detail,omitempty"`
	Summary  string        `json:"summary"`
	Cases    *jsonCases    `json:"cases,omitempty"`
	Progress *jsonProgress `json:"progress,omitempty"`
	Backend  string        `json:"backend,omitempty"`
	Device   jsonDevice    `json:"device"`
	// PinnedDevice is the id of the device the run was pinned to
	// (report --devices); absent when it was not.
	PinnedDevice string     `json:"pinned_device,omitempty"`
	Started      *time.Time `json:"started,omitempty"`
	DurationMS   float64    `json:"duration_ms"`
	StderrTail   string     `json:"stderr_tail,omitempty"`
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

// toJSONTool is the build that ran; nil when that is not known (a single
// check's result does not record it), rather than an empty version.
func toJSONTool(t Tool) *jsonTool {
	if t.Version == "" {
		return nil
	}
	return &jsonTool{Version: t.Version, Commit: t.Commit, Go: t.GoVersion}
}

func (j *jsonTool) tool() Tool {
	if j == nil {
		return Tool{}
	}
	return Tool{Version: j.Version, Commit: j.Commit, GoVersion: j.Go}
}

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// MarshalJSON encodes the suite result in the miotool/suite/v4 layout.
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
		Shard:       toJSONShard(s.Shard),
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
	for _, m := range s.MissingShards {
		j.MissingShards = append(j.MissingShards, jsonMissingShard{Suite: m.Suite, jsonShard: *toJSONShard(&m.Shard)})
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
			Shard:   c.Shard,
			Met:     c.Met(),
			Outcome: c.Outcome(),
			Status:  s.StatusOf(c),
			Devices: s.devicesCell(c, label),
			Runs:    make([]jsonRun, len(c.Runs)),
		}
		for k, r := range c.Runs {
			exit := r.ExitCode
			jc.Runs[k] = jsonRun{
				Host:         r.Host,
				Iteration:    r.Iteration,
				Order:        r.Order,
				Verdict:      r.Verdict,
				ExitCode:     &exit,
				Met:          c.runMet(r),
				Mismatch:     c.mismatch(r),
				Detail:       r.detail(),
				Summary:      r.Summary,
				Cases:        toJSONCases(r.Cases),
				Progress:     toJSONProgress(r.Progress),
				Backend:      r.Backend,
				Device:       jsonDevice(r.Device),
				PinnedDevice: r.PinnedDevice,
				Started:      timePtr(r.Started),
				DurationMS:   durationMS(r.Duration),
				StderrTail:   r.StderrTail,
			}
		}
		j.Checks[i] = jc
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the miotool/suite/v4 layout, and v3, v2 and v1
// before it. Derived fields are ignored and recomputed from the runs. A
// number out of range (a duration, an exit code, an iteration, an order,
// a count, an option) or a run whose verdict contradicts its exit code is
// refused, naming the check, the run and the field.
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
	if !slices.Contains([]string{SuiteSchemaVersion, suiteSchemaV3, suiteSchemaV2, suiteSchemaV1}, j.Schema) {
		return fmt.Errorf("suite result schema %q is not %q (nor a check's result, %q)", j.Schema, SuiteSchemaVersion, SchemaVersion)
	}
	d, err := readDuration("duration_ms", j.DurationMS)
	if err != nil {
		return err
	}
	*s = SuiteResult{
		Schema:      j.Schema,
		RunID:       j.RunID,
		Suite:       j.Suite,
		Title:       j.Title,
		File:        j.File,
		Hosts:       j.Hosts,
		Tool:        j.Miotool.tool(),
		Duration:    d,
		Options:     j.Options.options(),
		Sources:     j.MergedFrom,
		Interrupted: j.Interrupted,
		Failure:     j.Failure,
		Notes:       j.Notes,
		Shard:       j.Shard.shard(),
	}
	if err := checkOptions("options", s.Options); err != nil {
		return err
	}
	if s.Shard != nil {
		if why := s.Shard.valid(); why != "" {
			return fmt.Errorf("shard: %s", why)
		}
	}
	for i, m := range j.MissingShards {
		sh := m.shard()
		if why := sh.valid(); why != "" {
			return fmt.Errorf("missing_shards[%d]: %s", i, why)
		}
		s.MissingShards = append(s.MissingShards, MissingShard{Suite: m.Suite, Shard: *sh})
	}
	if j.Started != nil {
		s.Started = *j.Started
	}
	repeat := s.Options.Repeat
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
			if err := checkOptions(fmt.Sprintf("merged_runs[%d].options", i), ref.Options); err != nil {
				return err
			}
		}
		if jr.Miotool != nil {
			ref.Tool = jr.Miotool.tool()
		}
		if jr.Started != nil {
			ref.Started = *jr.Started
		}
		repeat = max(repeat, ref.Options.Repeat)
		s.MergedRuns = append(s.MergedRuns, ref)
	}
	runs := 0
	for _, jc := range j.Checks {
		runs += len(jc.Runs)
	}
	if repeat <= 0 {
		repeat = maxCount // not recorded: no bound but the count's
	}
	for i, jc := range j.Checks {
		c, err := readCheck(jc, repeat, runs)
		if err != nil {
			return fmt.Errorf("check %d (%s)%w", i+1, jc.Name, err)
		}
		s.Checks = append(s.Checks, c)
	}
	return nil
}

// checkOptions refuses options out of range.
func checkOptions(field string, o SuiteOptions) error {
	for _, f := range []struct {
		name string
		n    int
	}{{"repeat", o.Repeat}, {"cpu_load", o.CPULoad}, {"jobs", o.Jobs}} {
		if err := checkRange(field+"."+f.name, f.n, 0, maxCount); err != nil {
			return err
		}
	}
	return nil
}

// readCheck is one check of a suite document, its runs checked: an
// iteration from 1 to repeat, an order from 1 to the document's runs,
// a duration in range, an exit code that agrees with the verdict, counts
// that can be. Errors start with what follows the check's name.
func readCheck(jc jsonCheck, repeat, runs int) (*SuiteCheck, error) {
	expect, err := ParseVerdict(string(jc.Expect))
	if err != nil {
		return nil, fmt.Errorf(": expect: %w", err)
	}
	if err := checkRange(": shard", jc.Shard, 0, maxShards); err != nil {
		return nil, err
	}
	c := &SuiteCheck{Name: jc.Name, Command: jc.Command, Variant: jc.Variant, Env: jc.Env, Expect: expect, Skip: jc.Skip, Shard: jc.Shard}
	for k, jr := range jc.Runs {
		r, err := readRun(jr, repeat, runs)
		if err != nil {
			return nil, fmt.Errorf(" run %d: %w", k+1, err)
		}
		c.Runs = append(c.Runs, r)
	}
	return c, nil
}

func readRun(jr jsonRun, repeat, runs int) (SuiteRun, error) {
	v, err := ParseVerdict(string(jr.Verdict))
	if err != nil {
		return SuiteRun{}, fmt.Errorf("verdict: %w", err)
	}
	d, err := readDuration("duration_ms", jr.DurationMS)
	if err != nil {
		return SuiteRun{}, err
	}
	exit := v.ExitCode() // a file that does not say it: the verdict's
	if jr.ExitCode != nil {
		exit = *jr.ExitCode
	}
	r := SuiteRun{
		Host:         jr.Host,
		Iteration:    jr.Iteration,
		Order:        jr.Order,
		Verdict:      v,
		ExitCode:     exit,
		Detail:       jr.Detail,
		Summary:      jr.Summary,
		Cases:        jr.Cases.cases(),
		Progress:     jr.Progress.progress(),
		Backend:      jr.Backend,
		Device:       Device(jr.Device),
		PinnedDevice: jr.PinnedDevice,
		Duration:     d,
		StderrTail:   jr.StderrTail,
	}
	for _, err := range []error{
		checkRange("iteration", r.Iteration, 1, repeat),
		checkRange("order", r.Order, 1, runs),
		checkRunExit("exit_code", v, exit),
		checkCases("cases", r.Cases),
		checkProgress("progress", r.Progress),
	} {
		if err != nil {
			return SuiteRun{}, err
		}
	}
	if r.Detail == "" {
		r.Detail = legacyDetail(jr.Status) // v3 and before: the child's own status
	}
	if jr.Started != nil {
		r.Started = *jr.Started
	}
	return r, nil
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
		Detail: r.Detail, Summary: r.Summary, Cases: r.Cases, Progress: r.Progress, Backend: r.Backend, Device: r.Device,
		Started: r.Started, Duration: r.Duration}
	s.Checks = []*SuiteCheck{{Name: r.Check, Command: ChecklistCommand(r.Command), Expect: Pass, Runs: []SuiteRun{run}}}
	if r.Shard != nil {
		sh := *r.Shard
		s.Shard = &sh
	}
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
