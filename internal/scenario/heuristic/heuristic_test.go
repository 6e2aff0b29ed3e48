package heuristic

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/builtin"
	"miotool/internal/testutil"
)

// shipped are the MIOpen model files in the reference data beside the
// module, given as a directory, as --model-dir gives them.
func shipped(t *testing.T) Models {
	t.Helper()
	m, err := FindModels(testutil.Shared(t, "miopen-models"), "--model-dir", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fwd is a forward FP32 NCHW problem with square padding, unit stride and
// dilation, one group.
func fwd(n, c, h, w, k, r, s, pad int) aiheur.Problem {
	return aiheur.Problem{N: n, C: c, H: h, W: w, K: k, R: r, S: s, PadH: pad, PadW: pad, StrideH: 1, StrideW: 1,
		DilationH: 1, DilationW: 1, Groups: 1, Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
}

func ask(t *testing.T, m Models, arch string, p aiheur.Problem) *Answer {
	t.Helper()
	a, err := Ask(Query{Problem: p, Arch: arch, Models: m})
	if err != nil {
		t.Fatalf("%s %+v: %v", arch, p, err)
	}
	return a
}

// The rankings of facts/miopen.md §1.5, computed by an implementation of
// MIOpen's rules written apart from this one.
func TestAskMatchesIndependentRankings(t *testing.T) {
	m := shipped(t)
	small := fwd(1, 3, 32, 32, 64, 3, 3, 1)
	bwd := fwd(32, 64, 56, 56, 64, 3, 3, 1)
	bwd.Direction, bwd.DataType = aiheur.BackwardData, "FP16"
	type top struct {
		solver string
		score  float32
	}
	for _, tc := range []struct {
		arch string
		p    aiheur.Problem
		want []top
	}{
		{"gfx942", small, []top{{"ConvBinWinogradRxSf2x3g1", 3.9991}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 3.7492},
			{"ConvBinWinogradRxSf3x2", 3.2855}, {"GemmFwdRest", 3.1990}, {"ConvDirectNaiveConvFwd", 2.1878}}},
		{"gfx90a", small, []top{{"ConvBinWinogradRxSf2x3g1", 8.0031}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 5.4447},
			{"ConvBinWinogradRxSf3x2", 2.8060}, {"ConvDirectNaiveConvFwd", 1.8794}, {"GemmFwdRest", 1.2765}}},
		{"gfx908", small, []top{{"ConvBinWinogradRxSf2x3g1", 6.3448}, {"ConvAsmImplicitGemmGTCDynamicFwdXdlopsNHWC", 3.1017},
			{"GemmFwd1x1_0_1", 0.4128}, {"ConvAsmImplicitGemmGTCDynamicWrwXdlopsNHWC", -0.0194}, {"ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC", -3.7452}}},
		{"gfx942", bwd, []top{{"ConvBinWinogradRxSf2x3g1", 4.7665}, {"ConvAsmImplicitGemmGTCDynamicBwdXdlopsNHWC", 4.5626},
			{"ConvBinWinogradRxSf3x2", 4.2539}, {"ConvHipImplicitGemmGroupBwdXdlops", 3.8269}, {"GemmBwdRest", 1.9625}}},
	} {
		a := ask(t, m, tc.arch, tc.p)
		if !a.Supported || len(a.Ranking) < len(tc.want) {
			t.Fatalf("%s %s: supported %v (%s), %d ranked", tc.arch, a.Key, a.Supported, a.Reason, len(a.Ranking))
		}
		for i, w := range tc.want {
			got := a.Ranking[i]
			if got.Rank != i+1 || got.Solver != w.solver || math.Abs(float64(got.Score-w.score)) > 5e-4 {
				t.Errorf("%s %s rank %d: %s %.4f, want %s %.4f", tc.arch, a.Key, i+1, got.Solver, got.Score, w.solver, w.score)
			}
		}
	}
}

// Three problems (at least) per shipped arch: those the model covers are
// ranked, every solver once, scores falling; those it does not get
// MIOpen's reason and no ranking.
func TestAskThreeProblemsPerArch(t *testing.T) {
	m := shipped(t)
	strided := fwd(1, 3, 224, 224, 64, 7, 7, 3)
	strided.StrideH, strided.StrideW = 2, 1
	dilated := fwd(8, 64, 28, 28, 64, 3, 3, 2)
	dilated.DilationH = 2
	grouped := fwd(8, 64, 28, 28, 64, 3, 3, 1)
	grouped.Groups = 32
	wrw := fwd(16, 128, 28, 28, 256, 1, 1, 0)
	wrw.Direction, wrw.DataType = aiheur.BackwardWeights, "BF16"
	doneWhen := fwd(16, 64, 56, 56, 64, 3, 3, 1)
	for _, tc := range []struct {
		arch      string
		p         aiheur.Problem
		solvers   int    // ranked, when supported
		notCovers string // MIOpen's reason, when not
	}{
		{"gfx942", doneWhen, 21, ""},
		{"gfx942", wrw, 21, ""},
		{"gfx942", grouped, 21, ""},
		{"gfx942", strided, 0, "stride 2x1 is not square"},
		{"gfx942", dilated, 0, "dilation 2x1 is not square"},
		{"gfx90a", doneWhen, 23, ""},
		{"gfx90a", wrw, 23, ""},
		{"gfx90a", strided, 0, "stride 2x1 is not square"},
		{"gfx908", doneWhen, 9, ""},
		{"gfx908", wrw, 9, ""},
		{"gfx908", grouped, 0, "group count 32 (gfx908 TunaNet needs 1)"},
		{"gfx908", fwd(1, 3, 32, 32, 8, 3, 1, 0), 0, "filter 3x1 is not square"},
	} {
		a := ask(t, m, tc.arch, tc.p)
		if tc.notCovers != "" {
			if a.Supported || a.Reason != tc.notCovers || len(a.Ranking) != 0 {
				t.Errorf("%s %s: supported %v, reason %q, %d ranked; want not covered: %q", tc.arch, a.Key, a.Supported, a.Reason, len(a.Ranking), tc.notCovers)
			}
			continue
		}
		if !a.Supported || len(a.Ranking) != tc.solvers {
			t.Fatalf("%s %s: supported %v (%s), %d ranked, want %d", tc.arch, a.Key, a.Supported, a.Reason, len(a.Ranking), tc.solvers)
		}
		seen := map[string]bool{}
		for i, r := range a.Ranking {
			if seen[r.Solver] || (i > 0 && r.Score > a.Ranking[i-1].Score) {
				t.Errorf("%s %s: rank %d %s %.4f repeats a solver or outranks the one above", tc.arch, a.Key, r.Rank, r.Solver, r.Score)
			}
			seen[r.Solver] = true
		}
		if a.SelfTests < 1 && tc.arch != "gfx908" { // gfx908.tn.model carries no tests
			t.Errorf("%s: %d self-tests ran at load", tc.arch, a.SelfTests)
		}
		if len(a.Features) == 0 {
			t.Errorf("%s %s: no features", tc.arch, a.Key)
		}
	}
}

// miotool's embedded model carries self-tests made from real problems:
// asked those problems, the heuristic gives exactly the scores the tests
// expect, solver by solver, and says which of miotool's solvers apply.
func TestEmbeddedModelAnswersItsSelfTests(t *testing.T) {
	meta, err := fs.ReadFile(builtin.FS, "miotool_metadata.tn.model")
	if err != nil {
		t.Fatal(err)
	}
	md, err := aiheur.ParseTunaNetMetadata(meta, "overall")
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(builtin.FS, "miotool.tn.model")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			Inputs  []struct{ Values []string } `json:"inputs"`
			Outputs []struct{ Values []string } `json:"outputs"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Tests) < 3 {
		t.Fatalf("the embedded model has %d self-tests, want at least 3", len(file.Tests))
	}
	embedded, err := FindModels("", "", func() (string, string) { return "", "" })
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range file.Tests {
		x, want := floats(t, tc.Inputs[0].Values), floats(t, tc.Outputs[0].Values)
		raw := map[string]int{}
		for j, name := range md.Features {
			v := float64(x[j]*md.Std[j] + md.Mean[j])
			if math.Abs(v-math.Round(v)) > 1e-3 {
				t.Fatalf("test %d: feature %s de-normalises to %g, not a whole number", i, name, v)
			}
			raw[name] = int(math.Round(v))
		}
		p := aiheur.Problem{N: raw["BatchSize"], C: raw["Inp_0"], H: raw["Inp_2"], W: raw["Inp_3"], K: raw["Out_0"],
			R: raw["Fil_1"], S: raw["Fil_2"], PadH: raw["Pad_1"], PadW: raw["Pad_2"], StrideH: raw["Str_1"], StrideW: raw["Str_2"],
			DilationH: raw["Dil_1"], DilationW: raw["Dil_2"], Groups: raw["GroupSize"], Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
		a := ask(t, embedded, "", p)
		if a.Arch != aiheur.BuiltinArch || !a.Builtin || len(a.Ranking) != len(want) {
			t.Fatalf("test %d (%s): arch %s, %d ranked, want %d", i, a.Key, a.Arch, len(a.Ranking), len(want))
		}
		if p.OutH() != raw["Out_2"] || p.OutW() != raw["Out_3"] {
			t.Errorf("test %d: the problem's output %dx%d is not the test's %dx%d", i, p.OutH(), p.OutW(), raw["Out_2"], raw["Out_3"])
		}
		for _, r := range a.Ranking {
			idx := indexOf(md.Solvers, r.Solver)
			if d := math.Abs(float64(r.Score - want[idx])); d > 1e-4*math.Max(1, math.Abs(float64(want[idx]))) {
				t.Errorf("test %d (%s): %s scores %g, the self-test expects %g", i, a.Key, r.Solver, r.Score, want[idx])
			}
			if r.Solver == "ConvDirectNaiveConvFwd" && r.NotApplicable != "" {
				t.Errorf("test %d: the naive solver does not apply: %s", i, r.NotApplicable)
			}
		}
	}
}

func indexOf(items []string, s string) int {
	for i, it := range items {
		if it == s {
			return i
		}
	}
	return -1
}

// floats decodes fdeep's list of base64 little-endian float32 chunks.
func floats(t *testing.T, chunks []string) []float32 {
	t.Helper()
	var out []float32
	for _, c := range chunks {
		b, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+4 <= len(b); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		}
	}
	return out
}

func TestArchChoice(t *testing.T) {
	m := shipped(t)
	p := fwd(1, 3, 32, 32, 64, 3, 3, 1)
	if got := Archs(m.FS); strings.Join(got, ",") != "gfx908,gfx90a,gfx942" {
		t.Errorf("Archs = %v", got)
	}
	// An arch without its own model gets gfx908's, as in MIOpen 3.3.
	a := ask(t, m, "gfx1100", p)
	if a.Arch != "gfx908" || a.Requested != "gfx1100" || !strings.Contains(a.ArchNote, "gfx1100 gets it") {
		t.Errorf("gfx1100: arch %s, note %q", a.Arch, a.ArchNote)
	}
	// miotool's own model is there whatever the directory.
	if a := ask(t, m, "miotool", p); !a.Builtin || a.Models != embeddedModels {
		t.Errorf("miotool from a MIOpen directory: builtin %v, models %q", a.Builtin, a.Models)
	}
	// The only model set of a directory needs no --arch.
	one := Models{FS: fstest.MapFS{"gfx942.tn.model": mapFile(t, m, "gfx942.tn.model"), "gfx942_metadata.tn.model": mapFile(t, m, "gfx942_metadata.tn.model")}, Dir: "one", Source: "test"}
	if a := ask(t, one, "", p); a.Arch != "gfx942" {
		t.Errorf("the only set: %s", a.Arch)
	}
	newer := fstest.MapFS{"gfx1250.tn.model": {Data: []byte("{}")}, "gfx1250_metadata.tn.model": {Data: []byte("{}")}}
	for _, tc := range []struct {
		models Models
		arch   string
		want   string
	}{
		{m, "", "name the arch: " + m.Dir + " (--model-dir) has the TunaNet models of gfx908, gfx90a, gfx942"},
		{Models{FS: newer, Dir: "new", Source: "test"}, "gfx1250", "holds TunaNet files for gfx1250, but miotool implements MIOpen 3.3's TunaNet classes only"},
		{Models{FS: builtin.FS, Source: aiheur.SourceEmbedded}, "gfx942", "no TunaNet model for gfx942 in miotool's embedded models, which has miotool"},
		{one, "sm_90", "no TunaNet model for sm_90 in one (test), which has gfx942"},
	} {
		_, err := Ask(Query{Problem: p, Arch: tc.arch, Models: tc.models})
		var in *InputError
		if !errors.As(err, &in) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("arch %q: err %v, want an input error containing %q", tc.arch, err, tc.want)
		}
	}
	bad := p
	bad.StrideH = 0
	if _, err := Ask(Query{Problem: bad, Arch: "gfx942", Models: m}); !errors.As(err, new(*InputError)) {
		t.Errorf("a zero stride: %v", err)
	}
}

func mapFile(t *testing.T, m Models, name string) *fstest.MapFile {
	t.Helper()
	data, err := fs.ReadFile(m.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return &fstest.MapFile{Data: data}
}

// A model that is there and does not load is the model's failure
// (ModelError), wherever it was found; a model the named directory does
// not hold is a bad question (InputError).
func TestBrokenModels(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"gfx942.tn.model", "gfx942_metadata.tn.model"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"broken": true}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	given, err := FindModels(dir, "--model-dir", nil)
	if err != nil {
		t.Fatal(err)
	}
	found, err := FindModels("", "", func() (string, string) { return dir, "$ROCM_PATH" })
	if err != nil {
		t.Fatal(err)
	}
	p := fwd(1, 3, 32, 32, 64, 3, 3, 1)
	if _, err := Ask(Query{Problem: p, Arch: "gfx942", Models: given}); !errors.As(err, new(*ModelError)) || !strings.Contains(err.Error(), dir+" (--model-dir)") {
		t.Errorf("a broken model the user named: %v", err)
	}
	if _, err := Ask(Query{Problem: p, Arch: "gfx942", Models: found}); !errors.As(err, new(*ModelError)) || !strings.Contains(err.Error(), "($ROCM_PATH)") {
		t.Errorf("a broken installed model: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "gfx942_metadata.tn.model")); err != nil {
		t.Fatal(err)
	}
	if _, err := Ask(Query{Problem: p, Arch: "gfx942", Models: given}); !errors.As(err, new(*InputError)) {
		t.Errorf("a model the named directory lacks: %v", err)
	}
	if _, err := FindModels(filepath.Join(dir, "none"), "--model-dir", nil); !errors.As(err, new(*InputError)) {
		t.Errorf("a model directory that is not there: %v", err)
	}
}

func TestKernelTuningNet(t *testing.T) {
	m := shipped(t)
	p := fwd(16, 64, 56, 56, 64, 3, 3, 1)
	a := ask(t, m, "gfx942", p)
	if a.KTN == nil || a.KTN.Solver != "ConvHipImplicitGemmGroupFwdXdlops" || len(a.KTN.Choices) == 0 || a.KTN.SelfTests < 2 {
		t.Fatalf("gfx942 forward KTN: %+v (skipped: %s)", a.KTN, a.KTNSkipped)
	}
	if first := a.KTN.Choices[0].Value; !strings.HasPrefix(first, "DeviceGroupedConvFwd") {
		t.Errorf("the first value is a CK kernel type, got %q", first)
	}
	bwd := p
	bwd.Direction = aiheur.BackwardData
	if a := ask(t, m, "gfx90a", bwd); a.KTN == nil || a.KTN.Set != aiheur.KTNGroupBwdOrWrw {
		t.Errorf("gfx90a backward KTN: %+v (skipped: %s)", a.KTN, a.KTNSkipped)
	}
	for _, tc := range []struct {
		arch string
		p    aiheur.Problem
		want string
	}{
		{"gfx90a", p, "compute-unit count"},
		{"gfx942", func() aiheur.Problem { q := p; q.DataType = "BF16"; return q }(), "FP32 and FP16 only, not BF16"},
	} {
		if a := ask(t, m, tc.arch, tc.p); a.KTN != nil || !strings.Contains(a.KTNSkipped, tc.want) {
			t.Errorf("%s %s: KTN %+v, skipped %q", tc.arch, a.Key, a.KTN, a.KTNSkipped)
		}
	}
	if a := ask(t, m, "gfx908", p); a.KTN != nil || a.KTNSkipped != "" {
		t.Errorf("gfx908 with a 3x3 filter has no KTN solver: %+v %q", a.KTN, a.KTNSkipped)
	}
}
