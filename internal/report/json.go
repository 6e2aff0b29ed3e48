package report

import (
	"bytes"
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
	RunID         string           `json:"run_id,omitempty"`
	Host          string           `json:"host,omitempty"`
	Backend       string           `json:"backend"`
	BackendReason string           `json:"backend_reason"`
	Device        jsonDevice       `json:"device"`
	Verdict       Verdict          `json:"verdict"`
	ExitCode      int              `json:"exit_code"`
	Status        string           `json:"status,omitempty"`
	Summary       string           `json:"summary"`
	Cases         *jsonCases       `json:"cases,omitempty"`
	Started       *time.Time       `json:"started,omitempty"`
	DurationMS    float64          `json:"duration_ms"`
	Tables        []jsonTable      `json:"tables"`
	Notes         []string         `json:"notes"`
	Counters      map[string]int64 `json:"counters"`
}

// jsonCases are a run's sub-tests; absent when the check did not count them.
type jsonCases struct {
	Passed int `json:"passed"`
	Total  int `json:"total"`
}

func toJSONCases(c Cases) *jsonCases {
	if c.Total <= 0 {
		return nil
	}
	return &jsonCases{Passed: c.Passed, Total: c.Total}
}

func (j *jsonCases) cases() Cases {
	if j == nil {
		return Cases{}
	}
	return Cases{Passed: j.Passed, Total: j.Total}
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
	// Keys and Records are derived from the rows for jq and friends: each
	// row as an object keyed by its column's FieldKey, the flag column
	// included when a row is flagged.
	Keys    []string     `json:"keys"`
	Records []jsonRecord `json:"records"`
}

// jsonRecord is a row as an object whose keys keep the column order (a
// Go map would sort them). It is derived: decoding ignores it. The cells
// of a numeric column are numbers, its blank cells null.
type jsonRecord struct {
	keys, values []string
	numeric      []bool
}

func (r jsonRecord) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as WriteJSON writes every other string
	b.WriteByte('{')
	for i, k := range r.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		switch v := r.values[i]; {
		case r.numeric[i] && isJSONNumber(v):
			b.WriteString(v) // the cell's own text, which JSON reads as that number
		case r.numeric[i]:
			b.WriteString("null")
		default:
			if err := enc.Encode(v); err != nil {
				return nil, err
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (r *jsonRecord) UnmarshalJSON([]byte) error { return nil }

// numericColumns marks the columns whose records are numbers: every cell
// is a JSON number or blank ("" or "-"), and one at least is a number. The
// flag column (last when flagged) never is. A column is numeric or not
// as a whole, so that a key has one type in every record.
func numericColumns(rows [][]string, width int, flagged bool) []bool {
	numeric := make([]bool, width)
	for i := range numeric {
		if flagged && i == width-1 {
			continue
		}
		some, all := false, true
		for _, row := range rows {
			switch v := row[i]; {
			case isJSONNumber(v):
				some = true
			case v == "" || v == "-":
			default:
				all = false
			}
		}
		numeric[i] = some && all
	}
	return numeric
}

// isJSONNumber reports whether s is a number as JSON writes one
// (RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?).
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

type jsonRow struct {
	Cells []string `json:"cells"`
	Flag  string   `json:"flag,omitempty"`
}

// MarshalJSON encodes the result in the miotool/result/v3 layout.
func (r *Result) MarshalJSON() ([]byte, error) {
	j := jsonResult{
		Schema:        r.Schema,
		Check:         r.Check,
		Command:       r.Command,
		RunID:         r.RunID,
		Host:          r.Host,
		Backend:       r.Backend,
		BackendReason: r.BackendReason,
		Device:        jsonDevice(r.Device),
		Verdict:       r.Verdict,
		ExitCode:      r.ExitCode(),
		Status:        r.Status,
		Summary:       r.Summary,
		Cases:         toJSONCases(r.Cases),
		DurationMS:    float64(r.Duration.Microseconds()) / 1000,
		Tables:        make([]jsonTable, len(r.Tables)),
		Notes:         append([]string{}, r.Notes...),
		Counters:      make(map[string]int64, len(r.Counters)),
	}
	// Whatever layout the result was read in, it is written in this one.
	j.Schema = SchemaVersion
	if !r.Started.IsZero() {
		t := r.Started
		j.Started = &t
	}
	for i, t := range r.Tables {
		jt := jsonTable{Title: t.Title, Columns: append([]string{}, t.Columns...), Rows: make([]jsonRow, len(t.Rows)), FlagColumn: t.FlagColumn}
		for k, row := range t.Rows {
			jt.Rows[k] = jsonRow{Cells: append([]string{}, row.Cells...), Flag: row.Flag}
		}
		header, rows := t.grid()
		jt.Keys = recordKeys(header)
		numeric := numericColumns(rows, len(header), t.Flagged() > 0)
		jt.Records = make([]jsonRecord, len(rows))
		for k, row := range rows {
			jt.Records[k] = jsonRecord{keys: jt.Keys, values: row, numeric: numeric}
		}
		j.Tables[i] = jt
	}
	for _, c := range r.Counters {
		base := FieldKey(c.Name)
		if base == "" {
			base = "counter"
		}
		key := base
		for n := 2; ; n++ {
			if _, taken := j.Counters[key]; !taken {
				break
			}
			key = fmt.Sprintf("%s_%d", base, n)
		}
		j.Counters[key] = c.Value
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the miotool/result/v3 layout, and v2 and v1 before it.
// Counters come back in key order, named by their keys, since JSON
// objects carry no order; records are derived and not read.
func (r *Result) UnmarshalJSON(data []byte) error {
	var j jsonResult
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if !isResultSchema(j.Schema) {
		return fmt.Errorf("result schema %q is not %q", j.Schema, SchemaVersion)
	}
	if _, err := ParseVerdict(string(j.Verdict)); err != nil {
		return err
	}
	*r = Result{
		Schema:        j.Schema,
		Check:         j.Check,
		Command:       j.Command,
		RunID:         j.RunID,
		Host:          j.Host,
		Backend:       j.Backend,
		BackendReason: j.BackendReason,
		Device:        Device(j.Device),
		Verdict:       j.Verdict,
		Status:        j.Status,
		Summary:       j.Summary,
		Cases:         j.Cases.cases(),
		Duration:      time.Duration(j.DurationMS * float64(time.Millisecond)),
		Notes:         j.Notes,
	}
	if j.ExitCode != j.Verdict.ExitCode() {
		r.ExitStatus = j.ExitCode
	}
	if j.Started != nil {
		r.Started = *j.Started
	}
	for _, jt := range j.Tables {
		t := Table{Title: jt.Title, Columns: jt.Columns, FlagColumn: jt.FlagColumn}
		for _, row := range jt.Rows {
			t.Rows = append(t.Rows, Row(row))
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
