package fdeep

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Shape is a tensor shape without the batch dimension.
type Shape []int

// Size is the number of values a tensor of this shape holds.
func (s Shape) Size() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (s Shape) equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// port is a model input or output: where it lives in the scratch buffer.
type port struct {
	span
	shape Shape
	name  string
}

// Model is a loaded frugally-deep model. It is immutable after Load and
// safe for concurrent use until Release.
type Model struct {
	name, hash      string
	inputs, outputs []port
	ops             []op
	scratch         int
	arena           *weightArena
	weightCount     int
	selfTests       int
	pool            sync.Pool // *[]float32 scratch buffers of length scratch
}

// Name is the label given at load (usually the file name).
func (m *Model) Name() string { return m.name }

// Hash is the file's own hash string (informational; MIOpen ignores it).
func (m *Model) Hash() string { return m.hash }

// InputShapes lists the shapes Predict expects, in order.
func (m *Model) InputShapes() []Shape { return portShapes(m.inputs) }

// OutputShapes lists the shapes Predict produces, in order.
func (m *Model) OutputShapes() []Shape { return portShapes(m.outputs) }

func portShapes(ports []port) []Shape {
	out := make([]Shape, len(ports))
	for i, p := range ports {
		out[i] = append(Shape(nil), p.shape...)
	}
	return out
}

// WeightCount is the number of float32 parameters the model holds.
func (m *Model) WeightCount() int { return m.weightCount }

// SelfTests is how many embedded tests passed at load (0 when the file has
// none or they were skipped).
func (m *Model) SelfTests() int { return m.selfTests }

// Release returns the weights' memory to the operating system. Any Predict
// still running on the model, or started later, reads unmapped memory and
// crashes the process (where weights are mapped; see the package doc).
// Release is idempotent and reports whether this call released the model.
func (m *Model) Release() bool { return m.arena.release() }

// Released reports whether Release was called.
func (m *Model) Released() bool { return m.arena.isReleased() }

// WeightsUnmapOnRelease reports whether Release really unmaps weights on
// this platform (true on Linux and macOS).
func WeightsUnmapOnRelease() bool { return weightsAreMapped }

func (m *Model) String() string {
	return fmt.Sprintf("%s (inputs %v, outputs %v, %d weights)", m.name, m.InputShapes(), m.OutputShapes(), m.weightCount)
}

// Predict runs the model on one sample (one slice per input, each holding
// the input's shape in row-major order) and returns freshly allocated
// outputs.
func (m *Model) Predict(inputs ...[]float32) ([][]float32, error) {
	outs := make([][]float32, len(m.outputs))
	for i, p := range m.outputs {
		outs[i] = make([]float32, p.n)
	}
	if err := m.PredictInto(outs, inputs...); err != nil {
		return nil, err
	}
	return outs, nil
}

// PredictInto runs the model and writes into outputs, which must have one
// slice of the right length per model output. It does not allocate.
func (m *Model) PredictInto(outputs [][]float32, inputs ...[]float32) error {
	if len(inputs) != len(m.inputs) {
		return fmt.Errorf("model %q takes %d inputs, %d given", m.name, len(m.inputs), len(inputs))
	}
	if len(outputs) != len(m.outputs) {
		return fmt.Errorf("model %q has %d outputs, %d slices given", m.name, len(m.outputs), len(outputs))
	}
	for i, p := range m.inputs {
		if len(inputs[i]) != p.n {
			return fmt.Errorf("model %q input %d (%s) needs %d values for shape %v, %d given", m.name, i, p.name, p.n, p.shape, len(inputs[i]))
		}
	}
	for i, p := range m.outputs {
		if len(outputs[i]) != p.n {
			return fmt.Errorf("model %q output %d needs %d values for shape %v, slice has %d", m.name, i, p.n, p.shape, len(outputs[i]))
		}
	}
	bufp := m.pool.Get().(*[]float32)
	buf := *bufp
	for i, p := range m.inputs {
		copy(p.of(buf), inputs[i])
	}
	for _, o := range m.ops {
		if err := o.run(buf); err != nil {
			m.pool.Put(bufp)
			runtime.KeepAlive(m)
			return fmt.Errorf("model %q: %w", m.name, err)
		}
	}
	for i, p := range m.outputs {
		copy(outputs[i], p.of(buf))
	}
	m.pool.Put(bufp)
	// The ops read weights through slices the collector does not track;
	// keep the model (and so its arena's cleanup) alive until here.
	runtime.KeepAlive(m)
	return nil
}
