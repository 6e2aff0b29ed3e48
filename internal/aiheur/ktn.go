package aiheur

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"miotool/internal/aiheur/fdeep"
)

// KTN model-set names (the <solver> part of <arch>_<solver>_*.ktn.model).
const (
	KTNConvAsm1x1U    = "ConvAsm1x1U"
	KTNGroupFwd       = "ConvHipIgemmGroupFwdXdlops"
	KTNGroupBwdOrWrw  = "ConvHipIgemmGroupXdlops" // bwd on both archs, wrw on gfx90a
	KTNGroupWrwGfx942 = "ConvHipIgemmGroupWrwXdlops"
)

// KTNModelFor names the KTN model set MIOpen uses for a solver on an arch,
// or an error when the solver has none there.
func KTNModelFor(arch, solver string) (string, error) {
	switch {
	case solver == "ConvAsm1x1U" && arch == "gfx908":
		return KTNConvAsm1x1U, nil
	case arch != "gfx90a" && arch != "gfx942":
	case solver == "ConvHipImplicitGemmGroupFwdXdlops":
		return KTNGroupFwd, nil
	case solver == "ConvHipImplicitGemmGroupBwdXdlops":
		return KTNGroupBwdOrWrw, nil
	case solver == "ConvHipImplicitGemmGroupWrwXdlops" && arch == "gfx90a":
		return KTNGroupBwdOrWrw, nil
	case solver == "ConvHipImplicitGemmGroupWrwXdlops":
		return KTNGroupWrwGfx942, nil
	}
	return "", fmt.Errorf("solver %s has no KernelTuningNet model on %s", solver, arch)
}

// KTNFiles are the encoder, decoder and metadata file names of a set.
func KTNFiles(arch, set string) (encoder, decoder, metadata string) {
	base := arch + "_" + set + "_"
	return base + "encoder.ktn.model", base + "decoder.ktn.model", base + "metadata.ktn.model"
}

// KTNMetadata is an <arch>_<set>_metadata.ktn.model file.
type KTNMetadata struct {
	// PredictType 0: the sequence length comes from the direction
	// ("fwd"/"bwd"/"wrw"); otherwise from the first decoded value (a CK
	// kernel type name).
	PredictType     int
	NumTuningParams map[string]int
	// Tokens maps a decoder output index to its value; "-1" ends decoding.
	Tokens []string
}

