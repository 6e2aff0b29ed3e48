package fdeep

import (
	"strings"
	"testing"

	"miotool/internal/aiheur/fdeep/fdeeptest"
)

// small is a valid two-layer model used as the base of the malformed cases.
func small() []byte { return fdeeptest.MLP([]int{3, 4, 2}, 5) }

func dense(units int, weights []float32) *fdeeptest.Builder {
	return fdeeptest.NewBuilder().Input("x", 2).
		Layer("Dense", "d", map[string]any{"units": units, "activation": "linear", "use_bias": false},
			map[string][]float32{"weights": weights}, ref("x")).
		Output(ref("d"), units)
}

func TestMalformedModels(t *testing.T) {
	valid := string(small())
	tests := []struct {
		name string
		data string
		want string // substring of the error
	}{
		{"empty", "", "file is empty"},
		{"whitespace", " \n\t", "file is empty"},
		{"not json", "hello", "not a valid frugally-deep JSON file"},
		{"truncated json", valid[:len(valid)/2], "not a valid frugally-deep JSON file"},
		{"truncated one byte", valid[:len(valid)-1], "not a valid frugally-deep JSON file"},
		{"json array", "[1,2,3]", "not a valid frugally-deep JSON file"},
		{"no architecture", `{"image_data_format":"channels_last"}`, `missing "architecture"`},
		{"channels first", strings.Replace(valid, `"channels_last"`, `"channels_first"`, 1), `only "channels_last"`},
		{"no layers", `{"architecture":{"config":{"layers":[]}},"image_data_format":"channels_last"}`, "no layers"},
		{"wrong base64", strings.Replace(valid, `"weights":["`, `"weights":["!!!!`, 1), "base64 chunk 0"},
		{"base64 not whole floats", strings.Replace(valid, `"weights":["`, `"weights":["AAAA","`, 1), "not a whole number of float32 values"},
		{"weights empty", string(dense(1, nil).JSON()), `"weights" has 0 values, want 2`},
		{"weights shape mismatch", string(dense(2, []float32{1, 2, 3}).JSON()), `"weights" has 3 values, want 4`},
		{"weights wrong type", strings.Replace(valid, `"weights":["`, `"weights":[true,"`, 1), "bad list of numbers"},
		{"missing bias", strings.Replace(valid, `"bias":`, `"bias_x":`, 1), `no "bias"`},
		{"unknown layer type", strings.Replace(valid, `"class_name":"ReLU"`, `"class_name":"Conv7D"`, 1), `unsupported layer type "Conv7D"`},
		{"unknown activation", strings.Replace(valid, `"activation":"linear"`, `"activation":"wiggle"`, 1), `unsupported activation "wiggle"`},
		{"units zero", strings.Replace(valid, `"units":4`, `"units":0`, 1), "units is 0"},
		{"units huge", strings.Replace(valid, `"units":4`, `"units":99999999999`, 1), "too many"},
		{"units wrong type", strings.Replace(valid, `"units":4`, `"units":"four"`, 1), "bad config"},
		{"unknown inbound layer", strings.Replace(valid, `["input_1",0,0,{}]`, `["nobody",0,0,{}]`, 1), `unknown layer "nobody"`},
		{"bad inbound node index", strings.Replace(valid, `["dense_1",0,0,{}]`, `["dense_1",3,0,{}]`, 1), "node 3 is referenced"},
		{"bad tensor index", strings.Replace(valid, `["dense_1",0,0,{}]`, `["dense_1",0,2,{}]`, 1), "tensor 2 is referenced"},
		{"inbound not a list", strings.Replace(valid, `[[["input_1",0,0,{}]]]`, `{"args":1}`, 1), "unsupported inbound_nodes format"},
		{"short inbound ref", strings.Replace(valid, `["input_1",0,0,{}]`, `["input_1"]`, 1), "expected [layer, node, tensor]"},
		{"cycle", strings.Replace(valid, `["input_1",0,0,{}]`, `["re_lu_1",0,0,{}]`, 1), "cycle"},
		{"variable input dim", strings.Replace(valid, `"batch_input_shape":[null,3]`, `"batch_input_shape":[null,null]`, 1), "variable"},
		{"zero input dim", strings.Replace(valid, `"batch_input_shape":[null,3]`, `"batch_input_shape":[null,0]`, 1), "must be positive"},
		{"input shapes disagree", strings.Replace(valid, `"input_shapes":[[3]]`, `"input_shapes":[[4]]`, 1), "input_shapes[0] is [4]"},
		{"output shapes disagree", strings.Replace(valid, `"output_shapes":[[2]]`, `"output_shapes":[[2],[2]]`, 1), "output_shapes lists 2 shapes"},
		{"no outputs", strings.Replace(valid, `"output_layers":[["dense_2",0,0]]`, `"output_layers":[]`, 1), "no inputs or no outputs"},
		{"input not an input layer", strings.Replace(valid, `"input_layers":[["input_1",0,0]]`, `"input_layers":[["dense_1",0,0]]`, 1), "is not an InputLayer"},
		{"test input count", strings.Replace(valid, `"inputs":[{`, `"inputs":[{"shape":[3],"values":[]},{`, 1), "2 tensors given, the model has 1"},
		{"test value count", strings.Replace(valid, `"inputs":[{"shape":[3]`, `"inputs":[{"shape":[4]`, 1), "shape [4] holds 4 values but 3 are given"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.data == valid {
				t.Fatal("the edit did not change the model; fix the test")
			}
			m, err := Load([]byte(tc.data), "bad.model", Options{})
			if err == nil {
				m.Release()
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not contain %q", msg, tc.want)
			}
			if !strings.Contains(msg, "bad.model") {
				t.Errorf("error %q does not name the model", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q spans lines", msg)
			}
		})
	}
}

