package fdeep

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"miotool/internal/aiheur/fdeep/fdeeptest"
)

type R = fdeeptest.Ref

var ref = fdeeptest.R

func mustLoad(t testing.TB, data []byte) *Model {
	t.Helper()
	m, err := Load(data, "synthetic", Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { m.Release() })
	return m
}

func predict(t testing.TB, m *Model, inputs ...[]float32) [][]float32 {
	t.Helper()
	out, err := m.Predict(inputs...)
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	return out
}

func assertClose(t testing.TB, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %g, want %g (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

func randFloats(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (rng.Float32()*2 - 1) * scale
	}
	return v
}

// Reference activations in float64, written from the Keras definitions.
var activationRefs = map[string]func(float64) float64{
	"linear":       func(x float64) float64 { return x },
	"relu":         func(x float64) float64 { return math.Max(x, 0) },
	"sigmoid":      func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"hard_sigmoid": func(x float64) float64 { return math.Min(1, math.Max(0, 0.2*x+0.5)) },
	"tanh":         math.Tanh,
	"softplus":     func(x float64) float64 { return math.Log(1 + math.Exp(x)) },
	"softsign":     func(x float64) float64 { return x / (1 + math.Abs(x)) },
	"elu": func(x float64) float64 {
		if x > 0 {
			return x
		}
		return math.Exp(x) - 1
	},
	"selu": func(x float64) float64 {
		if x > 0 {
			return seluScale * x
		}
		return seluScale * seluAlpha * (math.Exp(x) - 1)
	},
	"swish":       func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	"exponential": math.Exp,
}

// Dense on a vector and per time step on a [T][F] input, with each
// activation, against a float64 reference.
func TestDenseActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"softmax"}
	for n := range activationRefs {
		names = append(names, n)
	}
	for _, act := range names {
		for _, steps := range []int{0, 3} { // 0: plain vector input
			const in, units = 5, 4
			w := randFloats(rng, in*units, 1)
			bias := randFloats(rng, units, 0.5)
			b := fdeeptest.NewBuilder()
			rows := 1
			if steps == 0 {
				b.Input("x", in)
			} else {
				b.Input("x", steps, in)
				rows = steps
			}
			b.Layer("Dense", "d", map[string]any{"units": units, "activation": act, "use_bias": true},
				map[string][]float32{"weights": w, "bias": bias}, ref("x"))
			if steps == 0 {
				b.Output(ref("d"), units)
			} else {
				b.Output(ref("d"), steps, units)
			}
			m := mustLoad(t, b.JSON())
			x := randFloats(rng, rows*in, 2)
			want := make([]float64, 0, rows*units)
			for r := 0; r < rows; r++ {
				pre := make([]float64, units)
				for j := range pre {
					pre[j] = float64(bias[j])
					for i := 0; i < in; i++ {
						pre[j] += float64(x[r*in+i]) * float64(w[i*units+j])
					}
				}
				if act == "softmax" {
					sum := 0.0
					for _, v := range pre {
						sum += math.Exp(v)
					}
					for j := range pre {
						pre[j] = math.Exp(pre[j]) / sum
					}
				} else {
					for j := range pre {
						pre[j] = activationRefs[act](pre[j])
					}
				}
				want = append(want, pre...)
			}
			assertClose(t, "dense "+act, predict(t, m, x)[0], want, 1e-5)
		}
	}
}

func TestDenseWithoutBias(t *testing.T) {
	w := []float32{1, 2, 3, 4, 5, 6} // [3][2]
	b := fdeeptest.NewBuilder().Input("x", 3).
		Layer("Dense", "d", map[string]any{"units": 2, "activation": "linear", "use_bias": false},
			map[string][]float32{"weights": w}, ref("x")).
		Output(ref("d"), 2)
	m := mustLoad(t, b.JSON())
	// [1,0,-1]·W = [1-5, 2-6]
	assertClose(t, "dense", predict(t, m, []float32{1, 0, -1})[0], []float64{-4, -4}, 0)
}

