package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"miotool/internal/hip"
)

// ExpectSchema names the expectation file layout.
const ExpectSchema = "miotool/rules-expect/v1"

// Basis says how an expected value is known.
type Basis string

// The bases, strongest first.
const (
	BasisMeasured   Basis = "measured"   // measured on the device the file names
	BasisReported   Basis = "reported"   // measured by a third party on hardware
	BasisSource     Basis = "source"     // read from the runtime's source code
	BasisDocumented Basis = "documented" // the vendor's documentation says so
	BasisInferred   Basis = "inferred"   // follows from the general rule; not measured
)

var bases = []Basis{BasisMeasured, BasisReported, BasisSource, BasisDocumented, BasisInferred}

// Expected is one cell's expected codes.
type Expected struct {
	Returns hip.Code
	End     hip.Code
	Basis   Basis  // may be empty in hand-written files
	Note    string // optional
	Line    int    // the cell's line in the file; 0 when not read from one
}

// Expectation is an expectation file: what each cell should measure.
type Expectation struct {
	Name    string // where it was read from, for messages
	Dialect hip.Dialect
	Device  string // what the values were taken from
	Source  string // how they were obtained
	Cells   map[CellKey]Expected
}

// ReadExpectation reads and checks an expectation file.
func ReadExpectation(path string) (*Expectation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("expectation file %s: %w", path, unwrapPathError(err))
	}
	return ParseExpectation(path, data)
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParseExpectation checks data as an expectation file named name. Every
// error names the file and, where it can, the line.
func ParseExpectation(name string, data []byte) (*Expectation, error) {
	fail := func(line int, format string, args ...any) error {
		where := "expectation file " + name
		if line > 0 {
			where += fmt.Sprintf(" line %d", line)
		}
		return fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail(0, "%s", strings.Join(strings.Fields(err.Error()), " "))
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fail(0, "want a mapping with schema, dialect and cells")
	}
	e := &Expectation{Name: name, Cells: map[CellKey]Expected{}}
	top := doc.Content[0]
	var cells *yaml.Node
	schema := ""
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "schema", "dialect", "device", "source":
			if v.Kind != yaml.ScalarNode {
				return nil, fail(k.Line, "%s must be a single value", k.Value)
			}
			switch k.Value {
			case "schema":
				schema = v.Value
			case "dialect":
				d, err := hip.ParseDialect(v.Value)
				if err != nil {
					return nil, fail(v.Line, "%v", err)
				}
				e.Dialect = d
			case "device":
				e.Device = v.Value
			case "source":
				e.Source = v.Value
			}
		case "cells":
			if v.Kind != yaml.SequenceNode {
				return nil, fail(k.Line, "cells must be a list")
			}
			cells = v
		default:
			return nil, fail(k.Line, "unknown key %q (want schema, dialect, device, source, cells)", k.Value)
		}
	}
	if schema != ExpectSchema {
		return nil, fail(top.Line, "schema is %q, want %q", schema, ExpectSchema)
	}
	if e.Dialect == "" {
		return nil, fail(top.Line, "dialect is missing (cuda or hip)")
	}
	if cells == nil {
		return nil, fail(top.Line, "cells is missing")
	}
	for _, c := range cells.Content {
		key, exp, err := parseCell(c)
		if err != nil {
			return nil, fail(c.Line, "%v", err)
		}
		if prev, dup := e.Cells[key]; dup {
			return nil, fail(c.Line, "cell %s is listed twice (also line %d)", key, prev.Line)
		}
		e.Cells[key] = exp
	}
	return e, nil
}

func parseCell(n *yaml.Node) (CellKey, Expected, error) {
	exp := Expected{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return CellKey{}, exp, errors.New("a cell must be a mapping")
	}
	fields := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "action", "capture", "thread", "mode", "returns", "end", "basis", "note":
		default:
			return CellKey{}, exp, fmt.Errorf("unknown cell key %q (want action, capture, thread, mode, returns, end, basis, note)", k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return CellKey{}, exp, fmt.Errorf("%s must be a single value", k.Value)
		}
		fields[k.Value] = v.Value
	}
	for _, req := range []string{"action", "capture", "thread", "mode", "returns", "end"} {
		if _, ok := fields[req]; !ok {
			return CellKey{}, exp, fmt.Errorf("cell lacks %s", req)
		}
	}
	key, err := makeKey(fields["action"], fields["capture"], fields["thread"], fields["mode"])
	if err != nil {
		return key, exp, err
	}
	if exp.Returns, err = parseCode("returns", fields["returns"]); err != nil {
		return key, exp, err
	}
	if exp.End, err = parseCode("end", fields["end"]); err != nil {
		return key, exp, err
	}
	if b, ok := fields["basis"]; ok {
		if !slices.Contains(bases, Basis(b)) {
			return key, exp, fmt.Errorf("basis %q: want measured, reported, source, documented or inferred", b)
		}
		exp.Basis = Basis(b)
	}
	exp.Note = fields["note"]
	return key, exp, nil
}

func parseCode(field, s string) (hip.Code, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a status code number such as 0, 600 or 901", field, s)
	}
	return hip.Code(n), nil
}

