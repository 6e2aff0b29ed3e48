package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// The JSON layout is defined here, apart from the Go structs, so that Go
// names can change without changing the field names tools depend on.
type jsonResult struct {
	Schema        string           `json:"schema"`
	Check         string           `json:"check"`
	Command       string           `json:"command"`
	Backend       string           `json:"backend"`
	BackendReason string           `json:"backend_reason"`
	Device        jsonDevice       `json:"device"`
	Verdict       Verdict          `json:"verdict"`
	ExitCode      int              `json:"exit_code"`
	Status        string           `json:"status,omitempty"`
	Summary       string           `json:"summary"`
	Started       *time.Time       `json:"started,omitempty"`
	DurationMS    float64          `json:"duration_ms"`
	Tables        []jsonTable      `json:"tables"`
	Notes         []string         `json:"notes"`
	Counters      map[string]int64 `json:"counters"`
}

type jsonDevice struct {
	Name        string `json:"name"`
	Arch        string `json:"arch"`
	Description string `json:"description"`
}

type jsonTable struct {
	Title   string    `json:"title"`
	Columns []string  `json:"columns"`
	Rows    []jsonRow `json:"rows"`
	// FlagColumn is kept so a decoded table renders as the original did.
	FlagColumn string `json:"flag_column,omitempty"`
}

type jsonRow struct {
	Cells []string `json:"cells"`
	Flag  string   `json:"flag,omitempty"`
}

// MarshalJSON encodes the result in the miotool/result/v1 layout.
func (r *Result) MarshalJSON() ([]byte, error) {
	j := jsonResult{
		Schema:        r.Schema,
		Check:         r.Check,
		Command:       r.Command,
		Backend:       r.Backend,
		BackendReason: r.BackendReason,
		Device:        jsonDevice(r.Device),
		Verdict:       r.Verdict,
		ExitCode:      r.Verdict.ExitCode(),
		Status:        r.Status,
		Summary:       r.Summary,
		DurationMS:    float64(r.Duration.Microseconds()) / 1000,
		Tables:        make([]jsonTable, len(r.Tables)),
		Notes:         append([]string{}, r.Notes...),
		Counters:      make(map[string]int64, len(r.Counters)),
	}
	if j.Schema == "" {
		j.Schema = SchemaVersion
	}
	if !r.Started.IsZero() {
		t := r.Started
		j.Started = &t
	}
	for i, t := range r.Tables {
		jt := jsonTable{Title: t.Title, Columns: append([]string{}, t.Columns...), Rows: make([]jsonRow, len(t.Rows)), FlagColumn: t.FlagColumn}
		for k, row := range t.Rows {
			jt.Rows[k] = jsonRow{Cells: append([]string{}, row.Cells...), Flag: row.Flag}
		}
		j.Tables[i] = jt
	}
	for _, c := range r.Counters {
		j.Counters[c.Name] = c.Value
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the miotool/result/v1 layout. Counters come back in
// name order, since JSON objects carry no order.
func (r *Result) UnmarshalJSON(data []byte) error {
	var j jsonResult
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if j.Schema != SchemaVersion {
		return fmt.Errorf("result schema %q is not %q", j.Schema, SchemaVersion)
	}
	if _, err := ParseVerdict(string(j.Verdict)); err != nil {
		return err
	}
	*r = Result{
		Schema:        j.Schema,
		Check:         j.Check,
		Command:       j.Command,
		Backend:       j.Backend,
		BackendReason: j.BackendReason,
		Device:        Device(j.Device),
		Verdict:       j.Verdict,
		Status:        j.Status,
		Summary:       j.Summary,
		Duration:      time.Duration(j.DurationMS * float64(time.Millisecond)),
		Notes:         j.Notes,
	}
	if j.Started != nil {
		r.Started = *j.Started
	}
	for _, jt := range j.Tables {
		t := Table{Title: jt.Title, Columns: jt.Columns, FlagColumn: jt.FlagColumn}
		for _, row := range jt.Rows {
			t.Rows = append(t.Rows, Row{Cells: row.Cells, Flag: row.Flag})
		}
		r.Tables = append(r.Tables, &t)
	}
	names := make([]string, 0, len(j.Counters))
	for name := range j.Counters {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r.Counters = append(r.Counters, Counter{Name: name, Value: j.Counters[name]})
	}
	return nil
}

// WriteJSON writes r as indented JSON followed by a newline.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// ReadJSON decodes one result written by WriteJSON.
func ReadJSON(rd io.Reader) (*Result, error) {
	var r Result
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("reading result: %w", err)
	}
	return &r, nil
}
