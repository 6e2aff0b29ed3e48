package aiheur

import (
	"fmt"
	"strings"
)

// Direction is a convolution direction, with MIOpen's letters.
type Direction byte

// The three directions.
const (
	Forward         Direction = 'F'
	BackwardData    Direction = 'B'
	BackwardWeights Direction = 'W'
)

func (d Direction) String() string {
	switch d {
	case Forward, BackwardData, BackwardWeights:
		return string(rune(d))
	}
	return fmt.Sprintf("Direction(%d)", byte(d))
}

// ParseDirection accepts F/B/W, fwd/bwd/wrw and forward/backward-data/
// backward-weights (any case).
func ParseDirection(s string) (Direction, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f", "fwd", "forward":
		return Forward, nil
	case "b", "bwd", "backward-data", "backward_data", "backwarddata":
		return BackwardData, nil
	case "w", "wrw", "backward-weights", "backward_weights", "backwardweights":
		return BackwardWeights, nil
	}
	return 0, fmt.Errorf("unknown convolution direction %q (want F, B or W)", s)
}

// ktnName is the direction key of a KTN metadata file.
func (d Direction) ktnName() string {
	switch d {
	case Forward:
		return "fwd"
	case BackwardData:
		return "bwd"
	case BackwardWeights:
		return "wrw"
	}
	return ""
}

// Problem is a 2D convolution as the heuristics see it, always in forward
// convention whatever the direction: x is N×C×H×W, the filter K×(C/G)×R×S,
// y is N×K×OutH×OutW. (MIOpen's ProblemDescription swaps its in/out tensors
// for backward directions; the features below undo or reproduce that swap
// exactly where MIOpen does.)
type Problem struct {
	N, C, H, W           int // batch and the input image x
	K, R, S              int // output channels, filter height and width
	PadH, PadW           int
	StrideH, StrideW     int
	DilationH, DilationW int
	Groups               int
	Direction            Direction
	DataType             string // "FP32", "FP16" or "BF16" (others are not encoded)
	Layout               string // "NCHW" (the only 2D layout the models know)
	Bias                 bool
}

// OutH is the output height.
func (p Problem) OutH() int { return outSize(p.H, p.R, p.PadH, p.StrideH, p.DilationH) }

// OutW is the output width.
func (p Problem) OutW() int { return outSize(p.W, p.S, p.PadW, p.StrideW, p.DilationW) }

func outSize(in, filter, pad, stride, dilation int) int {
	if stride < 1 {
		return 0
	}
	return (in+2*pad-dilation*(filter-1)-1)/stride + 1
}

// Validate checks that the problem describes a real convolution.
func (p Problem) Validate() error {
	positive := []struct {
		name  string
		value int
	}{
		{"n", p.N}, {"c", p.C}, {"h", p.H}, {"w", p.W}, {"k", p.K}, {"r (filter height)", p.R}, {"s (filter width)", p.S},
		{"stride_h", p.StrideH}, {"stride_w", p.StrideW}, {"dilation_h", p.DilationH}, {"dilation_w", p.DilationW}, {"groups", p.Groups},
	}
	for _, f := range positive {
		if f.value < 1 {
			return fmt.Errorf("problem: %s must be at least 1, got %d", f.name, f.value)
		}
	}
	if p.PadH < 0 || p.PadW < 0 {
		return fmt.Errorf("problem: padding must not be negative, got %dx%d", p.PadH, p.PadW)
	}
	if p.C%p.Groups != 0 || p.K%p.Groups != 0 {
		return fmt.Errorf("problem: groups %d must divide c %d and k %d", p.Groups, p.C, p.K)
	}
	if p.OutH() < 1 || p.OutW() < 1 {
		return fmt.Errorf("problem: the filter %dx%d (dilation %dx%d) does not fit the padded %dx%d input", p.R, p.S, p.DilationH, p.DilationW, p.H, p.W)
	}
	switch p.Direction {
	case Forward, BackwardData, BackwardWeights:
	default:
		return fmt.Errorf("problem: direction %v is not F, B or W", p.Direction)
	}
	if p.DataType == "" {
		return fmt.Errorf("problem: data type is empty")
	}
	if p.Layout == "" {
		return fmt.Errorf("problem: layout is empty")
	}
	return nil
}

// dims are a tensor's channels and image.
type dims struct{ c, h, w int }

// mioIn and mioOut are MIOpen ProblemDescription's "in" and "out" tensors:
// x and y for Forward, dy and dx for BackwardData, dy and x for
// BackwardWeights. Some KTN feature vectors use these raw getters.
func (p Problem) mioIn() dims {
	if p.Direction == Forward {
		return dims{p.C, p.H, p.W}
	}
	return dims{p.K, p.OutH(), p.OutW()}
}

func (p Problem) mioOut() dims {
	if p.Direction == Forward {
		return dims{p.K, p.OutH(), p.OutW()}
	}
	return dims{p.C, p.H, p.W}
}
