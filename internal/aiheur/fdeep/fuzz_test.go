package fdeep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/aiheur/fdeep/fdeeptest"
)

// FuzzLoad feeds arbitrary bytes to Load: it must return a model or an
// error, never panic, and a model it returns must run.
func FuzzLoad(f *testing.F) {
	seed := string(small())
	f.Add([]byte(seed))
	for _, cut := range []int{1, 10, len(seed) / 3, len(seed) / 2, len(seed) - 2} {
		f.Add([]byte(seed[:cut]))
	}
	edits := [][2]string{
		{`"units":4`, `"units":40000`},
		{`"units":4`, `"units":-4`},
		{`"class_name":"ReLU"`, `"class_name":"LSTM"`},
		{`"class_name":"ReLU"`, `"class_name":"Embedding"`},
		{`"class_name":"ReLU"`, `"class_name":"Concatenate"`},
		{`["input_1",0,0,{}]`, `["dense_2",0,0,{}]`},
		{`"batch_input_shape":[null,3]`, `"batch_input_shape":[null,3,3]`},
		{`"weights":["`, `"weights":["=`},
		{`"output_layers":[["dense_2",0,0]]`, `"output_layers":[["dense_2",0,1]]`},
	}
	for _, e := range edits {
		f.Add([]byte(strings.Replace(seed, e[0], e[1], 1)))
	}
	// A recurrent model so mutations reach the LSTM and Embedding code.
	f.Add(fdeeptest.NewBuilder().Input("tok", 1).Input("h", 2).Input("c", 2).
		Layer("Embedding", "e", map[string]any{"input_dim": 3, "output_dim": 2},
			map[string][]float32{"weights": {0, 1, 2, 3, 4, 5}}, ref("tok")).
		Layer("LSTM", "l", map[string]any{"units": 2, "return_sequences": true, "return_state": true},
			map[string][]float32{"weights": make([]float32, 16), "recurrent_weights": make([]float32, 16), "bias": make([]float32, 8)},
			ref("e"), ref("h"), ref("c")).
		Output(ref("l"), 1, 2).Output(R{Layer: "l", Tensor: 2}, 2).JSON())

	// The smallest real MIOpen model, whole and cut short, when present.
	if real, ok := sharedModel("gfx90a_ConvHipIgemmGroupFwdXdlops_encoder.ktn.model"); ok {
		f.Add(real)
		f.Add(real[:len(real)*2/3])
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Load(data, "fuzz.model", Options{})
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.model") {
				t.Fatalf("error does not name the model: %v", err)
			}
			return
		}
		defer m.Release()
		inputs := make([][]float32, len(m.InputShapes()))
		for i, s := range m.InputShapes() {
			inputs[i] = make([]float32, s.Size())
		}
		// Zero inputs are valid tokens too; an error is acceptable, a panic is not.
		_, _ = m.Predict(inputs...)
	})
}

// sharedModel reads a file of ../shared/miopen-models (next to the module
// root) if it is there.
func sharedModel(name string) ([]byte, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, false
		}
		dir = parent
	}
	data, err := os.ReadFile(filepath.Join(dir, "..", "shared", "miopen-models", name))
	return data, err == nil
}
