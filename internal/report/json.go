package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
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
	Status        string           `json:"status,omitempty"` // derived since v4; before, the status in place of the verdict's word
	Detail        string           `json:"detail,omitempty"`
	Summary       string           `json:"summary"`
	Cases         *jsonCases       `json:"cases,omitempty"`
	Progress      *jsonProgress    `json:"progress,omitempty"`
	Shard         *jsonShard       `json:"shard,omitempty"`
	Started       *time.Time       `json:"started,omitempty"`
	DurationMS    float64          `json:"duration_ms"`
	Tables        []jsonTable      `json:"tables"`
	Notes         []string         `json:"notes"`
	Counters      map[string]int64 `json:"counters"`
}

// jsonCases are a run's sub-tests; absent when the check did not count them.
type jsonCases struct {
	Passed int    `json:"passed"`
	Total  int    `json:"total"`
	Unit   string `json:"unit,omitempty"`
}

func toJSONCases(c Cases) *jsonCases {
	if c.Total <= 0 {
		return nil
	}
	return &jsonCases{Passed: c.Passed, Total: c.Total, Unit: c.Unit}
}

func (j *jsonCases) cases() Cases {
	if j == nil {
		return Cases{}
	}
	return Cases{Passed: j.Passed, Total: j.Total, Unit: j.Unit}
}

// jsonProgress is how far an interrupted run got; absent when not said.
type jsonProgress struct {
	Finished int    `json:"finished"`
	Planned  int    `json:"planned"`
	Unit     string `json:"unit,omitempty"`
}

func toJSONProgress(p Progress) *jsonProgress {
	if p.Planned <= 0 {
		return nil
	}
	return &jsonProgress{Finished: p.Finished, Planned: p.Planned, Unit: p.Unit}
}

func (j *jsonProgress) progress() Progress {
	if j == nil {
		return Progress{}
	}
	return Progress{Finished: j.Finished, Planned: j.Planned, Unit: j.Unit}
}

// jsonShard names the shard a result is; absent when it is none.
type jsonShard struct {
	Index int    `json:"index"`
	Count int    `json:"count"`
	Split string `json:"split"`
	Set   string `json:"set,omitempty"`
}

func toJSONShard(sh *Shard) *jsonShard {
	if sh == nil {
		return nil
	}
	return &jsonShard{Index: sh.Index, Count: sh.Count, Split: sh.Split, Set: sh.Set}
}

