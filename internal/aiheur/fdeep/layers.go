package fdeep

// The per-layer builders: one function per Keras layer type, each checking
// its config and inputs and appending the ops that compute it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

func (b *builder) inputLayer(l *layerJSON) (int, error) {
	var cfg struct {
		BatchInputShape []*int `json:"batch_input_shape"`
		BatchShape      []*int `json:"batch_shape"`
	}
	if err := json.Unmarshal(l.Config, &cfg); err != nil {
		return 0, fmt.Errorf("input layer %q: bad config: %v", l.Name, err)
	}
	dims := cfg.BatchInputShape
	if dims == nil {
		dims = cfg.BatchShape
	}
	if len(dims) < 2 {
		return 0, fmt.Errorf("input layer %q: batch_input_shape must be [null, dims...], found %d entries", l.Name, len(dims))
	}
	shape, err := fixedShape(dims[1:])
	if err != nil {
		return 0, fmt.Errorf("input layer %q: %w", l.Name, err)
	}
	s, err := b.alloc(shape)
	if err != nil {
		return 0, fmt.Errorf("input layer %q: %w", l.Name, err)
	}
	b.inputs[l.Name] = s
	return s, nil
}

// fixedShape converts JSON dimensions, which must all be known.
func fixedShape(dims []*int) (Shape, error) {
	shape := make(Shape, len(dims))
	for i, d := range dims {
		if d == nil {
			return nil, fmt.Errorf("dimension %d is variable (null); only fixed shapes are supported", i)
		}
		if *d < 1 {
			return nil, fmt.Errorf("dimension %d is %d; dimensions must be positive", i, *d)
		}
		shape[i] = *d
	}
	return shape, nil
}

func decodeConfig(l *layerJSON, cfg any) error {
	if err := json.Unmarshal(l.Config, cfg); err != nil {
		return fmt.Errorf("bad config: %v", err)
	}
	return nil
}

// layer compiles one call of a non-input layer.
func (b *builder) layer(l *layerJSON, ins []int) ([]int, error) {
	switch l.ClassName {
	case "Dense":
		return b.dense(l, ins)
	case "ReLU":
		return b.relu(l, ins)
	case "Activation":
		return b.activationLayer(l, ins)
	case "Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum":
		return b.merge(l, ins)
	case "Embedding":
		return b.embedding(l, ins)
	case "LSTM":
		return b.lstm(l, ins)
	case "Concatenate":
		return b.concatenate(l, ins)
	case "Reshape", "Flatten", "Dropout":
		return b.reshape(l, ins)
	case "RepeatVector":
		return b.repeatVector(l, ins)
	}
	return nil, fmt.Errorf("unsupported layer type %q", l.ClassName)
}

func oneInput(ins []int) error {
	if len(ins) != 1 {
		return fmt.Errorf("takes one input tensor, %d are connected", len(ins))
	}
	return nil
}

func (b *builder) dense(l *layerJSON, ins []int) ([]int, error) {
	var cfg struct {
		Units      int    `json:"units"`
		Activation string `json:"activation"`
		UseBias    *bool  `json:"use_bias"`
	}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	if cfg.Units < 1 {
		return nil, fmt.Errorf("units is %d", cfg.Units)
	}
	act, err := parseActivation(cfg.Activation)
	if err != nil {
		return nil, err
	}
	in := b.slots[ins[0]]
	inDim := in.shape[len(in.shape)-1]
	if inDim > maxTensorElems/cfg.Units {
		return nil, fmt.Errorf("%d x %d weights are too many", inDim, cfg.Units)
	}
	outShape := append(in.shape[:len(in.shape)-1:len(in.shape)-1], cfg.Units)
	out, err := b.alloc(outShape)
	if err != nil {
		return nil, err
	}
	d := &denseOp{in: in.span, out: b.slots[out].span, steps: in.n / inDim, inDim: inDim, units: cfg.Units, act: act}
	if err := b.bind(&d.w, l.Name, "weights", inDim*cfg.Units); err != nil {
		return nil, err
	}
	if cfg.UseBias == nil || *cfg.UseBias {
		if err := b.bind(&d.b, l.Name, "bias", cfg.Units); err != nil {
			return nil, err
		}
	}
	d.skipZeros = allFinite(d.w)
	b.ops = append(b.ops, d)
	return []int{out}, nil
}