// Configurations the engine cannot run are refused at load, not at Predict.
func TestUnsupportedConfigurations(t *testing.T) {
	lstm := func(cfg map[string]any) []byte {
		base := map[string]any{"units": 2, "return_sequences": false, "return_state": false}
		for k, v := range cfg {
			base[k] = v
		}
		return fdeeptest.NewBuilder().Input("x", 3, 1).
			Layer("LSTM", "l", base, map[string][]float32{
				"weights": make([]float32, 8), "recurrent_weights": make([]float32, 16), "bias": make([]float32, 8)}, ref("x")).
			Output(ref("l"), 2).JSON()
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"stateful lstm", lstm(map[string]any{"stateful": true}), "stateful"},
		{"softmax lstm", lstm(map[string]any{"activation": "softmax"}), "softmax is not supported"},
		{"lstm on a vector", fdeeptest.NewBuilder().Input("x", 3).
			Layer("LSTM", "l", map[string]any{"units": 2}, nil, ref("x")).Output(ref("l"), 2).JSON(), "not [timesteps, features]"},
		{"embedding mask", fdeeptest.NewBuilder().Input("x", 1).
			Layer("Embedding", "e", map[string]any{"input_dim": 2, "output_dim": 2, "mask_zero": true},
				map[string][]float32{"weights": make([]float32, 4)}, ref("x")).Output(ref("e"), 1, 2).JSON(), "mask_zero"},
		{"add with one input", fdeeptest.NewBuilder().Input("x", 3).
			Layer("Add", "a", nil, nil, ref("x")).Output(ref("a"), 3).JSON(), "1 input tensors connected"},
		{"add shape mismatch", fdeeptest.NewBuilder().Input("x", 3).Input("y", 2).
			Layer("Add", "a", nil, nil, ref("x"), ref("y")).Output(ref("a"), 3).JSON(), "input shapes differ"},
		{"reshape mismatch", fdeeptest.NewBuilder().Input("x", 3).
			Layer("Reshape", "r", map[string]any{"target_shape": []int{2, 2}}, nil, ref("x")).Output(ref("r"), 2, 2).JSON(), "holds 4 values, the input has 3"},
		{"huge repeat", fdeeptest.NewBuilder().Input("x", 64).
			Layer("RepeatVector", "r", map[string]any{"n": 1 << 30}, nil, ref("x")).Output(ref("r"), 1<<30, 64).JSON(), "too large"},
		{"undeclared input", fdeeptest.NewBuilder().Input("x", 2).
			Layer("Add", "a", nil, nil, ref("x"), ref("ghost")).
			Layer("InputLayer", "ghost", map[string]any{"batch_input_shape": []any{nil, 2}}, nil).
			Output(ref("a"), 2).JSON(), "does not list in input_layers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.data, "cfg.model", Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
