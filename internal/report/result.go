// Package report is the result model every miotool check returns, and its
// renderers: text tables for terminals and logs, Markdown for pull-request
// testing sections, and JSON for machines. A SuiteResult gathers the runs
// of many checks (on one host, or merged from several) into one Testing
// Checklist, and is also written as JUnit XML for CI systems.
package report

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion names the JSON layout of a Result. It changes only when a
// field is renamed or removed, or changes its meaning; new fields may
// appear without a change.
const SchemaVersion = "miotool/result/v4"

// schemaV3 is the layout whose status was a command's own wording in
// place of the verdict's word, schemaV2 the one whose records held every
// cell as a string, schemaV1 the one before counters were keyed in
// snake_case; all are still read.
const (
	schemaV3 = "miotool/result/v3"
	schemaV2 = "miotool/result/v2"
	schemaV1 = "miotool/result/v1"
)

// isResultSchema reports whether schema names a layout of a Result that
// miotool reads.
func isResultSchema(schema string) bool {
	return schema == SchemaVersion || schema == schemaV3 || schema == schemaV2 || schema == schemaV1
}

// NewRunID returns an id no other run shares: 128 random bits as 26
// base32 characters. Results carry one so that merging can tell the same
// run read twice from two runs that look alike.
func NewRunID() string { return rand.Text() }

// hostname is the machine's name for results, "" when it cannot be read.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// Verdict is the outcome of a check.
type Verdict string

// The verdicts, each with its exit code (see ExitCode).
const (
	Pass  Verdict = "PASS"  // every check passed
	Fail  Verdict = "FAIL"  // a check failed: the bug reproduced or an expectation was not met
	Skip  Verdict = "SKIP"  // the requested device or library is not there
	Error Verdict = "ERROR" // the tool itself failed
	// Interrupted: a signal (Ctrl-C, SIGTERM) stopped the run before it
	// finished; what ran is reported, what did not is no outcome.
	Interrupted Verdict = "INTERRUPTED"
)

// Exit codes shared by every command.
const (
	ExitPass    = 0
	ExitFail    = 1
	ExitUsage   = 2
	ExitError   = 3
	ExitSkipped = 4
	// ExitInterrupted and ExitTerminated are the shell's 128+signal for an
	// interrupted run: SIGINT (Ctrl-C) and SIGTERM.
	ExitInterrupted = 130
	ExitTerminated  = 143
)

// ExitCode maps a verdict to the process exit code: PASS 0, FAIL 1, ERROR 3,
// SKIP 4, INTERRUPTED 130 (143 when SIGTERM stopped it: the command line
// knows the signal, the verdict does not). An unknown verdict counts as a
// tool failure.
func (v Verdict) ExitCode() int {
	switch v {
	case Pass:
		return ExitPass
	case Fail:
		return ExitFail
	case Skip:
		return ExitSkipped
	case Interrupted:
		return ExitInterrupted
	}
	return ExitError
}

// Status is the word a PR testing checklist uses for the verdict.
func (v Verdict) Status() string {
	switch v {
	case Pass:
		return "Passed"
	case Fail:
		return "Failed"
	case Skip:
		return "Skipped"
	case Interrupted:
		return "Interrupted"
	}
	return "Error"
}

// ParseVerdict accepts the five verdict words in any case.
func ParseVerdict(s string) (Verdict, error) {
	switch v := Verdict(strings.ToUpper(strings.TrimSpace(s))); v {
	case Pass, Fail, Skip, Error, Interrupted:
		return v, nil
	}
	return "", fmt.Errorf("unknown verdict %q (want PASS, FAIL, SKIP, ERROR or INTERRUPTED)", s)
}

// Worst returns the verdict that decides a run made of several checks:
// INTERRUPTED (it is incomplete, whatever it found) over ERROR over FAIL
// over SKIP over PASS.
func Worst(vs ...Verdict) Verdict {
	rank := map[Verdict]int{Pass: 0, Skip: 1, Fail: 2, Error: 3, Interrupted: 4}
	worst := Pass
	for _, v := range vs {
		r, ok := rank[v]
		if !ok {
			r = rank[Error]
			v = Error
		}
		if r > rank[worst] {
			worst = v
		}
	}
	return worst
}

// Device names the device a check ran on.
type Device struct {
	Name        string // marketing name, e.g. "NVIDIA H200"
	Arch        string // e.g. "sm_90", "gfx942", "sim"
	Description string // the backend's one-line description (hip.Props.String)
}

// Short is the form a PR checklist uses, e.g. "NVIDIA H200 (sm_90)".
func (d Device) Short() string {
	switch {
	case d.Name == "":
		return "none"
	case d.Arch == "":
		return d.Name
	}
	return d.Name + " (" + d.Arch + ")"
}

