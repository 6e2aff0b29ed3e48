// Package fit trains miotool's own TunaNet: a small multi-layer perceptron
// that ranks conv.Solvers() for a convolution, fitted with softmax
// cross-entropy and plain full-batch gradient descent to find results
// measured on a device, and written in MIOpen's formats (a frugally-deep
// JSON model with embedded tests, and a TunaNet metadata file).
//
// The training data is a CSV file that tools/tunanet-collect writes: one
// row per problem with its geometry, each solver's measured time and the
// winner, after "# key: value" lines that say where it was measured.
//
// Fitting is deterministic: the same data and Config give the same bytes on
// every platform. The arithmetic is float64 with every product rounded
// before it is added (an explicit conversion, so the compiler cannot fuse
// it into an FMA), the exponential is this package's own, and the initial
// weights come from a seeded PCG generator.
package fit

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"miotool/internal/aiheur"
)

// Geometry columns of the CSV, in order; solver time columns and the winner
// follow.
var geometryColumns = []string{"n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w",
	"stride_h", "stride_w", "dil_h", "dil_w", "groups"}

// timePrefix starts the name of a solver's time column, e.g.
// "ms:ConvImplicitGemmTiledFwd".
const timePrefix = "ms:"

// winnerColumn is the last column: the solver find chose.
const winnerColumn = "winner"

// Geometry is a forward 2D convolution as the CSV records it (NCHW, FP32).
type Geometry struct {
	N, C, H, W, K, R, S  int
	PadH, PadW           int
	StrideH, StrideW     int
	DilationH, DilationW int
	Groups               int
}

func (g Geometry) values() []int {
	return []int{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.PadH, g.PadW, g.StrideH, g.StrideW, g.DilationH, g.DilationW, g.Groups}
}

func (g *Geometry) fields() []*int {
	return []*int{&g.N, &g.C, &g.H, &g.W, &g.K, &g.R, &g.S, &g.PadH, &g.PadW, &g.StrideH, &g.StrideW, &g.DilationH, &g.DilationW, &g.Groups}
}

