// Package fdeeptest writes small frugally-deep model files with known
// answers, for tests, fuzz seeds and demonstrations that must not depend on
// MIOpen's model files being present.
package fdeeptest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
)

// Ref names one output tensor of one call of a layer: [layer, node, tensor].
type Ref struct {
	Layer  string
	Node   int
	Tensor int
}

// R is shorthand for the first tensor of a layer's first call.
func R(layer string) Ref { return Ref{Layer: layer} }

func (r Ref) json() []any { return []any{r.Layer, r.Node, r.Tensor, map[string]any{}} }

// Builder assembles a model file in the layout fdeep's exporter writes.
type Builder struct {
	layers    []map[string]any
	params    map[string]map[string]any
	inputs    []Ref
	inShapes  [][]int
	outputs   []Ref
	outShapes [][]int
	tests     []map[string]any
}

// NewBuilder starts an empty model.
func NewBuilder() *Builder { return &Builder{params: map[string]map[string]any{}} }

// Input adds an InputLayer with the given shape (without batch dimension).
func (b *Builder) Input(name string, shape ...int) *Builder {
	batch := append([]any{nil}, intsToAny(shape)...)
	b.layers = append(b.layers, map[string]any{
		"class_name":    "InputLayer",
		"name":          name,
		"config":        map[string]any{"name": name, "batch_input_shape": batch, "dtype": "float32"},
		"inbound_nodes": []any{},
	})
	b.inputs = append(b.inputs, R(name))
	b.inShapes = append(b.inShapes, shape)
	return b
}

// Layer adds a layer called once on the given inputs, with its config and
// trainable parameters (encoded as fdeep does).
func (b *Builder) Layer(class, name string, config map[string]any, params map[string][]float32, inputs ...Ref) *Builder {
	cfg := map[string]any{"name": name}
	for k, v := range config {
		cfg[k] = v
	}
	node := make([]any, len(inputs))
	for i, r := range inputs {
		node[i] = r.json()
	}
	b.layers = append(b.layers, map[string]any{
		"class_name":    class,
		"name":          name,
		"config":        cfg,
		"inbound_nodes": []any{node},
	})
	if len(params) > 0 {
		p := map[string]any{}
		for k, v := range params {
			p[k] = Encode(v)
		}
		b.params[name] = p
	}
	return b
}

// Call adds another call of an existing layer (a shared layer), which
// becomes node 1, 2, ... of that layer.
func (b *Builder) Call(name string, inputs ...Ref) *Builder {
	node := make([]any, len(inputs))
	for i, r := range inputs {
		node[i] = r.json()
	}
	for _, l := range b.layers {
		if l["name"] == name {
			l["inbound_nodes"] = append(l["inbound_nodes"].([]any), node)
		}
	}
	return b
}

// Output declares a model output and its shape.
func (b *Builder) Output(r Ref, shape ...int) *Builder {
	b.outputs = append(b.outputs, r)
	b.outShapes = append(b.outShapes, shape)
	return b
}

// Test embeds one test case; shapes are taken from the declared ports.
func (b *Builder) Test(inputs, outputs [][]float32) *Builder {
	enc := func(values [][]float32, shapes [][]int) []any {
		out := make([]any, len(values))
		for i, v := range values {
			var shape []int
			if i < len(shapes) {
				shape = shapes[i]
			}
			out[i] = map[string]any{"shape": shape, "values": Encode(v)}
		}
		return out
	}
	b.tests = append(b.tests, map[string]any{
		"inputs":  enc(inputs, b.inShapes),
		"outputs": enc(outputs, b.outShapes),
	})
	return b
}

// JSON renders the model file.
func (b *Builder) JSON() []byte {
	refs := func(rs []Ref) []any {
		out := make([]any, len(rs))
		for i, r := range rs {
			out[i] = []any{r.Layer, r.Node, r.Tensor}
		}
		return out
	}
	doc := map[string]any{
		"architecture": map[string]any{
			"class_name": "Functional",
			"config": map[string]any{
				"name":          "model",
				"layers":        b.layers,
				"input_layers":  refs(b.inputs),
				"output_layers": refs(b.outputs),
			},
			"keras_version": "2.14.0",
			"backend":       "tensorflow",
		},
		"image_data_format": "channels_last",
		"input_shapes":      b.inShapes,
		"output_shapes":     b.outShapes,
		"trainable_params":  b.params,
		"hash":              "",
	}
	if len(b.tests) > 0 {
		doc["tests"] = b.tests
	}
	data, err := json.Marshal(doc)
	if err != nil {
		// Only plain maps, slices, strings and numbers go in; this cannot fail.
		panic("fdeeptest: " + err.Error())
	}
	return data
}

// Encode writes float32 values as fdeep does: little-endian bytes in base64
// chunks of at most 1024 characters.
func Encode(v []float32) []string {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	const chunkBytes = 768 // encodes to exactly 1024 characters
	chunks := []string{}
	for start := 0; start < len(raw); start += chunkBytes {
		end := min(start+chunkBytes, len(raw))
		chunks = append(chunks, base64.StdEncoding.EncodeToString(raw[start:end]))
	}
	return chunks
}

func intsToAny(v []int) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// MLP builds a residual-free multi-layer perceptron like TunaNet's core:
// Dense layers of the given widths with ReLU between them and a linear
// last layer (sizes[0] is the input width). Weights come from seed. The
// file embeds one test whose expected output is computed here in float64,
// independently of the fdeep package.
func MLP(sizes []int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := NewBuilder().Input("input_1", sizes[0])
	prev := "input_1"
	type layer struct{ w, bias []float32 }
	var layers []layer
	for i := 1; i < len(sizes); i++ {
		in, out := sizes[i-1], sizes[i]
		l := layer{w: make([]float32, in*out), bias: make([]float32, out)}
		scale := float32(1 / math.Sqrt(float64(in)))
		for k := range l.w {
			l.w[k] = (rng.Float32()*2 - 1) * scale
		}
		for k := range l.bias {
			l.bias[k] = (rng.Float32()*2 - 1) * 0.1
		}
		layers = append(layers, l)
		name := "dense_" + strconv.Itoa(i)
		b.Layer("Dense", name, map[string]any{"units": out, "activation": "linear", "use_bias": true},
			map[string][]float32{"weights": l.w, "bias": l.bias}, R(prev))
		prev = name
		if i < len(sizes)-1 {
			relu := "re_lu_" + strconv.Itoa(i)
			b.Layer("ReLU", relu, map[string]any{"max_value": nil, "negative_slope": 0.0, "threshold": 0.0}, nil, R(prev))
			prev = relu
		}
	}
	b.Output(R(prev), sizes[len(sizes)-1])

	x := make([]float32, sizes[0])
	for k := range x {
		x[k] = rng.Float32()*2 - 1
	}
	cur := make([]float64, len(x))
	for k, v := range x {
		cur[k] = float64(v)
	}
	for i, l := range layers {
		units := len(l.bias)
		next := make([]float64, units)
		for j := 0; j < units; j++ {
			sum := float64(l.bias[j])
			for k, v := range cur {
				sum += v * float64(l.w[k*units+j])
			}
			if i < len(layers)-1 && sum < 0 {
				sum = 0
			}
			next[j] = sum
		}
		cur = next
	}
	want := make([]float32, len(cur))
	for k, v := range cur {
		want[k] = float32(v)
	}
	b.Test([][]float32{x}, [][]float32{want})
	return b.JSON()
}
