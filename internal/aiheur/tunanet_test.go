package aiheur

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"miotool/internal/testutil"
)

// modelsDir is ../shared/miopen-models beside the module, or skips.
func modelsDir(t testing.TB) string {
	t.Helper()
	return testutil.Shared(t, "miopen-models")
}

func loadTunaNet(t testing.TB, arch string) *TunaNet {
	t.Helper()
	dir := modelsDir(t)
	tn, err := LoadTunaNet(os.DirFS(dir), arch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Release() })
	return tn
}

// The example problem of shared/facts/miopen.md §1.5: find-db key
// 3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F.
var exampleProblem = Problem{N: 1, C: 3, H: 32, W: 32, K: 64, R: 3, S: 3, PadH: 1, PadW: 1,
	StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1, Direction: Forward, DataType: "FP32", Layout: "NCHW"}

func TestTunaNetFeaturesGfx942(t *testing.T) {
	tn := loadTunaNet(t, "gfx942")
	raw, norm, err := tn.Features(exampleProblem)
	if err != nil {
		t.Fatal(err)
	}
	wantRaw := []float32{3, 32, 32, 64, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1}
	wantNorm := []float64{-0.812754, -0.758543, -0.773623, -0.619364, -0.948791, -0.970741, 0.414616, 0.408643,
		0.393984, 0.394629, -0.756335, -0.756335, -0.01572, -0.01572, -0.17281, 0.852229, 1.222456, -0.037795}
	for i := range wantRaw {
		if raw[i] != wantRaw[i] {
			t.Errorf("raw feature %d (%s) = %g, want %g", i, tn.Meta.Features[i], raw[i], wantRaw[i])
		}
		if math.Abs(float64(norm[i])-wantNorm[i]) > 2e-6 {
			t.Errorf("normalised feature %d (%s) = %.6f, want %.6f", i, tn.Meta.Features[i], norm[i], wantNorm[i])
		}
	}
}

type scoreRef struct {
	solver string
	score  float64
}

// Reference rankings (top five and logits) from shared/facts/miopen.md §1.5,
// computed there by an independent implementation.
func TestTunaNetGoldenRankings(t *testing.T) {
	bwdFP16 := Problem{N: 32, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1,
		DilationH: 1, DilationW: 1, Groups: 1, Direction: BackwardData, DataType: "FP16", Layout: "NCHW"}
	tests := []struct {
		name string
		arch string
		p    Problem
		top  []scoreRef
	}{
		{"gfx942 example", "gfx942", exampleProblem, []scoreRef{
			{"ConvBinWinogradRxSf2x3g1", 3.9991}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 3.7492},
			{"ConvBinWinogradRxSf3x2", 3.2855}, {"GemmFwdRest", 3.1990}, {"ConvDirectNaiveConvFwd", 2.1878}}},
		{"gfx90a example", "gfx90a", exampleProblem, []scoreRef{
			{"ConvBinWinogradRxSf2x3g1", 8.0031}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 5.4447},
			{"ConvBinWinogradRxSf3x2", 2.8060}, {"ConvDirectNaiveConvFwd", 1.8794}, {"GemmFwdRest", 1.2765}}},
		{"gfx908 example", "gfx908", exampleProblem, []scoreRef{
			{"ConvBinWinogradRxSf2x3g1", 6.3448}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 3.1017},
			{"GemmFwd1x1_0_1", 0.4128}, {"ConvAsmImplicitGemmGTCDynamicWrwXdlopsNHWC", -0.0194},
			{"ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC", -3.7452}}},
		{"gfx942 backward data fp16", "gfx942", bwdFP16, []scoreRef{
			{"ConvBinWinogradRxSf2x3g1", 4.7665}, {"ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC", 4.5626},
			{"ConvBinWinogradRxSf3x2", 4.2539}, {"ConvHipImplicitGemmGroupBwdXdlops", 3.8269}, {"GemmBwdRest", 1.9625}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tn := loadTunaNet(t, tc.arch)
			scores, err := tn.Scores(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if len(scores) != tn.Meta.NumSolvers {
				t.Fatalf("%d scores, want one per solver (%d)", len(scores), tn.Meta.NumSolvers)
			}
			for i, want := range tc.top {
				got := scores[i]
				// The reference prints four decimals.
				if got.Solver != want.solver || math.Abs(float64(got.Score)-want.score) > 1e-4 {
					t.Errorf("rank %d = %s %.4f, want %s %.4f", i+1, got.Solver, got.Score, want.solver, want.score)
				}
			}
			ranked, err := tn.Rank(tc.p)
			if err != nil || len(ranked) != len(scores) || ranked[0] != tc.top[0].solver {
				t.Errorf("Rank = %v, %v", ranked, err)
			}
			for i := 1; i < len(scores); i++ {
				if scores[i].Score > scores[i-1].Score {
					t.Fatalf("scores not sorted at %d: %v", i, scores)
				}
			}
		})
	}
}

