package fdeep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
)

// DefaultEpsilon is the largest absolute difference between a self-test's
// expected and computed output that a load accepts: fdeep's default verify
// epsilon, which MIOpen uses.
const DefaultEpsilon = 1e-4

// Limits that keep a malformed file from asking for absurd amounts of
// memory; the real models are far below them.
const (
	maxTensorElems  = 1 << 22
	maxScratchElems = 1 << 24
	maxRank         = 8
)

// Options tune Load.
type Options struct {
	// SkipSelfTest skips the embedded tests. MIOpen always runs them.
	SkipSelfTest bool
	// Epsilon overrides DefaultEpsilon when positive.
	Epsilon float32
}

// SelfTestError is a load that failed because an embedded test's output
// differed from its expected values by more than the tolerance.
type SelfTestError struct {
	Model     string
	Test      int // 0-based index of the failing test
	Tests     int // how many tests the file has
	Output    int // output tensor with the largest deviation
	Index     int // element of that output
	Got, Want float32
	Deviation float64 // largest |got - want|; +Inf when only one side is NaN
	Epsilon   float32
}

func (e *SelfTestError) Error() string {
	return fmt.Sprintf("model %q: embedded test %d of %d failed: output %d deviates from the expected values by up to %.3g (element %d: got %g, want %g; tolerance %g)",
		e.Model, e.Test+1, e.Tests, e.Output, e.Deviation, e.Index, e.Got, e.Want, e.Epsilon)
}

// LoadFile loads a model file from disk; the model is named by its base name.
func LoadFile(file string, opts Options) (*Model, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	return Load(data, filepath.Base(file), opts)
}

// LoadFS loads the model file name from fsys (a model directory or the
// embedded models).
func LoadFS(fsys fs.FS, name string, opts Options) (*Model, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	return Load(data, path.Base(name), opts)
}

// Load parses a frugally-deep JSON model, builds it and runs its embedded
// tests. name labels the model in errors (usually the file name).
func Load(data []byte, name string, opts Options) (*Model, error) {
	m, tests, err := build(data, name)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	if !opts.SkipSelfTest {
		eps := opts.Epsilon
		if eps <= 0 {
			eps = DefaultEpsilon
		}
		if err := m.selfTest(tests, eps); err != nil {
			m.Release()
			return nil, err
		}
	}
	m.selfTests = len(tests)
	return m, nil
}

// JSON layout of a model file. Fields the engine does not need are left out.
type modelJSON struct {
	Architecture    *archJSON                             `json:"architecture"`
	ImageDataFormat string                                `json:"image_data_format"`
	InputShapes     []json.RawMessage                     `json:"input_shapes"`
	OutputShapes    []json.RawMessage                     `json:"output_shapes"`
	Tests           []testJSON                            `json:"tests"`
	TrainableParams map[string]map[string]json.RawMessage `json:"trainable_params"`
	Hash            string                                `json:"hash"`
}

type archJSON struct {
	ClassName string `json:"class_name"`
	Config    struct {
		Name         string          `json:"name"`
		Layers       []layerJSON     `json:"layers"`
		InputLayers  json.RawMessage `json:"input_layers"`
		OutputLayers json.RawMessage `json:"output_layers"`
	} `json:"config"`
}

type layerJSON struct {
	ClassName    string          `json:"class_name"`
	Name         string          `json:"name"`
	Config       json.RawMessage `json:"config"`
	InboundNodes json.RawMessage `json:"inbound_nodes"`
}

type testJSON struct {
	Inputs  []tensorJSON `json:"inputs"`
	Outputs []tensorJSON `json:"outputs"`
}

type tensorJSON struct {
	Shape  []*int          `json:"shape"`
	Values json.RawMessage `json:"values"`
}

// selfTestCase is one decoded embedded test.
type selfTestCase struct {
	inputs, outputs [][]float32
}

// tensorRef names one output tensor of one call of a layer.
type tensorRef struct {
	layer        string
	node, tensor int
}

type nodeID struct {
	layer string
	node  int
}

type slotInfo struct {
	span
	shape Shape
}