// Problem is the geometry as the heuristics see it: forward, FP32, NCHW.
func (g Geometry) Problem() aiheur.Problem {
	return aiheur.Problem{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, R: g.R, S: g.S,
		PadH: g.PadH, PadW: g.PadW, StrideH: g.StrideH, StrideW: g.StrideW,
		DilationH: g.DilationH, DilationW: g.DilationW, Groups: g.Groups,
		Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
}

// Sample is one measured problem.
type Sample struct {
	Geometry Geometry
	// TimesMs holds each solver's time, in the dataset's solver order; a
	// solver that did not apply, failed or timed out has no time (NaN is
	// never stored: Has says which are present).
	TimesMs []float64
	Has     []bool
	Winner  string
}

// Info is one "# key: value" line of the file's preamble.
type Info struct {
	Key, Value string
}

// Dataset is a parsed training-data file.
type Dataset struct {
	Info    []Info
	Solvers []string
	Samples []Sample
	// SHA256 is the hex digest of the file's bytes (empty for a dataset
	// built in memory).
	SHA256 string
}

// Lookup returns the value of an Info key ("" when absent).
func (d *Dataset) Lookup(key string) string {
	for _, in := range d.Info {
		if in.Key == key {
			return in.Value
		}
	}
	return ""
}

// WriteCSV writes the dataset: its Info lines, the header, one row per
// sample. Times are written with 6 significant digits.
func WriteCSV(w io.Writer, d *Dataset) error {
	var b bytes.Buffer
	for _, in := range d.Info {
		if strings.ContainsAny(in.Key, ":\n") || strings.Contains(in.Value, "\n") || in.Key == "" {
			return fmt.Errorf("info line %q: %q cannot be written (the key must be non-empty without ':' and neither may hold a newline)", in.Key, in.Value)
		}
		fmt.Fprintf(&b, "# %s: %s\n", in.Key, in.Value)
	}
	cw := csv.NewWriter(&b)
	header := slices.Clone(geometryColumns)
	for _, s := range d.Solvers {
		header = append(header, timePrefix+s)
	}
	header = append(header, winnerColumn)
	if err := cw.Write(header); err != nil {
		return err
	}
	for i, s := range d.Samples {
		if len(s.TimesMs) != len(d.Solvers) || len(s.Has) != len(d.Solvers) {
			return fmt.Errorf("sample %d has %d times for %d solvers", i, len(s.TimesMs), len(d.Solvers))
		}
		row := make([]string, 0, len(header))
		for _, v := range s.Geometry.values() {
			row = append(row, strconv.Itoa(v))
		}
		for j, t := range s.TimesMs {
			if s.Has[j] {
				row = append(row, strconv.FormatFloat(t, 'g', 6, 64))
			} else {
				row = append(row, "")
			}
		}
		row = append(row, s.Winner)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ReadCSV parses a training-data file. Errors name the line and column.
func ReadCSV(data []byte) (*Dataset, error) {
	sum := sha256.Sum256(data)
	d := &Dataset{SHA256: hex.EncodeToString(sum[:])}
	rest := data
	line := 0
	for len(rest) > 0 && rest[0] == '#' {
		line++
		text, after, _ := bytes.Cut(rest, []byte("\n"))
		rest = after
		body := strings.TrimSpace(strings.TrimPrefix(string(text), "#"))
		if body == "" {
			continue
		}
		key, value, ok := strings.Cut(body, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: a preamble line must read \"# key: value\", got %q", line, string(text))
		}
		d.Info = append(d.Info, Info{Key: strings.TrimSpace(key), Value: strings.TrimSpace(value)})
	}
	r := csv.NewReader(bytes.NewReader(rest))
	r.ReuseRecord = false
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("line %d: no header row", line+1)
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	headerLine := line + 1
	if len(header) < len(geometryColumns)+2 {
		return nil, fmt.Errorf("line %d: the header has %d columns; want %s, one %s<solver> column per solver and %s",
			headerLine, len(header), strings.Join(geometryColumns, ","), timePrefix, winnerColumn)
	}
	for i, want := range geometryColumns {
		if header[i] != want {
			return nil, fmt.Errorf("line %d: column %d is %q, want %q", headerLine, i+1, header[i], want)
		}
	}
	if last := header[len(header)-1]; last != winnerColumn {
		return nil, fmt.Errorf("line %d: the last column is %q, want %q", headerLine, last, winnerColumn)
	}
	for i, h := range header[len(geometryColumns) : len(header)-1] {
		name, ok := strings.CutPrefix(h, timePrefix)
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: column %d is %q, want %s<solver name>", headerLine, len(geometryColumns)+i+1, h, timePrefix)
		}
		if slices.Contains(d.Solvers, name) {
			return nil, fmt.Errorf("line %d: solver %s has two columns", headerLine, name)
		}
		d.Solvers = append(d.Solvers, name)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		row, _ := r.FieldPos(0)
		row += line
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %v", pe.Line+line, pe.Err)
			}
			return nil, err
		}
		s, err := parseRow(rec, header, d.Solvers)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", row, err)
		}
		d.Samples = append(d.Samples, s)
	}
	if len(d.Samples) == 0 {
		return nil, errors.New("the file has a header but no samples")
	}
	return d, nil
}

func parseRow(rec, header, solvers []string) (Sample, error) {
	var s Sample
	for i, f := range s.Geometry.fields() {
		v, err := strconv.Atoi(strings.TrimSpace(rec[i]))
		if err != nil {
			return s, fmt.Errorf("column %s: %q is not an integer", header[i], rec[i])
		}
		*f = v
	}
	if err := s.Geometry.Problem().Validate(); err != nil {
		return s, err
	}
	s.TimesMs = make([]float64, len(solvers))
	s.Has = make([]bool, len(solvers))
	for j := range solvers {
		cell := strings.TrimSpace(rec[len(geometryColumns)+j])
		if cell == "" {
			continue
		}
		v, err := strconv.ParseFloat(cell, 64)
		if err != nil || v < 0 || v != v {
			return s, fmt.Errorf("column %s: %q is not a time in milliseconds", header[len(geometryColumns)+j], cell)
		}
		s.TimesMs[j], s.Has[j] = v, true
	}
	s.Winner = strings.TrimSpace(rec[len(rec)-1])
	idx := slices.Index(solvers, s.Winner)
	switch {
	case s.Winner == "":
		return s, errors.New("the winner is empty")
	case idx < 0:
		return s, fmt.Errorf("the winner %q is not one of the solver columns (%s)", s.Winner, strings.Join(solvers, ", "))
	case !s.Has[idx]:
		return s, fmt.Errorf("the winner %s has no time", s.Winner)
	}
	return s, nil
}