func TestTunaNetMetadataPerArch(t *testing.T) {
	tests := []struct {
		arch                   string
		inputs, outputs, offst int
		split                  string
		first, last            string
		fp32                   float32
	}{
		{"gfx908", 24, 18, 9, "overall", "ConvBinWinogradRxSf2x3g1", "GemmBwd1x1_stride2", 0},
		{"gfx90a", 18, 36, 13, "overall", "ConvDirectNaiveConvBwd", "ConvWinograd3x3MultipassWrW<5-4>", 0},
		{"gfx942", 18, 21, 0, "test", "ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC", "fft", 1},
	}
	for _, tc := range tests {
		tn := loadTunaNet(t, tc.arch)
		m := tn.Meta
		if m.NumInputs != tc.inputs || m.NumOutputs != tc.outputs || m.Offset() != tc.offst || m.StatsSplit != tc.split {
			t.Errorf("%s: inputs %d outputs %d offset %d split %s", tc.arch, m.NumInputs, m.NumOutputs, m.Offset(), m.StatsSplit)
		}
		if m.Solvers[0] != tc.first || m.Solvers[len(m.Solvers)-1] != tc.last || float32(m.Precision["FP32"]) != tc.fp32 {
			t.Errorf("%s: solvers %s..%s, FP32 encodes as %d", tc.arch, m.Solvers[0], m.Solvers[len(m.Solvers)-1], m.Precision["FP32"])
		}
	}
}

// gfx908 feeds the depth padding as 1 (MIOpen reproduces its training data).
func TestTunaNetGfx908DepthFeatures(t *testing.T) {
	tn := loadTunaNet(t, "gfx908")
	raw, _, err := tn.Features(exampleProblem)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float32{"InDepth": 1, "FilterDim0": 1, "OutDepth": 1, "Padding0": 1, "Padding1": 1, "Stride0": 1,
		"InChannels": 3, "OutChannels": 64, "Layout": 0, "Precision": 0, "Direction": 2}
	for i, name := range tn.Meta.Features {
		if w, ok := want[name]; ok && raw[i] != w {
			t.Errorf("%s = %g, want %g", name, raw[i], w)
		}
	}
}

func TestTunaNetSupports(t *testing.T) {
	mod := func(f func(*Problem)) Problem { p := exampleProblem; f(&p); return p }
	tests := []struct {
		arch string
		p    Problem
		want string // "" = supported
	}{
		{"gfx942", exampleProblem, ""},
		{"gfx942", mod(func(p *Problem) { p.Groups = 3; p.K = 63 }), ""},
		{"gfx942", mod(func(p *Problem) { p.StrideW = 2 }), "stride 1x2"},
		{"gfx942", mod(func(p *Problem) { p.DilationH = 2 }), "dilation 2x1"},
		{"gfx942", mod(func(p *Problem) { p.DilationH, p.DilationW = 2, 2 }), ""},
		{"gfx942", mod(func(p *Problem) { p.Bias = true }), "bias"},
		{"gfx942", mod(func(p *Problem) { p.Layout = "NHWC" }), "layout NHWC"},
		{"gfx942", mod(func(p *Problem) { p.DataType = "INT8" }), "data type INT8"},
		{"gfx908", mod(func(p *Problem) { p.Groups = 3; p.K = 63 }), "group count 3"},
		{"gfx908", mod(func(p *Problem) { p.S = 1; p.PadW = 0 }), "not square"},
		{"gfx908", mod(func(p *Problem) { p.PadW = 0 }), "not symmetric"},
		{"gfx908", mod(func(p *Problem) { p.DilationH, p.DilationW = 2, 2 }), "dilation 2x2"},
		{"gfx90a", mod(func(p *Problem) { p.DataType = "FP64" }), "data type FP64"},
	}
	for _, tc := range tests {
		tn := loadTunaNet(t, tc.arch)
		err := tn.Supports(tc.p)
		_, scoreErr := tn.Scores(tc.p)
		if tc.want == "" {
			if err != nil || scoreErr != nil {
				t.Errorf("%s %+v: Supports = %v, Scores = %v; want supported", tc.arch, tc.p, err, scoreErr)
			}
			continue
		}
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), tc.want) || !errors.Is(scoreErr, ErrNotSupported) {
			t.Errorf("%s: Supports = %v, Scores = %v; want ErrNotSupported mentioning %q", tc.arch, err, scoreErr, tc.want)
		}
	}
}

