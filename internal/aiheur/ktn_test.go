package aiheur

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func loadKTN(t testing.TB, arch, set string) *KTN {
	t.Helper()
	k, err := LoadKTN(os.DirFS(modelsDir(t)), arch, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Release() })
	return k
}

// asm1x1uConfig is ConvAsm1x1U's performance config as its KTN validator
// fills it, with the partial validity rules of MIOpen 3.3 (restated here
// for the test; the solver itself lives elsewhere in miotool).
type asm1x1uConfig struct {
	p Problem
	v [8]int // read_size, k_mult, chunks_per_wave, chunk_size, n_mult, c_mult, waves_c_in_group, waves_k_in_group
}

func (c *asm1x1uConfig) accept(step int, value string) bool {
	n, err := strconv.Atoi(value)
	if err != nil || step >= len(c.v) {
		return false
	}
	c.v[step] = n
	return c.validUpTo(step + 1)
}

func isPow2In(v, lo, hi int) bool { return v >= lo && v <= hi && v&(v-1) == 0 }

func (c *asm1x1uConfig) validUpTo(n int) bool {
	readSize, kMult, chunksPerWave, chunkSize, nMult, cMult, wavesC, wavesK := c.v[0], c.v[1], c.v[2], c.v[3], c.v[4], c.v[5], c.v[6], c.v[7]
	perDword := 1 // values per 32-bit word
	if c.p.DataType == "FP16" || c.p.DataType == "BF16" {
		perDword = 2
	}
	in, out := c.p.mioIn(), c.p.mioOut()
	imgHW := out.h * out.w
	ceilDiv := func(a, b int) int { return (a + b - 1) / b }
	checks := []func() bool{
		func() bool { return readSize >= 1 && readSize <= 4 },
		func() bool {
			okValue := kMult == 1 || (kMult%4 == 0 && kMult/4 >= 1 && kMult/4 <= 8)
			okBwd := c.p.Direction != BackwardData || out.c%kMult == 0
			return okValue && kMult%perDword == 0 && okBwd
		},
		func() bool {
			return chunksPerWave >= 1 && chunksPerWave <= 16 && readSize*perDword <= chunksPerWave && chunksPerWave%perDword == 0
		},
		func() bool { return isPow2In(chunkSize, 1, 64) && chunksPerWave <= ceilDiv(imgHW, chunkSize) },
		func() bool { return nMult >= 1 && nMult <= 8 && nMult <= ceilDiv(c.p.N, 64/chunkSize) },
		func() bool {
			return isPow2In(cMult, 1, 32) && cMult%perDword == 0 && c.vgprs() < 256 && 25+2*kMult*cMult < 102
		},
		func() bool {
			if wavesC < 1 || wavesC > 8 || wavesC > in.c {
				return false
			}
			perWave := ceilDiv(in.c, wavesC)
			last := in.c - perWave*(wavesC-1)
			return perWave%cMult == 0 && last%cMult == 0
		},
		func() bool {
			return isPow2In(wavesK, 1, 8) && kMult*wavesK <= out.c && wavesC*wavesK <= 16 && (256/c.vgprs())*4 >= wavesC*wavesK
		},
	}
	for i := 0; i < n && i < len(checks); i++ {
		if !checks[i]() {
			return false
		}
	}
	return true
}

func (c *asm1x1uConfig) vgprs() int {
	perDword := 1
	if c.p.DataType == "FP16" || c.p.DataType == "BF16" {
		perDword = 2
	}
	out := c.p.mioOut()
	inGprs := (c.v[2]*c.v[4]*c.v[5] + perDword - 1) / perDword
	accGprs := c.v[2] * c.v[4] * c.v[1]
	odd := 0
	if (out.h*out.w)%perDword != 0 {
		odd = 1
	}
	return 4 + 2*inGprs + accGprs + odd + 1
}