// ParseKTNMetadata reads a KTN metadata file.
func ParseKTNMetadata(data []byte) (*KTNMetadata, error) {
	var raw struct {
		PredictType     *int           `json:"predict_type"`
		NumTuningParams map[string]int `json:"num_tuning_params"`
		Decodings       struct {
			Tunings map[string]string `json:"tunings"`
		} `json:"decodings"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("KTN metadata is not valid JSON: %v", err)
	}
	if raw.PredictType == nil || len(raw.NumTuningParams) == 0 || len(raw.Decodings.Tunings) == 0 {
		return nil, errors.New("KTN metadata lacks predict_type, num_tuning_params or decodings.tunings")
	}
	m := &KTNMetadata{PredictType: *raw.PredictType, NumTuningParams: raw.NumTuningParams,
		Tokens: make([]string, len(raw.Decodings.Tunings))}
	seen := make([]bool, len(m.Tokens))
	for key, value := range raw.Decodings.Tunings {
		idx, err := strconv.Atoi(key)
		if err != nil || idx < 0 || idx >= len(m.Tokens) || seen[idx] {
			return nil, fmt.Errorf("KTN metadata: token key %q is not a unique index below %d", key, len(m.Tokens))
		}
		seen[idx] = true
		m.Tokens[idx] = value
	}
	for k, n := range m.NumTuningParams {
		if n < 0 {
			return nil, fmt.Errorf("KTN metadata: num_tuning_params[%q] is %d", k, n)
		}
	}
	return m, nil
}

// KTN is one KernelTuningNet model set: an LSTM encoder of the problem
// features and an LSTM decoder that emits tuning values token by token.
type KTN struct {
	Arch, Set        string
	Meta             *KTNMetadata
	Encoder, Decoder *fdeep.Model
	units            int
}

// LoadKTN loads a KTN model set from fsys; both models' self-tests run.
func LoadKTN(fsys fs.FS, arch, set string) (*KTN, error) {
	if fsys == nil {
		return nil, errors.New("no model directory and no embedded models to load KTN from")
	}
	encFile, decFile, metaFile := KTNFiles(arch, set)
	data, err := fs.ReadFile(fsys, metaFile)
	if err != nil {
		return nil, fmt.Errorf("loading KTN %s/%s: %w", arch, set, err)
	}
	meta, err := ParseKTNMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", metaFile, err)
	}
	enc, err := fdeep.LoadFS(fsys, encFile, fdeep.Options{})
	if err != nil {
		return nil, fmt.Errorf("loading KTN %s/%s: %w", arch, set, err)
	}
	dec, err := fdeep.LoadFS(fsys, decFile, fdeep.Options{})
	if err != nil {
		enc.Release()
		return nil, fmt.Errorf("loading KTN %s/%s: %w", arch, set, err)
	}
	k := &KTN{Arch: arch, Set: set, Meta: meta, Encoder: enc, Decoder: dec}
	if err := k.checkShapes(); err != nil {
		k.Release()
		return nil, fmt.Errorf("KTN %s/%s: %w", arch, set, err)
	}
	return k, nil
}

// checkShapes verifies the encoder/decoder contract ModelSetParams relies
// on: encoder [dim, depth] -> h1, c1, h2, c2; decoder (token, h1, c1, h2,
// c2) -> (scores over the vocabulary, h1', c1', h2', c2').
func (k *KTN) checkShapes() error {
	encIn, encOut := k.Encoder.InputShapes(), k.Encoder.OutputShapes()
	decIn, decOut := k.Decoder.InputShapes(), k.Decoder.OutputShapes()
	if len(encIn) != 1 || len(encIn[0]) != 2 || len(encOut) != 4 {
		return fmt.Errorf("encoder takes %v and gives %v; want one [dim, depth] input and four state outputs", encIn, encOut)
	}
	k.units = encOut[0].Size()
	state := func(s fdeep.Shape) bool { return len(s) == 1 && s[0] == k.units }
	for _, s := range encOut {
		if !state(s) {
			return fmt.Errorf("encoder outputs %v are not four [%d] states", encOut, k.units)
		}
	}
	if len(decIn) != 5 || decIn[0].Size() != 1 || len(decOut) != 5 {
		return fmt.Errorf("decoder takes %v and gives %v; want (token, 4 states) -> (scores, 4 states)", decIn, decOut)
	}
	for i := 1; i < 5; i++ {
		if !state(decIn[i]) || !state(decOut[i]) {
			return fmt.Errorf("decoder states %v / %v do not match the encoder's [%d]", decIn, decOut, k.units)
		}
	}
	if v := decOut[0].Size(); v != len(k.Meta.Tokens) {
		return fmt.Errorf("decoder scores %d tokens but the metadata decodes %d", v, len(k.Meta.Tokens))
	}
	return nil
}

// Release frees both models' weights.
func (k *KTN) Release() bool {
	a := k.Encoder.Release()
	b := k.Decoder.Release()
	return a || b
}

// FeatureCount is the number of values Encode takes.
func (k *KTN) FeatureCount() int { return k.Encoder.InputShapes()[0].Size() }

// KTNState is the decoder context: h and c of both LSTM layers.
type KTNState [4][]float32

// Encode runs the encoder on a feature vector laid out row-major in the
// encoder's [dim, depth] input shape.
func (k *KTN) Encode(features []float32) (KTNState, error) {
	var s KTNState
	if len(features) != k.FeatureCount() {
		return s, fmt.Errorf("KTN %s/%s: %d features given, the encoder takes %v", k.Arch, k.Set, len(features), k.Encoder.InputShapes()[0])
	}
	out, err := k.Encoder.Predict(features)
	if err != nil {
		return s, err
	}
	copy(s[:], out)
	return s, nil
}

// Decode runs one decoder step from the previous token (0 to start).
func (k *KTN) Decode(prev float32, s KTNState) (scores []float32, next KTNState, err error) {
	out, err := k.Decoder.Predict([]float32{prev}, s[0], s[1], s[2], s[3])
	if err != nil {
		return nil, next, err
	}
	copy(next[:], out[1:])
	return out[0], next, nil
}

// KTNChoice is one decoded tuning value.
type KTNChoice struct {
	Step  int
	Token int // -1: the validator accepted no token at this step
	Value string
	Score float32
}

// KTNResult is a decoded tuning sequence.
type KTNResult struct {
	// OK is false when the model gave up (its best remaining token was
	// "-1"); MIOpen then uses the solver's static heuristic instead.
	OK      bool
	Choices []KTNChoice
}

// Values are the chosen values in order.
func (r KTNResult) Values() []string {
	out := make([]string, len(r.Choices))
	for i, c := range r.Choices {
		out[i] = c.Value
	}
	return out
}

// Predict decodes a tuning sequence the way MIOpen's ModelSetParams does:
// at each step the tokens are tried best score first (equal scores: larger
// index first) until accept takes one; a "-1" value ends with OK false.
// The sequence length is num_tuning_params of the direction (predict type
// 0) or of the first accepted value (otherwise). If accept rejects every
// token, the next step feeds token -1 to the decoder, which fails as it
// does in MIOpen; on the last step the loop simply ends.
func (k *KTN) Predict(dir Direction, features []float32, accept func(step int, value string) bool) (KTNResult, error) {
	var res KTNResult
	ctx, err := k.Encode(features)
	if err != nil {
		return res, err
	}
	prev := float32(0)
	steps := 1
	for i := 0; i < steps; i++ {
		if i == 0 && k.Meta.PredictType == 0 {
			n, ok := k.Meta.NumTuningParams[dir.ktnName()]
			if !ok {
				return res, fmt.Errorf("KTN %s/%s has no tuning length for direction %s", k.Arch, k.Set, dir.ktnName())
			}
			steps = n
			if steps == 0 {
				break
			}
		}
		scores, next, err := k.Decode(prev, ctx)
		if err != nil {
			return res, fmt.Errorf("KTN %s/%s step %d: %w", k.Arch, k.Set, i, err)
		}
		choice := KTNChoice{Step: i, Token: -1}
		for _, tok := range tokensByScore(scores) {
			value := k.Meta.Tokens[tok]
			if value == "-1" {
				return res, nil
			}
			if accept(i, value) {
				choice = KTNChoice{Step: i, Token: tok, Value: value, Score: scores[tok]}
				if i == 0 && k.Meta.PredictType != 0 {
					// MIOpen indexes the map with operator[]: an unknown
					// kernel type gives 0, which ends the loop.
					steps = k.Meta.NumTuningParams[value]
				}
				break
			}
		}
		res.Choices = append(res.Choices, choice)
		prev = float32(choice.Token)
		ctx = next
	}
	res.OK = true
	return res, nil
}

// tokensByScore orders token indexes like std::priority_queue over
// (score, index) pairs: higher score first, equal scores by larger index;
// NaN scores last.
func tokensByScore(scores []float32) []int {
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := scores[order[a]], scores[order[b]]
		an, bn := math.IsNaN(float64(sa)), math.IsNaN(float64(sb))
		switch {
		case an || bn:
			return !an && bn
		case sa != sb:
			return sa > sb
		}
		return order[a] > order[b]
	})
	return order
}

// KTNFeatures builds the encoder input MIOpen 3.3 feeds a KTN model set
// for p. numCU (the device's compute units) is used only by gfx90a's
// forward set. The values follow each solver's GetFeatures: the CK sets use
// MIOpen's raw ProblemDescription getters, whose in/out swap for backward
// directions is reproduced here.
func KTNFeatures(arch, set string, p Problem, numCU int) ([]float32, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	in, out := p.mioIn(), p.mioOut()
	dtype := 1
	if p.DataType == "FP32" {
		dtype = 2
	}
	conv := []int{p.R, p.S, p.PadH, p.PadW, p.StrideH, p.StrideW, p.DilationH, p.DilationW, p.N}
	diag := func(values []int) []float32 {
		n := len(values)
		f := make([]float32, n*n)
		for i, v := range values {
			f[i*n+i] = float32(v)
		}
		return f
	}
	cat := func(parts ...[]int) []int {
		var all []int
		for _, part := range parts {
			all = append(all, part...)
		}
		return all
	}
	switch set {
	case KTNConvAsm1x1U:
		const n = 8
		f := make([]float32, n*n)
		f[0] = float32(dtype)
		slot := 1
		if p.Direction != Forward {
			slot = 2
		}
		f[slot*n+slot] = 1
		f[3*n+3] = float32(p.C) // MIOpen picks in or out channels so these
		f[4*n+4] = float32(p.K) // are forward-convention C and K
		f[5*n+5] = float32(in.h)
		f[6*n+6] = float32(in.w)
		f[7*n+7] = float32(p.N)
		return f, nil
	case KTNGroupFwd:
		if p.Direction != Forward {
			return nil, fmt.Errorf("KTN set %s is for forward problems, not %v", set, p.Direction)
		}
		if arch == "gfx90a" {
			if numCU < 1 {
				return nil, fmt.Errorf("KTN %s/%s needs the device's compute-unit count, got %d", arch, set, numCU)
			}
			v := cat([]int{dtype, in.c, in.h, in.w, out.c, out.h, out.w}, conv, []int{p.Groups, numCU})
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			return f, nil
		}
		return diag(cat([]int{in.c, in.h, in.w, out.c, out.h, out.w}, conv, []int{dtype, p.Groups})), nil
	case KTNGroupBwdOrWrw:
		slot := 0
		switch p.Direction {
		case BackwardData:
		case BackwardWeights:
			slot = 1
		default:
			return nil, fmt.Errorf("KTN set %s is for backward problems, not %v", set, p.Direction)
		}
		return diag(cat([]int{slot, out.c, out.h, out.w, in.c, in.h, in.w}, conv, []int{dtype, p.Groups})), nil
	case KTNGroupWrwGfx942:
		if p.Direction != BackwardWeights {
			return nil, fmt.Errorf("KTN set %s is for backward-weights problems, not %v", set, p.Direction)
		}
		return diag(cat([]int{out.c, out.h, out.w, in.c, in.h, in.w}, conv, []int{dtype, p.Groups})), nil
	}
	return nil, fmt.Errorf("unknown KTN model set %q (known: %s)", set,
		strings.Join([]string{KTNConvAsm1x1U, KTNGroupFwd, KTNGroupBwdOrWrw, KTNGroupWrwGfx942}, ", "))
}