// weightField is an op's weight slice, filled from a decoded parameter
// and later moved into the arena.
type weightField struct {
	dst *[]float32
	key string
}

type builder struct {
	layers   map[string]*layerJSON
	inbound  map[string][][]tensorRef
	params   map[string]map[string]json.RawMessage
	built    map[nodeID][]int
	visiting map[nodeID]bool
	slots    []slotInfo
	scratch  int
	ops      []op
	fields   []weightField
	decoded  map[string][]float32
	inputs   map[string]int // InputLayer name -> slot
}

// indexLayers names each layer (from its config where the entry has no
// name of its own) and indexes it by name; a layer without a name, or a
// name used twice, is an error.
func (b *builder) indexLayers(layers []layerJSON) error {
	for i := range layers {
		l := &layers[i]
		if l.Name == "" {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(l.Config, &named)
			l.Name = named.Name
		}
		if l.Name == "" {
			return fmt.Errorf("layer %d (%s) has no name", i, l.ClassName)
		}
		if _, dup := b.layers[l.Name]; dup {
			return fmt.Errorf("layer name %q is used twice", l.Name)
		}
		b.layers[l.Name] = l
	}
	return nil
}

// ports builds the model's declared inputs and outputs into m and returns
// the input layers it declares.
func (b *builder) ports(m *Model, inRefs, outRefs []tensorRef) (map[string]bool, error) {
	declared := make(map[string]bool, len(inRefs))
	for i, ref := range inRefs {
		l, ok := b.layers[ref.layer]
		if !ok || l.ClassName != "InputLayer" || ref.node != 0 || ref.tensor != 0 {
			return nil, fmt.Errorf("input_layers[%d] (%s) is not an InputLayer", i, ref.layer)
		}
		if declared[ref.layer] {
			return nil, fmt.Errorf("input_layers lists %q twice", ref.layer)
		}
		declared[ref.layer] = true
		s, err := b.tensor(ref)
		if err != nil {
			return nil, err
		}
		m.inputs = append(m.inputs, port{span: b.slots[s].span, shape: b.slots[s].shape, name: ref.layer})
	}
	for _, ref := range outRefs {
		s, err := b.tensor(ref)
		if err != nil {
			return nil, err
		}
		m.outputs = append(m.outputs, port{span: b.slots[s].span, shape: b.slots[s].shape, name: ref.layer})
	}
	return declared, nil
}

func build(data []byte, name string) (*Model, []selfTestCase, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, errors.New("file is empty")
	}
	var mj modelJSON
	if err := json.Unmarshal(data, &mj); err != nil {
		return nil, nil, fmt.Errorf("not a valid frugally-deep JSON file: %v", err)
	}
	if mj.Architecture == nil {
		return nil, nil, errors.New(`missing "architecture"`)
	}
	if mj.ImageDataFormat != "channels_last" {
		return nil, nil, fmt.Errorf("image_data_format is %q, only \"channels_last\" is supported", mj.ImageDataFormat)
	}
	arch := mj.Architecture
	if len(arch.Config.Layers) == 0 {
		return nil, nil, errors.New("architecture has no layers")
	}
	b := &builder{
		layers:   make(map[string]*layerJSON, len(arch.Config.Layers)),
		inbound:  make(map[string][][]tensorRef),
		params:   mj.TrainableParams,
		built:    make(map[nodeID][]int),
		visiting: make(map[nodeID]bool),
		decoded:  make(map[string][]float32),
		inputs:   make(map[string]int),
	}
	if err := b.indexLayers(arch.Config.Layers); err != nil {
		return nil, nil, err
	}
	inRefs, err := parseRefList(arch.Config.InputLayers)
	if err != nil {
		return nil, nil, fmt.Errorf("input_layers: %w", err)
	}
	outRefs, err := parseRefList(arch.Config.OutputLayers)
	if err != nil {
		return nil, nil, fmt.Errorf("output_layers: %w", err)
	}
	if len(inRefs) == 0 || len(outRefs) == 0 {
		return nil, nil, errors.New("the model declares no inputs or no outputs")
	}

	m := &Model{name: name, hash: mj.Hash}
	declared, err := b.ports(m, inRefs, outRefs)
	if err != nil {
		return nil, nil, err
	}
	for in := range b.inputs {
		if !declared[in] {
			return nil, nil, fmt.Errorf("layer %q is an InputLayer the model does not list in input_layers", in)
		}
	}
	if err := checkDeclaredShapes("input_shapes", mj.InputShapes, m.inputs); err != nil {
		return nil, nil, err
	}
	if err := checkDeclaredShapes("output_shapes", mj.OutputShapes, m.outputs); err != nil {
		return nil, nil, err
	}
	tests, err := decodeTests(mj.Tests, m)
	if err != nil {
		return nil, nil, err
	}
	if err := b.placeWeights(m); err != nil {
		return nil, nil, err
	}
	m.ops = b.ops
	m.scratch = b.scratch
	size := b.scratch
	m.pool.New = func() any {
		buf := make([]float32, size)
		return &buf
	}
	// Weights that nobody released go back when the model is unreachable.
	// Predict keeps the model alive until it has finished reading them.
	runtime.AddCleanup(m, func(a *weightArena) { a.release() }, m.arena)
	return m, tests, nil
}