func (c *asm1x1uConfig) String() string {
	parts := make([]string, len(c.v))
	for i, v := range c.v {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

// MIOpen's own KTN unit test (GPU_KernelTuningNetTestConvAsm1x1U_FP32 and
// _FP16 in test/gtest/kernel_tuning_net.cpp) expects these configs for two
// gfx908 problems; decoding with the solver's validator must reproduce
// them. Its cases are (G, N, C, K, image, filter, pad, stride, dilation) in
// forward convention, as is Problem.
func TestKTNConvAsm1x1UMatchesMIOpenTest(t *testing.T) {
	k := loadKTN(t, "gfx908", KTNConvAsm1x1U)
	one := Problem{R: 1, S: 1, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1, Layout: "NCHW"}
	fwd := one
	fwd.N, fwd.C, fwd.H, fwd.W, fwd.K, fwd.Direction, fwd.DataType = 256, 2048, 7, 7, 512, Forward, "FP16"
	bwd := one
	bwd.N, bwd.C, bwd.H, bwd.W, bwd.K, bwd.Direction, bwd.DataType = 512, 192, 56, 56, 288, BackwardData, "FP32"
	for _, tc := range []struct {
		name string
		p    Problem
		want string
	}{
		{"forward fp16", fwd, "2,8,4,16,1,4,1,4"},
		{"backward fp32", bwd, "1,16,1,64,2,2,1,4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			features, err := KTNFeatures("gfx908", KTNConvAsm1x1U, tc.p, 0)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &asm1x1uConfig{p: tc.p}
			res, err := k.Predict(tc.p.Direction, features, cfg.accept)
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || len(res.Choices) != 8 {
				t.Fatalf("Predict = %+v, want 8 accepted values", res)
			}
			if got := cfg.String(); got != tc.want {
				t.Errorf("config %s, MIOpen's test expects %s", got, tc.want)
			}
			if got := strings.Join(res.Values(), ","); got != tc.want {
				t.Errorf("decoded values %s, want %s", got, tc.want)
			}
		})
	}
}

// Every KTN set in the repository: the metadata reference numbers, then a
// full encode/decode with an accept-anything validator, whose choices must
// be the decoder's top tokens and map back through the vocabulary.
func TestKTNSetsRoundTrip(t *testing.T) {
	problem := Problem{N: 16, C: 64, H: 28, W: 28, K: 128, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1,
		DilationH: 1, DilationW: 1, Groups: 1, DataType: "FP16", Layout: "NCHW"}
	tests := []struct {
		arch, set   string
		dir         Direction
		predictType int
		vocab       int
		units       int
		features    int
		lengths     map[string]int
	}{
		{"gfx908", KTNConvAsm1x1U, Forward, 0, 38, 128, 64, map[string]int{"fwd": 8, "bwd": 8}},
		{"gfx90a", KTNGroupFwd, Forward, 0, 29, 64, 18, nil},
		{"gfx90a", KTNGroupBwdOrWrw, BackwardWeights, 0, 60, 64, 324, map[string]int{"fwd": 13, "bwd": 14, "wrw": 14}},
		{"gfx942", KTNGroupFwd, Forward, 1, 64, 64, 289, map[string]int{
			"DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle_V3": 17, "DeviceGroupedConvFwdMultipleABD_Xdl_CShuffle": 15}},
		{"gfx942", KTNGroupWrwGfx942, BackwardWeights, -1, 75, 64, 289, nil},
		{"gfx942", KTNGroupBwdOrWrw, BackwardData, -1, 60, 64, 324, nil},
	}
	for _, tc := range tests {
		t.Run(tc.arch+"/"+tc.set, func(t *testing.T) {
			k := loadKTN(t, tc.arch, tc.set)
			if len(k.Meta.Tokens) != tc.vocab || k.units != tc.units || k.FeatureCount() != tc.features {
				t.Errorf("vocabulary %d, units %d, features %d; want %d, %d, %d", len(k.Meta.Tokens), k.units, k.FeatureCount(), tc.vocab, tc.units, tc.features)
			}
			if tc.predictType >= 0 && k.Meta.PredictType != tc.predictType {
				t.Errorf("predict_type %d, want %d", k.Meta.PredictType, tc.predictType)
			}
			for key, n := range tc.lengths {
				if k.Meta.NumTuningParams[key] != n {
					t.Errorf("num_tuning_params[%s] = %d, want %d", key, k.Meta.NumTuningParams[key], n)
				}
			}
			p := problem
			p.Direction = tc.dir
			features, err := KTNFeatures(tc.arch, tc.set, p, 104)
			if err != nil {
				t.Fatal(err)
			}
			// Decode by hand with the greedy choice and compare to Predict.
			ctx, err := k.Encode(features)
			if err != nil {
				t.Fatal(err)
			}
			res, err := k.Predict(tc.dir, features, func(int, string) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			prev := float32(0)
			for i, c := range res.Choices {
				scores, next, err := k.Decode(prev, ctx)
				if err != nil {
					t.Fatal(err)
				}
				best := tokensByScore(scores)[0]
				if c.Token != best || c.Value != k.Meta.Tokens[best] || c.Score != scores[best] || c.Step != i {
					t.Fatalf("choice %d = %+v, want token %d (%q, %g)", i, c, best, k.Meta.Tokens[best], scores[best])
				}
				prev, ctx = float32(best), next
			}
			if res.OK {
				want := k.Meta.NumTuningParams[tc.dir.ktnName()]
				if k.Meta.PredictType != 0 {
					want = k.Meta.NumTuningParams[res.Choices[0].Value]
				}
				if len(res.Choices) != want {
					t.Errorf("%d values decoded, the metadata says %d", len(res.Choices), want)
				}
			} else {
				// The model gave up: the next greedy token must decode to "-1".
				scores, _, err := k.Decode(prev, ctx)
				if err != nil {
					t.Fatal(err)
				}
				if v := k.Meta.Tokens[tokensByScore(scores)[0]]; v != "-1" {
					t.Errorf("Predict gave up but the best next token is %q", v)
				}
			}
			t.Logf("%s/%s: ok=%v %v", tc.arch, tc.set, res.OK, res.Values())
		})
	}
}

// A validator that accepts nothing on a step before the last feeds token
// -1 to the decoder, which fails as fdeep does in MIOpen.
func TestKTNRejectEverything(t *testing.T) {
	k := loadKTN(t, "gfx908", KTNConvAsm1x1U)
	p := Problem{N: 8, C: 64, H: 14, W: 14, K: 64, R: 1, S: 1, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1,
		Groups: 1, Direction: Forward, DataType: "FP32", Layout: "NCHW"}
	features, err := KTNFeatures("gfx908", KTNConvAsm1x1U, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Predict(Forward, features, func(step int, value string) bool { return false })
	// Either the model's best remaining token was "-1" (a clean give-up) or
	// the decoder was fed -1 and refused it.
	if err == nil && res.OK {
		t.Fatalf("rejecting every value still succeeded: %+v", res)
	}
	if err != nil && !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Fatalf("err = %v, want the decoder to refuse token -1", err)
	}
	if _, err := k.Predict(BackwardWeights, features, func(int, string) bool { return true }); err == nil ||
		!strings.Contains(err.Error(), "no tuning length for direction wrw") {
		t.Errorf("ConvAsm1x1U has no wrw length; err = %v", err)
	}
	if _, err := k.Encode(features[:10]); err == nil {
		t.Error("Encode accepted 10 features")
	}
}

func TestTokensByScore(t *testing.T) {
	nan := float32(math.NaN())
	got := tokensByScore([]float32{1, 3, nan, 3, 2, 1})
	if want := []int{3, 1, 4, 5, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v (ties to the larger index, NaN last)", got, want)
	}
}

func TestKTNFeatures(t *testing.T) {
	// x 4x10x12, y 6x5x6 (stride 2), N 2, groups 2.
	p := Problem{N: 2, C: 4, H: 10, W: 12, K: 6, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 2, StrideW: 2,
		DilationH: 1, DilationW: 1, Groups: 2, DataType: "FP32", Layout: "NCHW"}
	diagOf := func(f []float32, n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = f[i*n+i]
		}
		return d
	}
	conv := []float32{3, 3, 1, 1, 2, 2, 1, 1, 2}
	join := func(parts ...[]float32) []float32 { return slices.Concat(parts...) }
	tests := []struct {
		name  string
		arch  string
		set   string
		dir   Direction
		n     int // 0: plain vector
		want  []float32
		numCU int
	}{
		{"gfx942 fwd", "gfx942", KTNGroupFwd, Forward, 17, join([]float32{4, 10, 12, 6, 5, 6}, conv, []float32{2, 2}), 0},
		{"gfx90a fwd", "gfx90a", KTNGroupFwd, Forward, 0, join([]float32{2, 4, 10, 12, 6, 5, 6}, conv, []float32{2, 104}), 104},
		{"bwd", "gfx942", KTNGroupBwdOrWrw, BackwardData, 18, join([]float32{0, 4, 10, 12, 6, 5, 6}, conv, []float32{2, 2}), 0},
		{"gfx90a wrw", "gfx90a", KTNGroupBwdOrWrw, BackwardWeights, 18, join([]float32{1, 4, 10, 12, 6, 5, 6}, conv, []float32{2, 2}), 0},
		{"gfx942 wrw", "gfx942", KTNGroupWrwGfx942, BackwardWeights, 17, join([]float32{4, 10, 12, 6, 5, 6}, conv, []float32{2, 2}), 0},
		{"asm1x1u bwd", "gfx908", KTNConvAsm1x1U, BackwardData, 8, []float32{2, 0, 1, 4, 6, 5, 6, 2}, 0},
		{"asm1x1u fwd", "gfx908", KTNConvAsm1x1U, Forward, 8, []float32{2, 1, 0, 4, 6, 10, 12, 2}, 0},
	}
	for _, tc := range tests {
		q := p
		q.Direction = tc.dir
		f, err := KTNFeatures(tc.arch, tc.set, q, tc.numCU)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := f
		if tc.n > 0 {
			if len(f) != tc.n*tc.n {
				t.Errorf("%s: %d values, want %dx%d", tc.name, len(f), tc.n, tc.n)
				continue
			}
			got = diagOf(f, tc.n)
			var off float32
			for i, v := range f {
				if i%(tc.n+1) != 0 {
					off += float32(math.Abs(float64(v)))
				}
			}
			if off != 0 {
				t.Errorf("%s: off-diagonal values present", tc.name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: features %v, want %v", tc.name, got, tc.want)
		}
	}
	bad := []struct {
		set   string
		dir   Direction
		numCU int
		arch  string
	}{
		{KTNGroupFwd, BackwardData, 0, "gfx942"},
		{KTNGroupFwd, Forward, 0, "gfx90a"},
		{KTNGroupBwdOrWrw, Forward, 0, "gfx942"},
		{KTNGroupWrwGfx942, BackwardData, 0, "gfx942"},
		{"ConvMagic", Forward, 0, "gfx942"},
	}
	for _, b := range bad {
		q := p
		q.Direction = b.dir
		if _, err := KTNFeatures(b.arch, b.set, q, b.numCU); err == nil {
			t.Errorf("%s %s %v numCU %d: no error", b.arch, b.set, b.dir, b.numCU)
		}
	}
}

func TestKTNModelFor(t *testing.T) {
	tests := []struct{ arch, solver, want string }{
		{"gfx908", "ConvAsm1x1U", KTNConvAsm1x1U},
		{"gfx90a", "ConvHipImplicitGemmGroupFwdXdlops", KTNGroupFwd},
		{"gfx942", "ConvHipImplicitGemmGroupBwdXdlops", KTNGroupBwdOrWrw},
		{"gfx90a", "ConvHipImplicitGemmGroupWrwXdlops", KTNGroupBwdOrWrw},
		{"gfx942", "ConvHipImplicitGemmGroupWrwXdlops", KTNGroupWrwGfx942},
		{"gfx942", "ConvAsm1x1U", ""},
		{"gfx1100", "ConvHipImplicitGemmGroupFwdXdlops", ""},
	}
	for _, tc := range tests {
		got, err := KTNModelFor(tc.arch, tc.solver)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("KTNModelFor(%s, %s) = %q, %v; want %q", tc.arch, tc.solver, got, err, tc.want)
		}
	}
}

func TestParseKTNMetadataErrors(t *testing.T) {
	good := `{"predict_type":0,"num_tuning_params":{"fwd":2},"decodings":{"tunings":{"0":"-1","1":"4"}}}`
	if m, err := ParseKTNMetadata([]byte(good)); err != nil || len(m.Tokens) != 2 || m.Tokens[1] != "4" {
		t.Fatalf("good metadata: %+v, %v", m, err)
	}
	for name, data := range map[string]string{
		"not json":      `{"predict_type":`,
		"no type":       `{"num_tuning_params":{"fwd":2},"decodings":{"tunings":{"0":"1"}}}`,
		"gap in tokens": strings.Replace(good, `"1":"4"`, `"2":"4"`, 1),
		"bad token key": strings.Replace(good, `"1":"4"`, `"x":"4"`, 1),
		"negative len":  strings.Replace(good, `"fwd":2`, `"fwd":-2`, 1),
	} {
		if _, err := ParseKTNMetadata([]byte(data)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