func TestTunaNetArch(t *testing.T) {
	for device, want := range map[string]string{
		"gfx942": "gfx942", "gfx942:sramecc+:xnack-": "gfx942", "gfx90a": "gfx90a",
		"gfx908": "gfx908", "gfx1100": "gfx908", "sm_90": "gfx908",
	} {
		if got := TunaNetArch(device); got != want {
			t.Errorf("TunaNetArch(%q) = %q, want %q", device, got, want)
		}
	}
}

func TestLoadTunaNetErrors(t *testing.T) {
	dir := modelsDir(t)
	if _, err := LoadTunaNet(os.DirFS(dir), "gfx1100"); err == nil || !strings.Contains(err.Error(), `"gfx1100"`) {
		t.Errorf("unknown arch: %v", err)
	}
	if _, err := LoadTunaNet(os.DirFS(t.TempDir()), "gfx942"); err == nil || !strings.Contains(err.Error(), "gfx942_metadata.tn.model") {
		t.Errorf("missing files: %v", err)
	}
	if _, err := LoadTunaNet(nil, "gfx942"); err == nil {
		t.Error("nil file system accepted")
	}
}

func TestParseTunaNetMetadataErrors(t *testing.T) {
	const good = `{"num_inputs":1,"num_outputs":2,"num_solvers":1,
	  "encodings":{"Direction":{"F":2},"Precision":{"FP32":1},"Layout":{"NCHW":0},"solver":{"GemmFwdRest":0}},
	  "conv_params_used_as_features":["BatchSize"],
	  "stats":{"test":{"features":{"mean":{"BatchSize":1},"std":{"BatchSize":2}}}}}`
	if m, err := ParseTunaNetMetadata([]byte(good), "test"); err != nil || m.Offset() != 1 || m.Mean[0] != 1 || m.Std[0] != 2 {
		t.Fatalf("good metadata: %+v, %v", m, err)
	}
	tests := []struct {
		name, data, split, want string
	}{
		{"not json", "{", "test", "not valid JSON"},
		{"missing counts", `{}`, "test", "lacks num_inputs"},
		{"wrong split", good, "overall", "no stats.overall"},
		{"feature count", strings.Replace(good, `"num_inputs":1`, `"num_inputs":2`, 1), "test", "num_inputs is 2 but 1 features"},
		{"solver count", strings.Replace(good, `"num_solvers":1`, `"num_solvers":2`, 1), "test", "encodings.solver has 1 entries"},
		{"too many solvers", strings.Replace(good, `"num_outputs":2`, `"num_outputs":0`, 1), "test", "between 1 and num_outputs"},
		{"solver index", strings.Replace(good, `"GemmFwdRest":0`, `"GemmFwdRest":5`, 1), "test", "out of range"},
		{"unknown feature", strings.ReplaceAll(good, `"BatchSize"`, `"Temperature"`), "test", `feature "Temperature"`},
		{"zero std", strings.Replace(good, `"std":{"BatchSize":2}`, `"std":{"BatchSize":0}`, 1), "test", "cannot normalise"},
		{"missing std", strings.Replace(good, `"std":{"BatchSize":2}`, `"std":{}`, 1), "test", "lacks the mean or std"},
		{"missing encoding", strings.Replace(good, `"Layout":{"NCHW":0},`, ``, 1), "test", "encodings.Layout is missing"},
	}
	for _, tc := range tests {
		_, err := ParseTunaNetMetadata([]byte(tc.data), tc.split)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func BenchmarkTunaNetRankGfx942(b *testing.B) {
	tn := loadTunaNet(b, "gfx942")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tn.Scores(exampleProblem); err != nil {
			b.Fatal(err)
		}
	}
}