func (b *builder) relu(l *layerJSON, ins []int) ([]int, error) {
	var cfg struct {
		MaxValue      *float64 `json:"max_value"`
		NegativeSlope float64  `json:"negative_slope"`
		Threshold     float64  `json:"threshold"`
	}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	in := b.slots[ins[0]]
	out, err := b.alloc(in.shape)
	if err != nil {
		return nil, err
	}
	r := &reluOp{in: in.span, out: b.slots[out].span, maxValue: float32(math.Inf(1)),
		negSlope: float32(cfg.NegativeSlope), threshold: float32(cfg.Threshold)}
	if cfg.MaxValue != nil {
		r.maxValue = float32(*cfg.MaxValue)
	}
	b.ops = append(b.ops, r)
	return []int{out}, nil
}

func (b *builder) activationLayer(l *layerJSON, ins []int) ([]int, error) {
	var cfg struct {
		Activation string `json:"activation"`
	}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	act, err := parseActivation(cfg.Activation)
	if err != nil {
		return nil, err
	}
	in := b.slots[ins[0]]
	out, err := b.alloc(in.shape)
	if err != nil {
		return nil, err
	}
	b.ops = append(b.ops, &activationOp{in: in.span, out: b.slots[out].span, act: act, lastDim: in.shape[len(in.shape)-1]})
	return []int{out}, nil
}

var mergeKinds = map[string]mergeKind{
	"Add": mergeAdd, "Subtract": mergeSubtract, "Multiply": mergeMultiply,
	"Average": mergeAverage, "Maximum": mergeMaximum, "Minimum": mergeMinimum,
}

func (b *builder) merge(l *layerJSON, ins []int) ([]int, error) {
	kind := mergeKinds[l.ClassName]
	if len(ins) < 2 || (kind == mergeSubtract && len(ins) != 2) {
		return nil, fmt.Errorf("%d input tensors connected", len(ins))
	}
	first := b.slots[ins[0]]
	spans := make([]span, len(ins))
	for i, s := range ins {
		if !b.slots[s].shape.equal(first.shape) {
			return nil, fmt.Errorf("input shapes differ: %v and %v", first.shape, b.slots[s].shape)
		}
		spans[i] = b.slots[s].span
	}
	out, err := b.alloc(first.shape)
	if err != nil {
		return nil, err
	}
	b.ops = append(b.ops, &mergeOp{ins: spans, out: b.slots[out].span, kind: kind})
	return []int{out}, nil
}

func (b *builder) embedding(l *layerJSON, ins []int) ([]int, error) {
	var cfg struct {
		InputDim  int  `json:"input_dim"`
		OutputDim int  `json:"output_dim"`
		MaskZero  bool `json:"mask_zero"`
	}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	if cfg.InputDim < 1 || cfg.OutputDim < 1 || cfg.InputDim > maxTensorElems/cfg.OutputDim {
		return nil, fmt.Errorf("input_dim %d / output_dim %d are invalid", cfg.InputDim, cfg.OutputDim)
	}
	if cfg.MaskZero {
		return nil, errors.New("mask_zero is not supported")
	}
	in := b.slots[ins[0]]
	outShape := append(in.shape[:len(in.shape):len(in.shape)], cfg.OutputDim)
	out, err := b.alloc(outShape)
	if err != nil {
		return nil, err
	}
	e := &embeddingOp{layer: l.Name, in: in.span, out: b.slots[out].span, inputDim: cfg.InputDim, dim: cfg.OutputDim}
	if err := b.bind(&e.w, l.Name, "weights", cfg.InputDim*cfg.OutputDim); err != nil {
		return nil, err
	}
	b.ops = append(b.ops, e)
	return []int{out}, nil
}

// lstmConfig is what an LSTM layer's config says.
type lstmConfig struct {
	Units               int     `json:"units"`
	Activation          *string `json:"activation"`
	RecurrentActivation *string `json:"recurrent_activation"`
	UseBias             *bool   `json:"use_bias"`
	ReturnSequences     bool    `json:"return_sequences"`
	ReturnState         bool    `json:"return_state"`
	GoBackwards         bool    `json:"go_backwards"`
	Stateful            bool    `json:"stateful"`
	TimeMajor           bool    `json:"time_major"`
}

