package aiheur

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strings"

	"miotool/internal/aiheur/fdeep"
)

// ErrNotSupported marks a problem a model does not cover; MIOpen then
// makes no AI prediction and falls back to its other heuristics.
var ErrNotSupported = errors.New("problem not supported by the model")

// tunaNetSpec is what differs between the TunaNet classes of MIOpen 3.3
// (M24): which metadata statistics normalise the features, and which
// problems the model accepts.
type tunaNetSpec struct {
	statsSplit string
	supports   func(Problem) error
}

// BuiltinArch names the model set miotool fits to its own solvers
// (conv.Solvers) from find results measured on a device; it is the
// embedded default where no MIOpen model directory is found.
const BuiltinArch = "miotool"

var tunaNetSpecs = map[string]tunaNetSpec{
	"gfx908": {statsSplit: "overall", supports: supportsGfx908},
	"gfx90a": {statsSplit: "overall", supports: supportsGfx90aGfx942},
	// gfx942 deliberately normalises with the test-split statistics.
	"gfx942":    {statsSplit: "test", supports: supportsGfx90aGfx942},
	BuiltinArch: {statsSplit: "overall", supports: supportsBuiltin},
}

// TunaNetArchs lists the archs with a TunaNet model set.
func TunaNetArchs() []string {
	archs := make([]string, 0, len(tunaNetSpecs))
	for a := range tunaNetSpecs {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	return archs
}

// TunaNetArch is the model set MIOpen 3.3 picks for a device: gfx942 and
// gfx90a have their own, every other device gets gfx908's (whose checks
// then usually reject the problem). Target features after ':' are ignored.
func TunaNetArch(device string) string {
	arch, _, _ := strings.Cut(device, ":")
	if arch == "gfx942" || arch == "gfx90a" {
		return arch
	}
	return "gfx908"
}

// TunaNetFiles are the model and metadata file names of an arch.
func TunaNetFiles(arch string) (model, metadata string) {
	return arch + ".tn.model", arch + "_metadata.tn.model"
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotSupported}, args...)...)
}

func supportedPrecision(p Problem) error {
	switch p.DataType {
	case "FP32", "FP16", "BF16":
		return nil
	}
	return unsupported("data type %s (want FP32, FP16 or BF16)", p.DataType)
}

// supportsGfx908 is MIOpen's Gfx908Model::IsProblemSupported for 2D.
func supportsGfx908(p Problem) error {
	switch {
	case p.Groups != 1:
		return unsupported("group count %d (gfx908 TunaNet needs 1)", p.Groups)
	case p.Layout != "NCHW" && p.Layout != "NCDHW":
		return unsupported("layout %s (gfx908 TunaNet needs NCHW)", p.Layout)
	case p.R != p.S:
		return unsupported("filter %dx%d is not square", p.R, p.S)
	case p.PadH != p.PadW:
		return unsupported("padding %dx%d is not symmetric", p.PadH, p.PadW)
	case p.StrideH != p.StrideW:
		return unsupported("stride %dx%d is not square", p.StrideH, p.StrideW)
	case p.DilationH != 1 || p.DilationW != 1:
		return unsupported("dilation %dx%d (gfx908 TunaNet needs 1x1)", p.DilationH, p.DilationW)
	}
	return supportedPrecision(p)
}

// supportsGfx90aGfx942 is IsProblemSupported of the gfx90a and gfx942
// classes. (Their log says dilation "must be 1" but the code only checks
// that both are equal; this follows the code.)
func supportsGfx90aGfx942(p Problem) error {
	switch {
	case p.Layout != "NCHW":
		return unsupported("layout %s (TunaNet needs NCHW)", p.Layout)
	case p.StrideH != p.StrideW:
		return unsupported("stride %dx%d is not square", p.StrideH, p.StrideW)
	case p.DilationH != p.DilationW:
		return unsupported("dilation %dx%d is not square", p.DilationH, p.DilationW)
	case p.Bias:
		return unsupported("bias (TunaNet needs none)")
	}
	return supportedPrecision(p)
}

// supportsBuiltin accepts what miotool's own solvers compute: forward FP32
// NCHW convolutions without bias.
func supportsBuiltin(p Problem) error {
	switch {
	case p.Direction != Forward:
		return unsupported("direction %v (miotool's solvers are forward only)", p.Direction)
	case p.DataType != "FP32":
		return unsupported("data type %s (miotool's solvers are FP32 only)", p.DataType)
	case p.Layout != "NCHW":
		return unsupported("layout %s (miotool's solvers need NCHW)", p.Layout)
	case p.Bias:
		return unsupported("bias (miotool's solvers have none)")
	}
	return nil
}

