package fdeep

import (
	"fmt"
	"math"
)

// span is a tensor's place in the scratch buffer.
type span struct{ off, n int }

func (s span) of(buf []float32) []float32 { return buf[s.off : s.off+s.n : s.off+s.n] }

// op is one layer call, compiled to read and write spans of the scratch
// buffer. Weights are fields of the op and point into the model's arena.
type op interface {
	run(buf []float32) error
}

// denseOp is y = x·W + b per time step, W row-major [in][units].
type denseOp struct {
	in, out      span
	steps        int
	inDim, units int
	w, b         []float32
	act          activation
	// skipZeros lets rows of W be skipped for zero inputs (common after a
	// ReLU). Only safe when every weight is finite, since 0·Inf is NaN.
	skipZeros bool
}

func (d *denseOp) run(buf []float32) error {
	x, y := d.in.of(buf), d.out.of(buf)
	for t := 0; t < d.steps; t++ {
		xt := x[t*d.inDim : (t+1)*d.inDim]
		yt := y[t*d.units : (t+1)*d.units]
		if d.b != nil {
			copy(yt, d.b)
		} else {
			clear(yt)
		}
		for i, xi := range xt {
			if xi == 0 && d.skipZeros {
				continue
			}
			axpy(yt, d.w[i*d.units:(i+1)*d.units], xi)
		}
		d.act.apply(yt, d.units)
	}
	return nil
}