// placeWeights moves every decoded parameter into one arena and points the
// ops at it; each parameter is stored once even if several calls share it.
func (b *builder) placeWeights(m *Model) error {
	offsets := make(map[string]int, len(b.decoded))
	total := 0
	for _, f := range b.fields {
		if _, ok := offsets[f.key]; ok {
			continue
		}
		offsets[f.key] = total
		total += len(b.decoded[f.key])
	}
	arena, floats, err := newWeightArena(total)
	if err != nil {
		return err
	}
	for _, f := range b.fields {
		src := b.decoded[f.key]
		off := offsets[f.key]
		dst := floats[off : off+len(src) : off+len(src)]
		copy(dst, src)
		*f.dst = dst
	}
	if err := arena.seal(); err != nil {
		arena.release()
		return err
	}
	m.arena = arena
	m.weightCount = total
	return nil
}

func checkDeclaredShapes(what string, declared []json.RawMessage, ports []port) error {
	if declared == nil {
		return nil
	}
	if len(declared) != len(ports) {
		return fmt.Errorf("%s lists %d shapes, the graph has %d", what, len(declared), len(ports))
	}
	for i, raw := range declared {
		var dims []*int
		if err := json.Unmarshal(raw, &dims); err != nil {
			return fmt.Errorf("%s[%d]: %v", what, i, err)
		}
		shape, err := fixedShape(dims)
		if err != nil {
			return fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if !shape.equal(ports[i].shape) {
			return fmt.Errorf("%s[%d] is %v but the graph gives %v", what, i, shape, ports[i].shape)
		}
	}
	return nil
}

func decodeTests(raw []testJSON, m *Model) ([]selfTestCase, error) {
	tests := make([]selfTestCase, 0, len(raw))
	for i, t := range raw {
		ins, err := decodeTestTensors(t.Inputs, m.inputs)
		if err != nil {
			return nil, fmt.Errorf("embedded test %d inputs: %w", i+1, err)
		}
		outs, err := decodeTestTensors(t.Outputs, m.outputs)
		if err != nil {
			return nil, fmt.Errorf("embedded test %d outputs: %w", i+1, err)
		}
		tests = append(tests, selfTestCase{inputs: ins, outputs: outs})
	}
	return tests, nil
}

func decodeTestTensors(raw []tensorJSON, ports []port) ([][]float32, error) {
	if len(raw) != len(ports) {
		return nil, fmt.Errorf("%d tensors given, the model has %d", len(raw), len(ports))
	}
	out := make([][]float32, len(raw))
	for i, t := range raw {
		v, err := decodeFloats(t.Values)
		if err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
		if t.Shape != nil {
			shape, err := fixedShape(t.Shape)
			if err != nil {
				return nil, fmt.Errorf("tensor %d: %w", i, err)
			}
			if shape.Size() != len(v) {
				return nil, fmt.Errorf("tensor %d: shape %v holds %d values but %d are given", i, shape, shape.Size(), len(v))
			}
		}
		if len(v) != ports[i].n {
			return nil, fmt.Errorf("tensor %d has %d values, the model's %s has shape %v (%d values)", i, len(v), ports[i].name, ports[i].shape, ports[i].n)
		}
		out[i] = v
	}
	return out, nil
}

// selfTest runs the embedded tests and compares with an absolute tolerance.
func (m *Model) selfTest(tests []selfTestCase, eps float32) error {
	outs := make([][]float32, len(m.outputs))
	for i, p := range m.outputs {
		outs[i] = make([]float32, p.n)
	}
	for ti, t := range tests {
		if err := m.PredictInto(outs, t.inputs...); err != nil {
			return fmt.Errorf("embedded test %d of %d: %w", ti+1, len(tests), err)
		}
		worst := &SelfTestError{Model: m.name, Test: ti, Tests: len(tests), Epsilon: eps, Deviation: -1}
		for oi, got := range outs {
			for k, g := range got {
				w := t.outputs[oi][k]
				d := deviation(g, w)
				if d > worst.Deviation {
					worst.Deviation, worst.Output, worst.Index, worst.Got, worst.Want = d, oi, k, g, w
				}
			}
		}
		if worst.Deviation > float64(eps) {
			return worst
		}
	}
	return nil
}

func deviation(got, want float32) float64 {
	gn, wn := math.IsNaN(float64(got)), math.IsNaN(float64(want))
	switch {
	case gn && wn:
		return 0
	case gn || wn:
		return math.Inf(1)
	case got == want: // equal infinities
		return 0
	}
	return math.Abs(float64(got) - float64(want))
}

// parseRefList reads input_layers / output_layers: a list of
// [name, node, tensor] triples, or one bare triple.
func parseRefList(raw json.RawMessage) ([]tensorRef, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("missing")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("expected a list of [layer, node, tensor] entries: %v", err)
	}
	if len(items) > 0 {
		if first := bytes.TrimSpace(items[0]); len(first) > 0 && first[0] == '"' {
			ref, err := parseRef(raw)
			if err != nil {
				return nil, err
			}
			return []tensorRef{ref}, nil
		}
	}
	refs := make([]tensorRef, 0, len(items))
	for _, it := range items {
		ref, err := parseRef(it)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// parseRef reads [name, node, tensor] with an optional fourth kwargs entry.
func parseRef(raw json.RawMessage) (tensorRef, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) < 3 {
		return tensorRef{}, fmt.Errorf("expected [layer, node, tensor], found %.60s", raw)
	}
	var ref tensorRef
	if err := json.Unmarshal(parts[0], &ref.layer); err != nil {
		return tensorRef{}, fmt.Errorf("layer name in %.60s: %v", raw, err)
	}
	if err := json.Unmarshal(parts[1], &ref.node); err != nil {
		return tensorRef{}, fmt.Errorf("node index in %.60s: %v", raw, err)
	}
	if err := json.Unmarshal(parts[2], &ref.tensor); err != nil {
		return tensorRef{}, fmt.Errorf("tensor index in %.60s: %v", raw, err)
	}
	return ref, nil
}

// inboundNodes parses a layer's call nodes once.
func (b *builder) inboundNodes(l *layerJSON) ([][]tensorRef, error) {
	if nodes, ok := b.inbound[l.Name]; ok {
		return nodes, nil
	}
	var raw [][]json.RawMessage
	trimmed := bytes.TrimSpace(l.InboundNodes)
	if len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		if err := json.Unmarshal(trimmed, &raw); err != nil {
			return nil, fmt.Errorf("layer %q: unsupported inbound_nodes format: %v", l.Name, err)
		}
	}
	nodes := make([][]tensorRef, len(raw))
	for i, node := range raw {
		for _, r := range node {
			ref, err := parseRef(r)
			if err != nil {
				return nil, fmt.Errorf("layer %q inbound node %d: %w", l.Name, i, err)
			}
			nodes[i] = append(nodes[i], ref)
		}
	}
	b.inbound[l.Name] = nodes
	return nodes, nil
}