func (j *jsonShard) shard() *Shard {
	if j == nil {
		return nil
	}
	return &Shard{Index: j.Index, Count: j.Count, Split: j.Split, Set: j.Set}
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
// of a numeric column are numbers (a cell's value where it has one), its
// other cells null.
type jsonRecord struct {
	keys, values []string
	numeric      []bool
}

// recordCells are the cells of a table's records: where a column has
// values (Cell), each row's value, its text where that is a number, or
// "" (null); elsewhere the text. valued marks the columns with values.
func recordCells(rows, values [][]string, width int) (cells [][]string, valued []bool) {
	valued = make([]bool, width)
	for _, vs := range values {
		for i, v := range vs {
			valued[i] = valued[i] || v != ""
		}
	}
	cells = make([][]string, len(rows))
	for k, row := range rows {
		cells[k] = slices.Clone(row)
		for i := range row {
			switch {
			case !valued[i]:
			case values[k][i] != "":
				cells[k][i] = values[k][i]
			case !isJSONNumber(row[i]):
				cells[k][i] = ""
			}
		}
	}
	return cells, valued
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
	// Values are the cells' values for machines where the text is for
	// people (Cell): a number, or null where the cell has none; absent
	// when no cell of the row has one.
	Values []json.RawMessage `json:"values,omitempty"`
}

func toJSONRow(r Row) jsonRow {
	j := jsonRow{Cells: append([]string{}, r.Cells...), Flag: r.Flag}
	if slices.ContainsFunc(r.Values, func(v string) bool { return v != "" }) {
		j.Values = make([]json.RawMessage, len(r.Cells))
		for i := range j.Values {
			j.Values[i] = json.RawMessage("null")
			if i < len(r.Values) && isJSONNumber(r.Values[i]) {
				j.Values[i] = json.RawMessage(r.Values[i])
			}
		}
	}
	return j
}

func (j jsonRow) row(where string) (Row, error) {
	r := Row{Cells: j.Cells, Flag: j.Flag}
	if len(j.Values) == 0 {
		return r, nil
	}
	if len(j.Values) != len(j.Cells) {
		return Row{}, fmt.Errorf("%s.values: %d values for %d cells", where, len(j.Values), len(j.Cells))
	}
	r.Values = make([]string, len(j.Values))
	for i, v := range j.Values {
		text := strings.TrimSpace(string(v))
		switch {
		case text == "null":
		case isJSONNumber(text):
			r.Values[i] = text
		default:
			return Row{}, fmt.Errorf("%s.values[%d]: %s is neither a number nor null", where, i, text)
		}
	}
	return r, nil
}

// MarshalJSON encodes the result in the miotool/result/v4 layout.
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
		Status:        r.ChecklistStatus(),
		Detail:        r.Detail,
		Summary:       r.Summary,
		Cases:         toJSONCases(r.Cases),
		Progress:      toJSONProgress(r.Progress),
		Shard:         toJSONShard(r.Shard),
		DurationMS:    durationMS(r.Duration),
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
			jt.Rows[k] = toJSONRow(row)
		}
		header, rows := t.grid()
		jt.Keys = recordKeys(header)
		cells, valued := recordCells(rows, t.valueGrid(len(header)), len(header))
		numeric := numericColumns(rows, len(header), t.Flagged() > 0)
		for i := range numeric {
			numeric[i] = numeric[i] || valued[i]
		}
		jt.Records = make([]jsonRecord, len(rows))
		for k, row := range cells {
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

// UnmarshalJSON decodes the miotool/result/v4 layout, and v3, v2 and v1
// before it. Counters come back in key order, named by their keys, since
// JSON objects carry no order; records and, from v4, status are derived
// and not read (a v3 status is kept as Status, the detail it may say).
// A number out of range, or an exit code that contradicts the verdict, is
// refused with the field it is in.
func (r *Result) UnmarshalJSON(data []byte) error {
	var j jsonResult
	var exit struct {
		ExitCode *int `json:"exit_code"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if err := json.Unmarshal(data, &exit); err != nil {
		return err
	}
	if !isResultSchema(j.Schema) {
		return fmt.Errorf("result schema %q is not %q", j.Schema, SchemaVersion)
	}
	if _, err := ParseVerdict(string(j.Verdict)); err != nil {
		return fmt.Errorf("verdict: %w", err)
	}
	d, err := readDuration("duration_ms", j.DurationMS)
	if err != nil {
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
		Detail:        j.Detail,
		Summary:       j.Summary,
		Cases:         j.Cases.cases(),
		Progress:      j.Progress.progress(),
		Shard:         j.Shard.shard(),
		Duration:      d,
		Notes:         j.Notes,
	}
	if j.Schema != SchemaVersion && r.Detail == "" {
		r.Detail = legacyDetail(j.Status) // v3 and before: the command's own status
	}
	if err := checkCases("cases", r.Cases); err != nil {
		return err
	}
	if err := checkProgress("progress", r.Progress); err != nil {
		return err
	}
	if r.Shard != nil {
		if why := r.Shard.valid(); why != "" {
			return fmt.Errorf("shard: %s", why)
		}
	}
	if exit.ExitCode != nil {
		if err := checkResultExit("exit_code", j.Verdict, *exit.ExitCode); err != nil {
			return err
		}
		if *exit.ExitCode != j.Verdict.ExitCode() {
			r.ExitStatus = *exit.ExitCode
		}
	}
	if j.Started != nil {
		r.Started = *j.Started
	}
	for i, jt := range j.Tables {
		t := Table{Title: jt.Title, Columns: jt.Columns, FlagColumn: jt.FlagColumn}
		for k, jr := range jt.Rows {
			row, err := jr.row(fmt.Sprintf("tables[%d].rows[%d]", i, k))
			if err != nil {
				return err
			}
			t.Rows = append(t.Rows, row)
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