func TestReLUConfig(t *testing.T) {
	x := []float32{-2, -0.5, 0, 0.5, 1, 3, 7}
	tests := []struct {
		name   string
		config map[string]any
		want   []float64
	}{
		{"plain", map[string]any{"max_value": nil, "negative_slope": 0.0, "threshold": 0.0}, []float64{0, 0, 0, 0.5, 1, 3, 7}},
		{"capped", map[string]any{"max_value": 6.0, "negative_slope": 0.0, "threshold": 0.0}, []float64{0, 0, 0, 0.5, 1, 3, 6}},
		{"leaky", map[string]any{"max_value": nil, "negative_slope": 0.1, "threshold": 0.0}, []float64{-0.2, -0.05, 0, 0.5, 1, 3, 7}},
		{"threshold", map[string]any{"max_value": nil, "negative_slope": 0.5, "threshold": 1.0}, []float64{-1.5, -0.75, -0.5, -0.25, 1, 3, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := fdeeptest.NewBuilder().Input("x", len(x)).
				Layer("ReLU", "r", tc.config, nil, ref("x")).Output(ref("r"), len(x))
			assertClose(t, "relu", predict(t, mustLoad(t, b.JSON()), x)[0], tc.want, 1e-7)
		})
	}
}

func TestMergeLayers(t *testing.T) {
	a, c := []float32{1, -2, 3}, []float32{4, 5, -6}
	tests := []struct {
		class string
		want  []float64
	}{
		{"Add", []float64{5, 3, -3}},
		{"Subtract", []float64{-3, -7, 9}},
		{"Multiply", []float64{4, -10, -18}},
		{"Average", []float64{2.5, 1.5, -1.5}},
		{"Maximum", []float64{4, 5, 3}},
		{"Minimum", []float64{1, -2, -6}},
	}
	for _, tc := range tests {
		t.Run(tc.class, func(t *testing.T) {
			b := fdeeptest.NewBuilder().Input("a", 3).Input("c", 3).
				Layer(tc.class, "m", nil, nil, ref("a"), ref("c")).Output(ref("m"), 3)
			assertClose(t, tc.class, predict(t, mustLoad(t, b.JSON()), a, c)[0], tc.want, 0)
		})
	}
}

func TestShapeLayers(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6} // [2][3]
	y := []float32{7, 8}             // [2][1]
	t.Run("concatenate last axis", func(t *testing.T) {
		b := fdeeptest.NewBuilder().Input("x", 2, 3).Input("y", 2, 1).
			Layer("Concatenate", "c", map[string]any{"axis": -1}, nil, ref("x"), ref("y")).Output(ref("c"), 2, 4)
		assertClose(t, "concat", predict(t, mustLoad(t, b.JSON()), x, y)[0], []float64{1, 2, 3, 7, 4, 5, 6, 8}, 0)
	})
	t.Run("concatenate axis 1", func(t *testing.T) {
		b := fdeeptest.NewBuilder().Input("x", 2, 3).Input("z", 1, 3).
			Layer("Concatenate", "c", map[string]any{"axis": 1}, nil, ref("x"), ref("z")).Output(ref("c"), 3, 3)
		assertClose(t, "concat", predict(t, mustLoad(t, b.JSON()), x, []float32{9, 9, 9})[0], []float64{1, 2, 3, 4, 5, 6, 9, 9, 9}, 0)
	})
	t.Run("reshape flatten dropout", func(t *testing.T) {
		b := fdeeptest.NewBuilder().Input("x", 2, 3).
			Layer("Reshape", "r", map[string]any{"target_shape": []int{3, -1}}, nil, ref("x")).
			Layer("Dropout", "d", map[string]any{"rate": 0.5}, nil, ref("r")).
			Layer("Flatten", "f", nil, nil, ref("d")).
			Output(ref("r"), 3, 2).Output(ref("f"), 6)
		out := predict(t, mustLoad(t, b.JSON()), x)
		assertClose(t, "reshape", out[0], []float64{1, 2, 3, 4, 5, 6}, 0)
		assertClose(t, "flatten", out[1], []float64{1, 2, 3, 4, 5, 6}, 0)
	})
	t.Run("repeat vector", func(t *testing.T) {
		b := fdeeptest.NewBuilder().Input("v", 2).
			Layer("RepeatVector", "rv", map[string]any{"n": 3}, nil, ref("v")).Output(ref("rv"), 3, 2)
		assertClose(t, "repeat", predict(t, mustLoad(t, b.JSON()), []float32{1, -1})[0], []float64{1, -1, 1, -1, 1, -1}, 0)
	})
	t.Run("activation layer softmax", func(t *testing.T) {
		b := fdeeptest.NewBuilder().Input("x", 2, 3).
			Layer("Activation", "a", map[string]any{"activation": "softmax"}, nil, ref("x")).Output(ref("a"), 2, 3)
		e := func(k float64) float64 { return math.Exp(k) / (math.Exp(1) + math.Exp(2) + math.Exp(3)) }
		want := []float64{e(1), e(2), e(3), e(1), e(2), e(3)} // softmax is shift invariant per row
		assertClose(t, "softmax", predict(t, mustLoad(t, b.JSON()), x)[0], want, 1e-6)
	})
}