// activations reads the LSTM's activation and recurrent activation
// (tanh and sigmoid when unset); softmax is not one an LSTM can use.
func (cfg lstmConfig) activations() (act, recAct activation, err error) {
	actName, recName := "tanh", "sigmoid"
	if cfg.Activation != nil {
		actName = *cfg.Activation
	}
	if cfg.RecurrentActivation != nil {
		recName = *cfg.RecurrentActivation
	}
	if act, err = parseActivation(actName); err != nil {
		return act, recAct, err
	}
	if recAct, err = parseActivation(recName); err != nil {
		return act, recAct, err
	}
	if act == actSoftmax || recAct == actSoftmax {
		return act, recAct, errors.New("softmax is not supported as an LSTM activation")
	}
	return act, recAct, nil
}

func (b *builder) lstm(l *layerJSON, ins []int) ([]int, error) {
	var cfg lstmConfig
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if cfg.Stateful || cfg.TimeMajor {
		return nil, errors.New("stateful and time_major LSTMs are not supported")
	}
	if cfg.Units < 1 || cfg.Units > maxTensorElems/(4*cfg.Units) {
		return nil, fmt.Errorf("units is %d", cfg.Units)
	}
	act, recAct, err := cfg.activations()
	if err != nil {
		return nil, err
	}
	if len(ins) != 1 && len(ins) != 3 {
		return nil, fmt.Errorf("takes an input and optionally an initial (h, c) state; %d tensors are connected", len(ins))
	}
	in := b.slots[ins[0]]
	if len(in.shape) != 2 {
		return nil, fmt.Errorf("input shape %v is not [timesteps, features]", in.shape)
	}
	u := cfg.Units
	steps, inDim := in.shape[0], in.shape[1]
	if inDim > maxTensorElems/(4*u) {
		return nil, fmt.Errorf("%d x %d weights are too many", inDim, 4*u)
	}
	op := &lstmOp{in: in.span, steps: steps, inDim: inDim, units: u, act: act, recAct: recAct,
		returnSeq: cfg.ReturnSequences, backwards: cfg.GoBackwards}
	if len(ins) == 3 {
		for _, s := range ins[1:] {
			if !b.slots[s].shape.equal(Shape{u}) {
				return nil, fmt.Errorf("initial state shape %v, want [%d]", b.slots[s].shape, u)
			}
		}
		op.h0, op.c0 = b.slots[ins[1]].span, b.slots[ins[2]].span
	}
	outs, err := b.lstmBuffers(op, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.lstmWeights(op, l.Name, cfg); err != nil {
		return nil, err
	}
	b.ops = append(b.ops, op)
	return outs, nil
}

// lstmBuffers allocates the LSTM's output sequence, its state and its gate
// scratch, and returns the output tensors: the sequence, and the final h
// and c when the layer returns its state.
func (b *builder) lstmBuffers(op *lstmOp, cfg lstmConfig) ([]int, error) {
	u := op.units
	seqShape := Shape{u}
	if cfg.ReturnSequences {
		seqShape = Shape{op.steps, u}
	}
	var slots [4]int
	for i, sh := range []Shape{seqShape, {u}, {u}, {4 * u}} {
		s, err := b.alloc(sh)
		if err != nil {
			return nil, err
		}
		slots[i] = s
	}
	seq, h, c, z := slots[0], slots[1], slots[2], slots[3]
	op.seq, op.h, op.c, op.z = b.slots[seq].span, b.slots[h].span, b.slots[c].span, b.slots[z].span
	if cfg.ReturnState {
		return []int{seq, h, c}, nil
	}
	return []int{seq}, nil
}

// lstmWeights binds the LSTM's kernel, recurrent kernel and bias.
func (b *builder) lstmWeights(op *lstmOp, name string, cfg lstmConfig) error {
	u := op.units
	if err := b.bind(&op.w, name, "weights", op.inDim*4*u); err != nil {
		return err
	}
	if err := b.bind(&op.u, name, "recurrent_weights", u*4*u); err != nil {
		return err
	}
	if cfg.UseBias == nil || *cfg.UseBias {
		return b.bind(&op.b, name, "bias", 4*u)
	}
	return nil
}

func (b *builder) concatenate(l *layerJSON, ins []int) ([]int, error) {
	cfg := struct {
		Axis *int `json:"axis"`
	}{}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if len(ins) < 1 {
		return nil, errors.New("no input tensors connected")
	}
	first := b.slots[ins[0]].shape
	rank := len(first)
	axis := rank - 1
	if cfg.Axis != nil {
		// Keras counts the batch dimension as axis 0.
		switch a := *cfg.Axis; {
		case a < 0 && -a <= rank:
			axis = rank + a
		case a >= 1 && a <= rank:
			axis = a - 1
		default:
			return nil, fmt.Errorf("axis %d is invalid for rank-%d inputs", a, rank)
		}
	}
	outShape := append(Shape(nil), first...)
	outShape[axis] = 0
	c := &concatOp{outer: 1}
	for _, d := range first[:axis] {
		c.outer *= d
	}
	for _, s := range ins {
		sh := b.slots[s].shape
		if len(sh) != rank {
			return nil, fmt.Errorf("input ranks differ: %v and %v", first, sh)
		}
		for k := range sh {
			if k != axis && sh[k] != first[k] {
				return nil, fmt.Errorf("input shapes %v and %v differ outside axis %d", first, sh, axis)
			}
		}
		if outShape[axis] > maxTensorElems-sh[axis] {
			return nil, errors.New("concatenated tensor is too large")
		}
		outShape[axis] += sh[axis]
		c.ins = append(c.ins, b.slots[s].span)
		c.chunks = append(c.chunks, b.slots[s].n/c.outer)
	}
	out, err := b.alloc(outShape)
	if err != nil {
		return nil, err
	}
	c.out = b.slots[out].span
	b.ops = append(b.ops, c)
	return []int{out}, nil
}

func (b *builder) reshape(l *layerJSON, ins []int) ([]int, error) {
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	in := b.slots[ins[0]]
	var outShape Shape
	switch l.ClassName {
	case "Dropout":
		outShape = in.shape
	case "Flatten":
		outShape = Shape{in.n}
	case "Reshape":
		var cfg struct {
			TargetShape []int `json:"target_shape"`
		}
		if err := decodeConfig(l, &cfg); err != nil {
			return nil, err
		}
		var err error
		if outShape, err = resolveTarget(cfg.TargetShape, in.n); err != nil {
			return nil, err
		}
	}
	out, err := b.alloc(outShape)
	if err != nil {
		return nil, err
	}
	b.ops = append(b.ops, &copyOp{in: in.span, out: b.slots[out].span})
	return []int{out}, nil
}

// resolveTarget fills in a Reshape target's single -1 dimension.
func resolveTarget(target []int, size int) (Shape, error) {
	if len(target) == 0 {
		return nil, errors.New("target_shape is empty")
	}
	shape := make(Shape, len(target))
	known, free := 1, -1
	for i, d := range target {
		switch {
		case d == -1 && free < 0:
			free = i
			continue
		case d < 1 || d > maxTensorElems || known > maxTensorElems/d:
			return nil, fmt.Errorf("target_shape %v is invalid", target)
		}
		known *= d
		shape[i] = d
	}
	if free >= 0 {
		if size%known != 0 {
			return nil, fmt.Errorf("target_shape %v does not fit %d values", target, size)
		}
		shape[free] = size / known
	}
	if shape.Size() != size {
		return nil, fmt.Errorf("target_shape %v holds %d values, the input has %d", target, shape.Size(), size)
	}
	return shape, nil
}

func (b *builder) repeatVector(l *layerJSON, ins []int) ([]int, error) {
	var cfg struct {
		N int `json:"n"`
	}
	if err := decodeConfig(l, &cfg); err != nil {
		return nil, err
	}
	if err := oneInput(ins); err != nil {
		return nil, err
	}
	in := b.slots[ins[0]]
	if len(in.shape) != 1 {
		return nil, fmt.Errorf("input shape %v is not a vector", in.shape)
	}
	if cfg.N < 1 {
		return nil, fmt.Errorf("n is %d", cfg.N)
	}
	out, err := b.alloc(Shape{cfg.N, in.shape[0]})
	if err != nil {
		return nil, err
	}
	b.ops = append(b.ops, &repeatOp{in: in.span, out: b.slots[out].span, times: cfg.N})
	return []int{out}, nil
}