// TunaNetMetadata is an <arch>_metadata.tn.model file, as MIOpen reads it.
type TunaNetMetadata struct {
	NumInputs, NumOutputs, NumSolvers int
	Direction, Precision, Layout      map[string]int
	// Solvers maps a solver output index (after the offset) to its name.
	Solvers []string
	// Features are conv_params_used_as_features, in input order.
	Features []string
	// Mean and Std normalise each feature; StatsSplit says which split of
	// the file's statistics they come from ("overall" or "test").
	Mean, Std  []float32
	StatsSplit string
}

// Offset is how many leading outputs are not solver scores (they come from
// multi-task training and are dropped).
func (m *TunaNetMetadata) Offset() int { return m.NumOutputs - m.NumSolvers }

// ParseTunaNetMetadata reads a metadata file, taking the normalisation
// statistics from statsSplit ("overall", "train" or "test").
func ParseTunaNetMetadata(data []byte, statsSplit string) (*TunaNetMetadata, error) {
	var raw struct {
		NumInputs  *int `json:"num_inputs"`
		NumOutputs *int `json:"num_outputs"`
		NumSolvers *int `json:"num_solvers"`
		Encodings  struct {
			Direction map[string]int `json:"Direction"`
			Precision map[string]int `json:"Precision"`
			Layout    map[string]int `json:"Layout"`
			Solver    map[string]int `json:"solver"`
		} `json:"encodings"`
		Features []string `json:"conv_params_used_as_features"`
		Stats    map[string]struct {
			Features struct {
				Mean map[string]float64 `json:"mean"`
				Std  map[string]float64 `json:"std"`
			} `json:"features"`
		} `json:"stats"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("TunaNet metadata is not valid JSON: %v", err)
	}
	if raw.NumInputs == nil || raw.NumOutputs == nil || raw.NumSolvers == nil {
		return nil, errors.New("TunaNet metadata lacks num_inputs, num_outputs or num_solvers")
	}
	m := &TunaNetMetadata{
		NumInputs: *raw.NumInputs, NumOutputs: *raw.NumOutputs, NumSolvers: *raw.NumSolvers,
		Direction: raw.Encodings.Direction, Precision: raw.Encodings.Precision, Layout: raw.Encodings.Layout,
		Features: raw.Features, StatsSplit: statsSplit,
	}
	if m.NumInputs != len(m.Features) {
		return nil, fmt.Errorf("TunaNet metadata: num_inputs is %d but %d features are listed", m.NumInputs, len(m.Features))
	}
	if m.NumSolvers < 1 || m.NumSolvers > m.NumOutputs {
		return nil, fmt.Errorf("TunaNet metadata: num_solvers %d must be between 1 and num_outputs %d", m.NumSolvers, m.NumOutputs)
	}
	if len(raw.Encodings.Solver) != m.NumSolvers {
		return nil, fmt.Errorf("TunaNet metadata: encodings.solver has %d entries, num_solvers is %d", len(raw.Encodings.Solver), m.NumSolvers)
	}
	m.Solvers = make([]string, m.NumSolvers)
	for name, idx := range raw.Encodings.Solver {
		if idx < 0 || idx >= m.NumSolvers || m.Solvers[idx] != "" {
			return nil, fmt.Errorf("TunaNet metadata: solver %q has index %d, which is out of range or taken", name, idx)
		}
		m.Solvers[idx] = name
	}
	for _, enc := range []struct {
		name string
		m    map[string]int
	}{{"Direction", m.Direction}, {"Precision", m.Precision}, {"Layout", m.Layout}} {
		if len(enc.m) == 0 {
			return nil, fmt.Errorf("TunaNet metadata: encodings.%s is missing", enc.name)
		}
	}
	stats, ok := raw.Stats[statsSplit]
	if !ok {
		return nil, fmt.Errorf("TunaNet metadata has no stats.%s", statsSplit)
	}
	for _, name := range m.Features {
		if !knownTunaNetFeature(name) {
			return nil, fmt.Errorf("TunaNet metadata: feature %q is not one this tool can compute", name)
		}
		mean, okMean := stats.Features.Mean[name]
		std, okStd := stats.Features.Std[name]
		if !okMean || !okStd {
			return nil, fmt.Errorf("TunaNet metadata: stats.%s lacks the mean or std of %q", statsSplit, name)
		}
		if std == 0 || math.IsNaN(std) || math.IsInf(std, 0) || math.IsNaN(mean) || math.IsInf(mean, 0) {
			return nil, fmt.Errorf("TunaNet metadata: stats.%s of %q (mean %g, std %g) cannot normalise", statsSplit, name, mean, std)
		}
		m.Mean = append(m.Mean, float32(mean))
		m.Std = append(m.Std, float32(std))
	}
	return m, nil
}

// TunaNet is one arch's immediate-mode solver-ranking model.
type TunaNet struct {
	Arch  string
	Meta  *TunaNetMetadata
	Model *fdeep.Model
	spec  tunaNetSpec
}

// LoadTunaNet loads an arch's TunaNet model and metadata from fsys (a
// model directory or the embedded models); the model's self-tests run.
func LoadTunaNet(fsys fs.FS, arch string) (*TunaNet, error) {
	spec, ok := tunaNetSpecs[arch]
	if !ok {
		return nil, fmt.Errorf("no TunaNet model set for arch %q (known: %s)", arch, strings.Join(TunaNetArchs(), ", "))
	}
	if fsys == nil {
		return nil, errors.New("no model directory and no embedded models to load TunaNet from")
	}
	modelFile, metaFile := TunaNetFiles(arch)
	data, err := fs.ReadFile(fsys, metaFile)
	if err != nil {
		return nil, fmt.Errorf("loading TunaNet for %s: %w", arch, err)
	}
	meta, err := ParseTunaNetMetadata(data, spec.statsSplit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", metaFile, err)
	}
	model, err := fdeep.LoadFS(fsys, modelFile, fdeep.Options{})
	if err != nil {
		return nil, fmt.Errorf("loading TunaNet for %s: %w", arch, err)
	}
	in, out := model.InputShapes(), model.OutputShapes()
	if len(in) != 1 || in[0].Size() != meta.NumInputs || len(out) != 1 || out[0].Size() != meta.NumOutputs {
		model.Release()
		return nil, fmt.Errorf("%s takes %v and gives %v, but %s says %d inputs and %d outputs",
			modelFile, in, out, metaFile, meta.NumInputs, meta.NumOutputs)
	}
	return &TunaNet{Arch: arch, Meta: meta, Model: model, spec: spec}, nil
}

// Release frees the model's weights (see fdeep.Model.Release).
func (t *TunaNet) Release() bool { return t.Model.Release() }

// Supports is MIOpen's IsProblemSupported for this arch, minus the check
// that at least one of the model's solvers applies to the problem (that
// needs the solvers themselves). A nil error means supported; a problem
// that fails Validate gets that error; otherwise the error wraps
// ErrNotSupported and says why.
func (t *TunaNet) Supports(p Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := t.spec.supports(p); err != nil {
		return fmt.Errorf("TunaNet %s: %w", t.Arch, err)
	}
	return nil
}

var tunaNetFeatureNames = map[string]bool{
	// gfx90a and gfx942
	"Inp_0": true, "Inp_2": true, "Inp_3": true, "Out_0": true, "Out_2": true, "Out_3": true,
	"Fil_1": true, "Fil_2": true, "Pad_1": true, "Pad_2": true, "Str_1": true, "Str_2": true,
	"Dil_1": true, "Dil_2": true, "BatchSize": true, "Precision": true, "Direction": true, "GroupSize": true,
	// gfx908
	"InChannels": true, "InDepth": true, "InHeight": true, "InWidth": true, "FilterDim0": true,
	"FilterDim1": true, "FilterDim2": true, "OutChannels": true, "OutDepth": true, "OutHeight": true,
	"OutWidth": true, "Padding0": true, "Padding1": true, "Padding2": true, "Stride0": true,
	"Stride1": true, "Stride2": true, "Dilation1": true, "Dilation2": true, "Layout": true,
}

func knownTunaNetFeature(name string) bool { return tunaNetFeatureNames[name] }

// feature is one named TunaNet input, in forward convention.
func (t *TunaNet) feature(name string, p Problem) (float32, error) {
	v, err := t.Meta.feature(name, p)
	if err != nil {
		return 0, fmt.Errorf("TunaNet %s: %w", t.Arch, err)
	}
	return v, nil
}

// feature is the raw value of the named TunaNet input for p, in
// forward convention; the encoded ones (Precision, Direction, Layout) use
// the metadata's encodings.
func (m *TunaNetMetadata) feature(name string, p Problem) (float32, error) {
	encode := func(what string, enc map[string]int, key string) (float32, error) {
		v, ok := enc[key]
		if !ok {
			known := make([]string, 0, len(enc))
			for k := range enc {
				known = append(known, k)
			}
			sort.Strings(known)
			return 0, unsupported("no encoding for %s %q (known: %s)", what, key, strings.Join(known, ", "))
		}
		return float32(v), nil
	}
	v, ok := numericFeature(name, p)
	if ok {
		return float32(v), nil
	}
	switch name {
	case "Precision":
		return encode("precision", m.Precision, p.DataType)
	case "Direction":
		return encode("direction", m.Direction, p.Direction.String())
	case "Layout":
		return encode("layout", m.Layout, p.Layout)
	}
	return 0, fmt.Errorf("unknown feature %q", name)
}

// numericFeature is a feature that is a number of the problem itself.
func numericFeature(name string, p Problem) (int, bool) {
	switch name {
	case "Inp_0", "InChannels":
		return p.C, true
	case "Inp_2", "InHeight":
		return p.H, true
	case "Inp_3", "InWidth":
		return p.W, true
	case "Out_0", "OutChannels":
		return p.K, true
	case "Out_2", "OutHeight":
		return p.OutH(), true
	case "Out_3", "OutWidth":
		return p.OutW(), true
	case "Fil_1", "FilterDim1":
		return p.R, true
	case "Fil_2", "FilterDim2":
		return p.S, true
	case "Pad_1", "Padding1":
		return p.PadH, true
	case "Pad_2", "Padding2":
		return p.PadW, true
	case "Str_1", "Stride1":
		return p.StrideH, true
	case "Str_2", "Stride2":
		return p.StrideW, true
	case "Dil_1", "Dilation1":
		return p.DilationH, true
	case "Dil_2", "Dilation2":
		return p.DilationW, true
	case "BatchSize":
		return p.N, true
	case "GroupSize":
		return p.Groups, true
	case "InDepth", "OutDepth", "FilterDim0", "Stride0":
		return 1, true // a 2D problem's depth dimension
	case "Padding0":
		// MIOpen feeds 1 here, not the depth padding 0: the training data
		// was generated that way, so the model expects it.
		return 1, true
	}
	return 0, false
}

// RawFeatures is the model input for p before normalisation, in the order
// of Features (conv_params_used_as_features).
func (m *TunaNetMetadata) RawFeatures(p Problem) ([]float32, error) {
	raw := make([]float32, len(m.Features))
	for i, name := range m.Features {
		v, err := m.feature(name, p)
		if err != nil {
			return nil, err
		}
		raw[i] = v
	}
	return raw, nil
}

// Normalize applies the metadata's statistics to raw features, in float32
// as inference does: (raw - mean) / std.
func (m *TunaNetMetadata) Normalize(raw []float32) []float32 {
	out := make([]float32, len(raw))
	for i, v := range raw {
		out[i] = (v - m.Mean[i]) / m.Std[i]
	}
	return out
}

// Features returns the model input for p, raw and normalised with the
// arch's statistics.
func (t *TunaNet) Features(p Problem) (raw, normalized []float32, err error) {
	if err := t.Supports(p); err != nil {
		return nil, nil, err
	}
	raw = make([]float32, len(t.Meta.Features))
	for i, name := range t.Meta.Features {
		if raw[i], err = t.feature(name, p); err != nil {
			return nil, nil, err
		}
	}
	return raw, t.Meta.Normalize(raw), nil
}

// SolverScore is one solver's logit from the model.
type SolverScore struct {
	Solver string
	Index  int // position in the metadata's solver encoding
	Score  float32
}

// Scores runs the model for p and returns every solver's score, best
// first. MIOpen's sort leaves ties in no defined order; here they go by
// solver index, and NaN scores go last.
func (t *TunaNet) Scores(p Problem) ([]SolverScore, error) {
	_, x, err := t.Features(p)
	if err != nil {
		return nil, err
	}
	out, err := t.Model.Predict(x)
	if err != nil {
		return nil, fmt.Errorf("TunaNet %s: %w", t.Arch, err)
	}
	logits := out[0][t.Meta.Offset():]
	scores := make([]SolverScore, len(logits))
	for i, s := range logits {
		scores[i] = SolverScore{Solver: t.Meta.Solvers[i], Index: i, Score: s}
	}
	slices.SortStableFunc(scores, func(a, b SolverScore) int {
		an, bn := math.IsNaN(float64(a.Score)), math.IsNaN(float64(b.Score))
		switch {
		case an && bn:
			return 0
		case an:
			return 1
		case bn:
			return -1
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return scores, nil
}

// Rank returns the solver names, best first (MIOpen's PredictSolver before
// its applicability filtering).
func (t *TunaNet) Rank(p Problem) ([]string, error) {
	scores, err := t.Scores(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(scores))
	for i, s := range scores {
		names[i] = s.Solver
	}
	return names, nil
}