func (b *builder) tensor(ref tensorRef) (int, error) {
	outs, err := b.node(nodeID{ref.layer, ref.node})
	if err != nil {
		return 0, err
	}
	if ref.tensor < 0 || ref.tensor >= len(outs) {
		return 0, fmt.Errorf("layer %q has %d output tensors; tensor %d is referenced", ref.layer, len(outs), ref.tensor)
	}
	return outs[ref.tensor], nil
}

// node builds one call of a layer (after its inputs) and returns the slots
// of its output tensors. Ops are appended in dependency order.
func (b *builder) node(id nodeID) ([]int, error) {
	if outs, ok := b.built[id]; ok {
		return outs, nil
	}
	l, ok := b.layers[id.layer]
	if !ok {
		return nil, fmt.Errorf("reference to unknown layer %q", id.layer)
	}
	if b.visiting[id] {
		return nil, fmt.Errorf("layer %q: the layer graph has a cycle", id.layer)
	}
	b.visiting[id] = true
	defer delete(b.visiting, id)

	var outs []int
	if l.ClassName == "InputLayer" {
		if id.node != 0 {
			return nil, fmt.Errorf("input layer %q has only node 0; node %d is referenced", id.layer, id.node)
		}
		s, err := b.inputLayer(l)
		if err != nil {
			return nil, err
		}
		outs = []int{s}
	} else {
		nodes, err := b.inboundNodes(l)
		if err != nil {
			return nil, err
		}
		if id.node < 0 || id.node >= len(nodes) {
			return nil, fmt.Errorf("layer %q has %d call nodes; node %d is referenced", id.layer, len(nodes), id.node)
		}
		if len(nodes[id.node]) == 0 {
			return nil, fmt.Errorf("layer %q node %d has no inputs", id.layer, id.node)
		}
		ins := make([]int, 0, len(nodes[id.node]))
		for _, ref := range nodes[id.node] {
			s, err := b.tensor(ref)
			if err != nil {
				return nil, err
			}
			ins = append(ins, s)
		}
		outs, err = b.layer(l, ins)
		if err != nil {
			return nil, fmt.Errorf("layer %q (%s): %w", l.Name, l.ClassName, err)
		}
	}
	b.built[id] = outs
	return outs, nil
}