// axpy adds a·x to y; len(x) >= len(y).
func axpy(y, x []float32, a float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y4 := y[i : i+4 : i+4]
		x4 := x[i : i+4 : i+4]
		y4[0] += a * x4[0]
		y4[1] += a * x4[1]
		y4[2] += a * x4[2]
		y4[3] += a * x4[3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// reluOp is Keras' ReLU layer: max_value cap, negative_slope, threshold.
type reluOp struct {
	in, out                       span
	maxValue, negSlope, threshold float32
}

func (r *reluOp) run(buf []float32) error {
	x, y := r.in.of(buf), r.out.of(buf)
	for i, v := range x {
		switch {
		case v >= r.maxValue:
			y[i] = r.maxValue
		case v >= r.threshold:
			y[i] = v
		default:
			y[i] = r.negSlope * (v - r.threshold)
		}
	}
	return nil
}

// activationOp is the Activation layer.
type activationOp struct {
	in, out span
	act     activation
	lastDim int
}

func (a *activationOp) run(buf []float32) error {
	y := a.out.of(buf)
	copy(y, a.in.of(buf))
	a.act.apply(y, a.lastDim)
	return nil
}

// mergeKind selects the element-wise combination of a merge layer.
type mergeKind uint8

const (
	mergeAdd mergeKind = iota
	mergeSubtract
	mergeMultiply
	mergeAverage
	mergeMaximum
	mergeMinimum
)

// mergeOp combines equally shaped inputs element by element.
type mergeOp struct {
	ins  []span
	out  span
	kind mergeKind
}

func (m *mergeOp) run(buf []float32) error {
	y := m.out.of(buf)
	copy(y, m.ins[0].of(buf))
	for _, s := range m.ins[1:] {
		x := s.of(buf)[:len(y)]
		switch m.kind {
		case mergeAdd, mergeAverage:
			for i := range y {
				y[i] += x[i]
			}
		case mergeSubtract:
			for i := range y {
				y[i] -= x[i]
			}
		case mergeMultiply:
			for i := range y {
				y[i] *= x[i]
			}
		case mergeMaximum:
			for i := range y {
				y[i] = max(y[i], x[i])
			}
		case mergeMinimum:
			for i := range y {
				y[i] = min(y[i], x[i])
			}
		}
	}
	if m.kind == mergeAverage {
		scale := 1 / float32(len(m.ins))
		for i := range y {
			y[i] *= scale
		}
	}
	return nil
}

// embeddingOp maps each (float) token to a row of the embedding matrix.
type embeddingOp struct {
	layer    string
	in, out  span
	inputDim int
	dim      int
	w        []float32
}

func (e *embeddingOp) run(buf []float32) error {
	tokens, y := e.in.of(buf), e.out.of(buf)
	for i, tok := range tokens {
		// The negated form also rejects NaN.
		if !(tok >= 0 && tok < float32(e.inputDim)) {
			return fmt.Errorf("layer %s: token %g is outside the vocabulary [0, %d)", e.layer, tok, e.inputDim)
		}
		row := int(tok) // truncation, as fdeep's integer cast does
		copy(y[i*e.dim:(i+1)*e.dim], e.w[row*e.dim:(row+1)*e.dim])
	}
	return nil
}

// lstmOp is a Keras LSTM (gate order i, f, c, o) over a [T][F] input.
type lstmOp struct {
	in          span
	h0, c0      span // n == 0: start from zeros
	seq         span // [T][u] with return_sequences, else [u]
	h, c        span // running state; also the layer's 2nd and 3rd outputs
	z           span // 4u gate pre-activations
	steps       int
	inDim       int
	units       int
	w, u, b     []float32
	act, recAct activation
	returnSeq   bool
	backwards   bool
}

func (l *lstmOp) run(buf []float32) error {
	x := l.in.of(buf)
	h, c, z := l.h.of(buf), l.c.of(buf), l.z.of(buf)
	if l.h0.n > 0 {
		copy(h, l.h0.of(buf))
		copy(c, l.c0.of(buf))
	} else {
		clear(h)
		clear(c)
	}
	u4 := 4 * l.units
	seq := l.seq.of(buf)
	for step := 0; step < l.steps; step++ {
		t := step
		if l.backwards {
			t = l.steps - 1 - step
		}
		if l.b != nil {
			copy(z, l.b)
		} else {
			clear(z)
		}
		for i, xi := range x[t*l.inDim : (t+1)*l.inDim] {
			axpy(z, l.w[i*u4:(i+1)*u4], xi)
		}
		for i, hi := range h {
			axpy(z, l.u[i*u4:(i+1)*u4], hi)
		}
		n := l.units
		for j := 0; j < n; j++ {
			in := l.recAct.scalar(z[j])
			forget := l.recAct.scalar(z[n+j])
			cand := l.act.scalar(z[2*n+j])
			out := l.recAct.scalar(z[3*n+j])
			c[j] = forget*c[j] + in*cand
			h[j] = out * l.act.scalar(c[j])
		}
		if l.returnSeq {
			copy(seq[step*n:(step+1)*n], h)
		}
	}
	if !l.returnSeq {
		copy(seq, h)
	}
	return nil
}

// concatOp joins inputs along one axis.
type concatOp struct {
	ins    []span
	chunks []int // per input: elements per outer index
	outer  int
	out    span
}

func (c *concatOp) run(buf []float32) error {
	y := c.out.of(buf)
	pos := 0
	for o := 0; o < c.outer; o++ {
		for k, s := range c.ins {
			n := c.chunks[k]
			copy(y[pos:pos+n], buf[s.off+o*n:s.off+(o+1)*n])
			pos += n
		}
	}
	return nil
}

// copyOp moves a tensor unchanged (Reshape, Flatten, Dropout).
type copyOp struct{ in, out span }

func (c *copyOp) run(buf []float32) error {
	copy(c.out.of(buf), c.in.of(buf))
	return nil
}

// repeatOp is RepeatVector: [F] -> [n][F].
type repeatOp struct {
	in, out span
	times   int
}

func (r *repeatOp) run(buf []float32) error {
	x, y := r.in.of(buf), r.out.of(buf)
	for k := 0; k < r.times; k++ {
		copy(y[k*len(x):(k+1)*len(x)], x)
	}
	return nil
}

// allFinite reports whether no value is NaN or infinite.
func allFinite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}