// A layer called twice (shared weights) is addressed by node index.
func TestSharedLayerNodes(t *testing.T) {
	w := []float32{2, 0, 0, 3} // diag(2, 3)
	b := fdeeptest.NewBuilder().Input("a", 2).Input("c", 2).
		Layer("Dense", "shared", map[string]any{"units": 2, "activation": "linear", "use_bias": false},
			map[string][]float32{"weights": w}, ref("a")).
		Call("shared", ref("c")).
		Output(ref("shared"), 2).Output(R{Layer: "shared", Node: 1}, 2)
	m := mustLoad(t, b.JSON())
	out := predict(t, m, []float32{1, 1}, []float32{10, -1})
	assertClose(t, "node 0", out[0], []float64{2, 3}, 0)
	assertClose(t, "node 1", out[1], []float64{20, -3}, 0)
	if m.WeightCount() != 4 {
		t.Errorf("WeightCount() = %d, want the shared 4 stored once", m.WeightCount())
	}
}

func TestEmbedding(t *testing.T) {
	table := []float32{0, 0.5, 1, 1.5, 2, 2.5} // [3 tokens][2]
	b := fdeeptest.NewBuilder().Input("tok", 2).
		Layer("Embedding", "e", map[string]any{"input_dim": 3, "output_dim": 2, "mask_zero": false},
			map[string][]float32{"weights": table}, ref("tok")).Output(ref("e"), 2, 2)
	m := mustLoad(t, b.JSON())
	assertClose(t, "embedding", predict(t, m, []float32{2, 0.9})[0], []float64{2, 2.5, 0, 0.5}, 0)
	for _, bad := range []float32{3, -1, float32(math.NaN())} {
		_, err := m.Predict([]float32{bad, 0})
		if err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
			t.Errorf("token %g: err = %v, want an out-of-vocabulary error", bad, err)
		}
	}
}

// lstmRef is an independent float64 Keras LSTM (gates i, f, c, o).
func lstmRef(x []float32, steps, in, units int, w, u, b []float32, h0, c0 []float64, backwards, seq bool) (out, h, c []float64) {
	h = append([]float64(nil), h0...)
	c = append([]float64(nil), c0...)
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	for s := 0; s < steps; s++ {
		t := s
		if backwards {
			t = steps - 1 - s
		}
		z := make([]float64, 4*units)
		for j := range z {
			z[j] = float64(b[j])
			for i := 0; i < in; i++ {
				z[j] += float64(x[t*in+i]) * float64(w[i*4*units+j])
			}
			for i := 0; i < units; i++ {
				z[j] += h[i] * float64(u[i*4*units+j])
			}
		}
		for j := 0; j < units; j++ {
			ig, fg, gg, og := sig(z[j]), sig(z[units+j]), math.Tanh(z[2*units+j]), sig(z[3*units+j])
			c[j] = fg*c[j] + ig*gg
			h[j] = og * math.Tanh(c[j])
		}
		if seq {
			out = append(out, h...)
		}
	}
	if !seq {
		out = append(out, h...)
	}
	return out, h, c
}

func TestLSTM(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const steps, in, units = 4, 3, 5
	for _, tc := range []struct {
		name            string
		seq, backwards  bool
		withInitialStat bool
	}{
		{"last output", false, false, false},
		{"sequence", true, false, false},
		{"initial state", true, false, true},
		{"backwards", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, u, bias := randFloats(rng, in*4*units, 0.7), randFloats(rng, units*4*units, 0.7), randFloats(rng, 4*units, 0.3)
			b := fdeeptest.NewBuilder().Input("x", steps, in)
			inputs := []R{ref("x")}
			h0, c0 := make([]float64, units), make([]float64, units)
			var h0f, c0f []float32
			if tc.withInitialStat {
				b.Input("h0", units).Input("c0", units)
				inputs = append(inputs, ref("h0"), ref("c0"))
				h0f, c0f = randFloats(rng, units, 1), randFloats(rng, units, 1)
				for i := range h0 {
					h0[i], c0[i] = float64(h0f[i]), float64(c0f[i])
				}
			}
			b.Layer("LSTM", "lstm", map[string]any{"units": units, "activation": "tanh", "recurrent_activation": "sigmoid",
				"use_bias": true, "return_sequences": tc.seq, "return_state": true, "go_backwards": tc.backwards},
				map[string][]float32{"weights": w, "recurrent_weights": u, "bias": bias}, inputs...)
			if tc.seq {
				b.Output(ref("lstm"), steps, units)
			} else {
				b.Output(ref("lstm"), units)
			}
			b.Output(R{Layer: "lstm", Tensor: 1}, units).Output(R{Layer: "lstm", Tensor: 2}, units)
			m := mustLoad(t, b.JSON())
			x := randFloats(rng, steps*in, 1.5)
			feed := [][]float32{x}
			if tc.withInitialStat {
				feed = append(feed, h0f, c0f)
			}
			got := predict(t, m, feed...)
			wantOut, wantH, wantC := lstmRef(x, steps, in, units, w, u, bias, h0, c0, tc.backwards, tc.seq)
			assertClose(t, "output", got[0], wantOut, 2e-6)
			assertClose(t, "h", got[1], wantH, 2e-6)
			assertClose(t, "c", got[2], wantC, 2e-6)
		})
	}
}