// Row is one table row. Flag, when set, marks the row (for example
// "differs from expected: 900 / 901") and is shown in an extra column.
// Values, when set, hold beside a cell's text for people its value for
// machines, a JSON number (see Cell); "" where the text is all there is.
type Row struct {
	Cells  []string
	Flag   string
	Values []string
}

// Cell is a table cell whose text is for people and whose value, a
// number, is what the JSON records hold in its place: a runtime's status
// "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)" is 901 there. A column
// with a value in any row is a number in every record, null where a row
// has none.
type Cell struct {
	Text  string
	Value string // a JSON number, or "" for none
}

// TextCell is a cell of text only.
func TextCell(text string) Cell { return Cell{Text: text} }

// CodeCell is a runtime's status as every table writes one, its name and
// its code, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)"; the JSON
// records hold the code.
func CodeCell(name string, code int) Cell {
	return Cell{Text: fmt.Sprintf("%s (%d)", name, code), Value: strconv.Itoa(code)}
}

// Millis is a duration as every table writes one: milliseconds, with three
// decimals, in a column whose title ends in "(ms)" ("wall time (ms)"), so
// that the JSON records hold it as a number under a key ending in "_ms".
func Millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64)
}

// Table is a titled table.
type Table struct {
	Title   string
	Columns []string
	Rows    []Row
	// FlagColumn titles the extra column that shows row flags; it is shown
	// only when some row is flagged. Empty means "flag".
	FlagColumn string
}

// AddRow appends an unflagged row.
func (t *Table) AddRow(cells ...string) { t.Rows = append(t.Rows, Row{Cells: cells}) }

// AddFlaggedRow appends a row with a flag; an empty flag leaves it unflagged.
func (t *Table) AddFlaggedRow(flag string, cells ...string) {
	t.Rows = append(t.Rows, Row{Cells: cells, Flag: flag})
}

// AddCells appends a row of cells with their values, flagged with flag
// unless it is empty.
func (t *Table) AddCells(flag string, cells ...Cell) {
	row := Row{Cells: make([]string, len(cells)), Flag: flag}
	for i, c := range cells {
		row.Cells[i] = c.Text
		if c.Value != "" {
			if row.Values == nil {
				row.Values = make([]string, len(cells))
			}
			row.Values[i] = c.Value
		}
	}
	t.Rows = append(t.Rows, row)
}

// Flagged counts the flagged rows.
func (t *Table) Flagged() int {
	n := 0
	for _, r := range t.Rows {
		if r.Flag != "" {
			n++
		}
	}
	return n
}

func (t *Table) flagTitle() string {
	if t.FlagColumn != "" {
		return t.FlagColumn
	}
	return "flag"
}

// valueGrid returns each row's values, padded like grid's rows ("" where
// a cell has none).
func (t *Table) valueGrid(width int) [][]string {
	out := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = make([]string, width)
		copy(out[i], r.Values)
	}
	return out
}

// grid returns the header and the rows as plain strings, padded to the
// column count and with the flag column appended when any row is flagged.
func (t *Table) grid() ([]string, [][]string) {
	width := len(t.Columns)
	for _, r := range t.Rows {
		width = max(width, len(r.Cells))
	}
	flagged := t.Flagged() > 0
	header := make([]string, width, width+1)
	copy(header, t.Columns)
	if flagged {
		header = append(header, t.flagTitle())
	}
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		row := make([]string, width, width+1)
		copy(row, r.Cells)
		if flagged {
			row = append(row, r.Flag)
		}
		rows[i] = row
	}
	return header, rows
}

// Cases count the sub-tests of one run of a check, as a test binary's
// "Passed (26/26)" counts its tests: how many there were (Total) and how
// many gave what each is expected to give (Passed), e.g. the 24
// combinations of a capture matrix. A zero Total means not counted.
type Cases struct {
	Passed int
	Total  int
	// Unit is the plural noun of what is counted where it is not the
	// sub-tests of a test ("cells", "runs"): "Passed (243/243 cells)".
	Unit string
}

// Counter is a named count, such as "cells" or "differences".
type Counter struct {
	Name  string
	Value int64
}