// FromMeasurement turns valid measured cells into expectations with basis
// "measured", so a GPU run can become the reference.
func FromMeasurement(m *Measurement, source string) *Expectation {
	p := m.Props
	device := p.Name
	if p.Arch != "" {
		device += " (" + p.Arch + ")"
	}
	if p.RuntimeVersion != "" || p.DriverVersion != "" {
		device += fmt.Sprintf(", runtime %s, driver %s", p.RuntimeVersion, p.DriverVersion)
	}
	e := &Expectation{Dialect: m.Dialect, Device: device, Source: source, Cells: map[CellKey]Expected{}}
	for _, o := range m.Outcomes {
		if o.Valid() {
			e.Cells[o.Key] = Expected{Returns: o.Returns, End: o.End, Basis: BasisMeasured}
		}
	}
	return e
}

// WriteExpectation writes e, one cell per line in matrix order, each
// action's cells under a comment naming its call.
func WriteExpectation(w io.Writer, e *Expectation) error {
	var b bytes.Buffer
	b.WriteString(`# miotool capture-rules expectations. Check a device against them with
#   miotool rules --expect <this file>
# Each cell: action; capture, the mode the capture on stream A was begun with;
# thread, same (the thread that began the capture) or other (another OS thread);
# mode, the acting thread's interaction mode (global is the default, relaxed and
# thread-local mean the thread switched itself around the call and back);
# returns, the code the action returned; end, the code end-capture returned on
# the capturing thread afterwards; basis, how the values are known (measured,
# reported, source, documented or inferred); note, optional.
# Set-up of every cell: stream B (non-blocking) runs a spin kernel and has event
# evB recorded after it; buffer p (1 MiB) is allocated; stream A (non-blocking)
# begins the capture and a tiny kernel is launched into it (and event evA is
# recorded into it for the captured-event actions); then the action; then A
# ends its capture on the capturing thread. The actions of pinned host memory
# use h (1 MiB, allocated before the capture) and m (1 MiB of mapped host pages,
# registered before the capture for unregistering it); module-unload unloads
# mod, a module loaded before the capture; the legacy-stream actions launch the
# tiny kernel on the legacy default stream, with A created blocking for the
# blocking-capture one.
`)
	fmt.Fprintf(&b, "schema: %s\n", ExpectSchema)
	fmt.Fprintf(&b, "dialect: %s\n", e.Dialect)
	fmt.Fprintf(&b, "device: %s\n", yamlString(e.Device))
	fmt.Fprintf(&b, "source: %s\n", yamlString(e.Source))
	b.WriteString("cells:\n")
	var last Action
	for _, k := range orderedKeys(e.Cells) {
		x := e.Cells[k]
		if k.Action != last {
			fmt.Fprintf(&b, "  # %s\n", k.Action.Label(e.Dialect))
			last = k.Action
		}
		fmt.Fprintf(&b, "  - {action: %s, capture: %s, thread: %s, mode: %s, returns: %d, end: %d",
			k.Action, k.Capture, k.ThreadName(), k.Mode, int(x.Returns), int(x.End))
		if x.Basis != "" {
			fmt.Fprintf(&b, ", basis: %s", x.Basis)
		}
		if x.Note != "" {
			fmt.Fprintf(&b, ", note: %s", yamlString(x.Note))
		}
		b.WriteString("}\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// orderedKeys lists keys in matrix order, then any others by name.
func orderedKeys(cells map[CellKey]Expected) []CellKey {
	var out []CellKey
	seen := map[CellKey]bool{}
	for _, k := range Matrix() {
		if _, ok := cells[k]; ok {
			out = append(out, k)
			seen[k] = true
		}
	}
	var rest []CellKey
	for k := range cells {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(a, b CellKey) int { return strings.Compare(a.String(), b.String()) })
	return append(out, rest...)
}

// yamlString quotes s as a YAML double-quoted scalar.
func yamlString(s string) string {
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: s})
	if err != nil {
		return `""`
	}
	return strings.TrimSuffix(string(out), "\n")
}

// Difference is a measured cell that does not match its expectation.
type Difference struct {
	Key  CellKey
	Got  Outcome
	Want Expected
}

// Describe names the cell and both values, e.g. "cuStreamQuery(B), global
// capture, other thread: returned 600 NOT_READY, end 0 SUCCESS; expected
// 900 ..., end 901 ... (measured, line 12)".
func (d Difference) Describe(dialect hip.Dialect) string {
	basis := string(d.Want.Basis)
	if basis == "" {
		basis = "basis not given"
	}
	where := basis
	if d.Want.Line > 0 {
		where += fmt.Sprintf(", line %d", d.Want.Line)
	}
	return fmt.Sprintf("%s [%s]: returned %s, end %s; expected %s, end %s (%s)",
		d.Key.Describe(dialect), d.Key,
		CodeText(d.Got.Returns, dialect), CodeText(d.Got.End, dialect),
		CodeText(d.Want.Returns, dialect), CodeText(d.Want.End, dialect), where)
}

// Comparison is a measurement held against an expectation.
type Comparison struct {
	Differences []Difference
	// Missing are measured cells the file has no expectation for.
	Missing []CellKey
	// Compared counts the valid measured cells that had an expectation.
	Compared int
}

// Compare holds every valid measured cell against e.
func Compare(m *Measurement, e *Expectation) Comparison {
	var c Comparison
	for _, o := range m.Outcomes {
		if !o.Valid() {
			continue
		}
		want, ok := e.Cells[o.Key]
		if !ok {
			c.Missing = append(c.Missing, o.Key)
			continue
		}
		c.Compared++
		if want.Returns != o.Returns || want.End != o.End {
			c.Differences = append(c.Differences, Difference{Key: o.Key, Got: o, Want: want})
		}
	}
	return c
}