// alloc reserves a scratch span for a tensor of the given shape.
func (b *builder) alloc(shape Shape) (int, error) {
	if len(shape) == 0 || len(shape) > maxRank {
		return 0, fmt.Errorf("tensor rank %d is not supported", len(shape))
	}
	n := 1
	for _, d := range shape {
		if d < 1 || d > maxTensorElems || n > maxTensorElems/d {
			return 0, fmt.Errorf("tensor shape %v is too large or invalid", shape)
		}
		n *= d
	}
	if b.scratch+n > maxScratchElems {
		return 0, fmt.Errorf("the model needs more than %d scratch values", maxScratchElems)
	}
	b.slots = append(b.slots, slotInfo{span: span{off: b.scratch, n: n}, shape: shape})
	b.scratch += n
	return len(b.slots) - 1, nil
}

// bind decodes layer's trainable parameter key, checks its length and
// points *dst at it.
func (b *builder) bind(dst *[]float32, layer, key string, want int) error {
	full := layer + "\x00" + key
	v, ok := b.decoded[full]
	if !ok {
		raw, ok := b.params[layer][key]
		if !ok {
			return fmt.Errorf("trainable_params has no %q for this layer", key)
		}
		var err error
		v, err = decodeFloats(raw)
		if err != nil {
			return fmt.Errorf("trainable_params %q: %w", key, err)
		}
		b.decoded[full] = v
	}
	if len(v) != want {
		return fmt.Errorf("trainable_params %q has %d values, want %d for this layer's shape", key, len(v), want)
	}
	*dst = v
	b.fields = append(b.fields, weightField{dst: dst, key: full})
	return nil
}