// Result is what every check returns.
type Result struct {
	Schema  string
	Check   string // e.g. "rules", "capture/global"
	Command string // the command line used, e.g. "miotool rules --dialect cuda"
	// RunID names this run of the check uniquely (NewRunID); Host is the
	// machine it ran on.
	RunID string
	Host  string

	Backend       string // "sim", "cuda", "hip"; empty when none opened
	BackendReason string // how the backend was chosen
	Device        Device

	Verdict Verdict
	// Detail is what the check found beyond its verdict, in a few words,
	// e.g. which policies fail and which pass for a run that compares
	// them: the checklist shows it after the status's count ("Passed
	// (24/24): fails with --reclaim=lazy (global), passes with
	// --reclaim=worker"). ChecklistStatus composes the status; no
	// command words it.
	Detail string
	// Summary is one line that explains the verdict: for SKIP, ERROR and
	// INTERRUPTED, the reason the checklist status gives.
	Summary string
	// Cases, when the check counts sub-tests, says how many it ran and
	// how many passed; the Testing Checklist shows it as "(24/24)".
	Cases Cases
	// Progress, for an INTERRUPTED result, is how far it got: "120 of
	// 243 cells finished".
	Progress Progress
	Started  time.Time
	Duration time.Duration

	Tables   []*Table
	Notes    []string
	Counters []Counter

	// ExitStatus, when not zero, is the exit status of the process that
	// wrote the result where its verdict's code does not say it: 143 for
	// a run SIGTERM stopped (INTERRUPTED's code is 130), 2 for an ERROR
	// that was a usage error. ExitCode gives it.
	ExitStatus int

	// Shard, when set, says which part of a split run this result is
	// (repeat --shard: its share of the runs).
	Shard *Shard
}

// ExitCode is the exit status the result stands for: ExitStatus when
// set, else its verdict's code.
func (r *Result) ExitCode() int {
	if r.ExitStatus != 0 {
		return r.ExitStatus
	}
	return r.Verdict.ExitCode()
}

// New starts a result for check, run by command, at start, with a new run
// id and this machine's host name. The verdict starts as PASS.
func New(check, command string, start time.Time) *Result {
	return &Result{Schema: SchemaVersion, Check: check, Command: command, RunID: NewRunID(), Host: hostname(),
		Verdict: Pass, Started: start}
}

// AddTable appends a table and returns it for filling.
func (r *Result) AddTable(title string, columns ...string) *Table {
	t := &Table{Title: title, Columns: columns}
	r.Tables = append(r.Tables, t)
	return t
}

// Note appends a note.
func (r *Result) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Count sets a counter, adding it if it is new; the order of first use is kept.
func (r *Result) Count(name string, value int64) {
	for i := range r.Counters {
		if r.Counters[i].Name == name {
			r.Counters[i].Value = value
			return
		}
	}
	r.Counters = append(r.Counters, Counter{Name: name, Value: value})
}

// Counter returns a counter's value and whether it exists. The name may
// be given as set ("wrong results") or as its JSON key ("wrong_results"),
// since a result read from JSON has the keys as names.
func (r *Result) Counter(name string) (int64, bool) {
	for _, c := range r.Counters {
		if c.Name == name {
			return c.Value, true
		}
	}
	key := FieldKey(name)
	for _, c := range r.Counters {
		if FieldKey(c.Name) == key {
			return c.Value, true
		}
	}
	return 0, false
}

// FieldKey is name as a JSON key that jq reads without quoting: ASCII
// lower case, every other run of characters one underscore, none at
// either end ("time (ms)" -> "time_ms", "end capture" -> "end_capture").
// A name with no letter or digit gives "".
func FieldKey(name string) string {
	var b strings.Builder
	gap := false
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		default:
			gap = b.Len() > 0
			continue
		}
		if gap {
			b.WriteByte('_')
			gap = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keys are the record keys of the columns: FieldKey of each title,
// "column_N" for a title without one, and "_2", "_3" after a key already
// taken.
func recordKeys(header []string) []string {
	keys := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		k := FieldKey(h)
		if k == "" {
			k = fmt.Sprintf("column_%d", i+1)
		}
		base := k
		for n := 2; seen[k]; n++ {
			k = fmt.Sprintf("%s_%d", base, n)
		}
		seen[k] = true
		keys[i] = k
	}
	return keys
}

// Finish sets the verdict, its one-line summary and the duration measured
// up to end.
func (r *Result) Finish(v Verdict, summary string, end time.Time) {
	r.Verdict, r.Summary = v, summary
	if !r.Started.IsZero() {
		r.Duration = end.Sub(r.Started)
	}
}

// ChecklistRow is the PR "Testing Checklist" row for the result:
// Test | Command | Devices | Status. The command is shown without its
// output flags (see ChecklistCommand), the status is ChecklistStatus.
func (r *Result) ChecklistRow() []string {
	return []string{r.Check, ChecklistCommand(r.Command), r.Device.Short(), r.ChecklistStatus()}
}