// A synthetic MLP carries a float64-computed expected output; loading it
// runs that as the self-test, and a perturbed expectation fails.
func TestSyntheticMLPSelfTest(t *testing.T) {
	m := mustLoad(t, fdeeptest.MLP([]int{18, 64, 128, 21}, 7))
	if m.SelfTests() != 1 {
		t.Fatalf("SelfTests() = %d, want 1", m.SelfTests())
	}
	b := fdeeptest.NewBuilder().Input("x", 2).
		Layer("Dense", "d", map[string]any{"units": 1, "activation": "linear", "use_bias": true},
			map[string][]float32{"weights": {1, 1}, "bias": {0}}, ref("x")).Output(ref("d"), 1).
		Test([][]float32{{1, 2}}, [][]float32{{3.001}})
	_, err := Load(b.JSON(), "off-by-a-thousandth", Options{})
	if st, ok := err.(*SelfTestError); !ok || math.Abs(st.Deviation-0.001) > 1e-6 || st.Model != "off-by-a-thousandth" {
		t.Fatalf("err = %v, want a SelfTestError with deviation 0.001", err)
	}
	if _, err := Load(b.JSON(), "loose", Options{Epsilon: 0.01}); err != nil {
		t.Errorf("with epsilon 0.01: %v", err)
	}
	if _, err := Load(b.JSON(), "skipped", Options{SkipSelfTest: true}); err != nil {
		t.Errorf("with SkipSelfTest: %v", err)
	}
}

func TestPredictArgumentErrors(t *testing.T) {
	m := mustLoad(t, fdeeptest.MLP([]int{3, 4, 2}, 1))
	tests := []struct {
		name    string
		outputs [][]float32
		inputs  [][]float32
		want    string
	}{
		{"no inputs", [][]float32{make([]float32, 2)}, nil, "takes 1 inputs, 0 given"},
		{"short input", [][]float32{make([]float32, 2)}, [][]float32{{1, 2}}, "needs 3 values"},
		{"short output", [][]float32{make([]float32, 1)}, [][]float32{{1, 2, 3}}, "output 0 needs 2 values"},
		{"missing output", nil, [][]float32{{1, 2, 3}}, "has 1 outputs, 0 slices given"},
	}
	for _, tc := range tests {
		err := m.PredictInto(tc.outputs, tc.inputs...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	m, err := Load(fdeeptest.MLP([]int{3, 4, 2}, 1), "m", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Released() {
		t.Fatal("new model reports released")
	}
	if !m.Release() || !m.Released() {
		t.Fatal("first Release did not release")
	}
	if m.Release() {
		t.Fatal("second Release reported releasing again")
	}
}

// Concurrent Predict calls on one model share nothing but weights.
func TestConcurrentPredict(t *testing.T) {
	m := mustLoad(t, fdeeptest.MLP([]int{8, 32, 4}, 9))
	x := []float32{1, 2, 3, 4, -1, -2, -3, -4}
	want := predict(t, m, x)[0]
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		go func() {
			out := [][]float32{make([]float32, 4)}
			for i := 0; i < 200; i++ {
				if err := m.PredictInto(out, x); err != nil {
					errs <- err
					return
				}
				for k := range out[0] {
					if out[0][k] != want[k] {
						errs <- errMismatch
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 16; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

var errMismatch = errorString("concurrent Predict produced a different result")

type errorString string

func (e errorString) Error() string { return string(e) }
