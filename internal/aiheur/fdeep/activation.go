package fdeep

import (
	"fmt"
	"math"
)

// activation is a Keras activation function applied in place.
type activation uint8

const (
	actLinear activation = iota
	actReLU
	actSigmoid
	actHardSigmoid
	actTanh
	actSoftmax
	actSoftplus
	actSoftsign
	actELU
	actSELU
	actSwish
	actExponential
)

var activationNames = map[string]activation{
	"linear":       actLinear,
	"":             actLinear,
	"relu":         actReLU,
	"sigmoid":      actSigmoid,
	"hard_sigmoid": actHardSigmoid,
	"tanh":         actTanh,
	"softmax":      actSoftmax,
	"softplus":     actSoftplus,
	"softsign":     actSoftsign,
	"elu":          actELU,
	"selu":         actSELU,
	"swish":        actSwish,
	"silu":         actSwish,
	"exponential":  actExponential,
}

func parseActivation(name string) (activation, error) {
	a, ok := activationNames[name]
	if !ok {
		return 0, fmt.Errorf("unsupported activation %q", name)
	}
	return a, nil
}

// SELU constants as Keras defines them.
const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

// scalar applies an element-wise activation to one value; softmax is not
// element-wise and is handled by apply.
func (a activation) scalar(v float32) float32 {
	x := float64(v)
	switch a {
	case actReLU:
		if v > 0 {
			return v
		}
		if v <= 0 {
			return 0
		}
		return v // NaN stays NaN
	case actSigmoid:
		return float32(sigmoid(x))
	case actHardSigmoid:
		return float32(math.Max(0, math.Min(1, 0.2*x+0.5)))
	case actTanh:
		return float32(math.Tanh(x))
	case actSoftplus:
		if x > 30 { // exp would dominate; avoid overflow
			return v
		}
		return float32(math.Log1p(math.Exp(x)))
	case actSoftsign:
		return float32(x / (1 + math.Abs(x)))
	case actELU:
		if x > 0 {
			return v
		}
		return float32(math.Expm1(x))
	case actSELU:
		if x > 0 {
			return float32(seluScale * x)
		}
		return float32(seluScale * seluAlpha * math.Expm1(x))
	case actSwish:
		return float32(x * sigmoid(x))
	case actExponential:
		return float32(math.Exp(x))
	}
	return v
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// apply runs the activation over v in place; lastDim is the size of the
// tensor's last axis, over which softmax normalises.
func (a activation) apply(v []float32, lastDim int) {
	switch a {
	case actLinear:
		return
	case actSoftmax:
		for start := 0; start+lastDim <= len(v) && lastDim > 0; start += lastDim {
			softmax(v[start : start+lastDim])
		}
		return
	}
	for i, x := range v {
		v[i] = a.scalar(x)
	}
}

func softmax(v []float32) {
	peak := math.Inf(-1)
	for _, x := range v {
		peak = math.Max(peak, float64(x))
	}
	var sum float64
	for _, x := range v {
		sum += math.Exp(float64(x) - peak)
	}
	for i, x := range v {
		v[i] = float32(math.Exp(float64(x)-peak) / sum)
	}
}
