// Package conv describes 2D forward convolutions (NCHW, fp32), names them the
// way MIOpen's find-db does, computes a trustworthy CPU reference, and
// provides the kernels and solvers that find times: one HIP/CUDA source text
// with a Go twin for every entry point, so the same solvers run on a real GPU
// and on the simulated device.
package conv

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Problem is a 2D forward convolution: x is N x C x H x W, w is
// K x (C/Groups) x R x S, y is N x K x OutH x OutW, all NCHW fp32.
// Field tags use MIOpenDriver's long flag names.
type Problem struct {
	N       int `json:"batchsize" yaml:"batchsize"`
	C       int `json:"in_channels" yaml:"in_channels"`
	H       int `json:"in_h" yaml:"in_h"`
	W       int `json:"in_w" yaml:"in_w"`
	K       int `json:"out_channels" yaml:"out_channels"`
	R       int `json:"fil_h" yaml:"fil_h"`
	S       int `json:"fil_w" yaml:"fil_w"`
	PadH    int `json:"pad_h" yaml:"pad_h"`
	PadW    int `json:"pad_w" yaml:"pad_w"`
	StrideH int `json:"conv_stride_h" yaml:"conv_stride_h"`
	StrideW int `json:"conv_stride_w" yaml:"conv_stride_w"`
	DilH    int `json:"dilation_h" yaml:"dilation_h"`
	DilW    int `json:"dilation_w" yaml:"dilation_w"`
	Groups  int `json:"group_count" yaml:"group_count"`
}

// maxElements is the largest tensor the kernels index with 32-bit ints.
const maxElements = math.MaxInt32

// maxMACs bounds the multiply-accumulate count so that Flops fits in int64.
const maxMACs = int64(1) << 62

// outSize is the output extent of one spatial dimension; it may be <= 0 for
// a filter larger than the padded input.
func outSize(in, pad, fil, stride, dil int) int {
	if stride < 1 {
		return 0
	}
	span := int64(dil)*int64(fil-1) + 1
	num := int64(in) + 2*int64(pad) - span
	if num < 0 {
		return 0
	}
	return int(num/int64(stride)) + 1
}

// OutH is the output height: (H + 2*PadH - DilH*(R-1) - 1)/StrideH + 1.
func (p Problem) OutH() int { return outSize(p.H, p.PadH, p.R, p.StrideH, p.DilH) }

// OutW is the output width: (W + 2*PadW - DilW*(S-1) - 1)/StrideW + 1.
func (p Problem) OutW() int { return outSize(p.W, p.PadW, p.S, p.StrideW, p.DilW) }

// InputElements is N*C*H*W.
func (p Problem) InputElements() int { return p.N * p.C * p.H * p.W }

// WeightElements is K*(C/Groups)*R*S.
func (p Problem) WeightElements() int { return p.K * p.groupChannels() * p.R * p.S }

// OutputElements is N*K*OutH*OutW.
func (p Problem) OutputElements() int { return p.N * p.K * p.OutH() * p.OutW() }

func (p Problem) groupChannels() int {
	if p.Groups < 1 {
		return 0
	}
	return p.C / p.Groups
}

// Flops is MIOpenDriver's forward flop count: 2*N*(C/G)*R*S*K*OutH*OutW.
func (p Problem) Flops() int64 { return 2 * p.macs() }

func (p Problem) macs() int64 {
	return int64(p.N) * int64(p.groupChannels()) * int64(p.R) * int64(p.S) *
		int64(p.K) * int64(p.OutH()) * int64(p.OutW())
}

// BytesRead is what a forward pass reads at least once: x and w, fp32.
func (p Problem) BytesRead() int64 {
	return 4 * (int64(p.InputElements()) + int64(p.WeightElements()))
}

// BytesWritten is what a forward pass writes: y, fp32.
func (p Problem) BytesWritten() int64 { return 4 * int64(p.OutputElements()) }

// Validate reports the first thing wrong with p in one line naming the field,
// e.g. "invalid problem: stride_h must be >= 1, got 0".
func (p Problem) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("invalid problem: "+format, a...)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"batchsize (N)", p.N}, {"in_channels (C)", p.C}, {"in_h (H)", p.H}, {"in_w (W)", p.W},
		{"out_channels (K)", p.K}, {"fil_h (R)", p.R}, {"fil_w (S)", p.S},
		{"stride_h", p.StrideH}, {"stride_w", p.StrideW},
		{"dilation_h", p.DilH}, {"dilation_w", p.DilW}, {"group_count", p.Groups},
	}
	for _, f := range positive {
		if f.v < 1 {
			return bad("%s must be >= 1, got %d", f.name, f.v)
		}
		if f.v > maxElements {
			return bad("%s must be <= %d, got %d", f.name, maxElements, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"pad_h", p.PadH}, {"pad_w", p.PadW}} {
		if f.v < 0 {
			return bad("%s must be >= 0, got %d", f.name, f.v)
		}
		if f.v > maxElements/4 {
			return bad("%s must be <= %d, got %d", f.name, maxElements/4, f.v)
		}
	}
	if p.C%p.Groups != 0 {
		return bad("in_channels (C=%d) must be divisible by group_count (%d)", p.C, p.Groups)
	}
	if p.K%p.Groups != 0 {
		return bad("out_channels (K=%d) must be divisible by group_count (%d)", p.K, p.Groups)
	}
	if p.OutH() < 1 {
		return bad("output height is %d: fil_h %d with dilation_h %d spans %d rows, more than in_h %d + 2*pad_h %d",
			(p.H+2*p.PadH-p.DilH*(p.R-1)-1)/p.StrideH+1, p.R, p.DilH, p.DilH*(p.R-1)+1, p.H, p.PadH)
	}
	if p.OutW() < 1 {
		return bad("output width is %d: fil_w %d with dilation_w %d spans %d columns, more than in_w %d + 2*pad_w %d",
			(p.W+2*p.PadW-p.DilW*(p.S-1)-1)/p.StrideW+1, p.S, p.DilW, p.DilW*(p.S-1)+1, p.W, p.PadW)
	}
	counts := []struct {
		name string
		dims []int
	}{
		{"input x (N*C*H*W)", []int{p.N, p.C, p.H, p.W}},
		{"weights w (K*C/G*R*S)", []int{p.K, p.C / p.Groups, p.R, p.S}},
		{"output y (N*K*OutH*OutW)", []int{p.N, p.K, p.OutH(), p.OutW()}},
	}
	for _, c := range counts {
		n, ok := product(c.dims)
		if !ok || n > maxElements {
			return bad("%s has %s elements, more than the int32 limit %d", c.name, productString(c.dims), maxElements)
		}
	}
	if m := p.macs(); m > maxMACs || m < 0 {
		return bad("%s multiply-accumulates is too many (limit 2^62)", productString([]int{p.N, p.C / p.Groups, p.R, p.S, p.K, p.OutH(), p.OutW()}))
	}
	return nil
}

// product multiplies dims, reporting false on int64 overflow.
func product(dims []int) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

func productString(dims []int) string {
	if n, ok := product(dims); ok {
		return strconv.FormatInt(n, 10)
	}
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, "*")
}

// String is the problem in MIOpenDriver flags, e.g.
// "-n 1 -c 3 -H 32 -W 32 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1".
func (p Problem) String() string {
	return fmt.Sprintf("-n %d -c %d -H %d -W %d -k %d -y %d -x %d -p %d -q %d -u %d -v %d -l %d -j %d -g %d",
		p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.PadH, p.PadW, p.StrideH, p.StrideW, p.DilH, p.DilW, p.Groups)
}

// StatsHeader is the header MIOpenDriver prints before its forward stats line.
const StatsHeader = "stats: name, n, c, ho, wo, x, y, k, flopCnt, bytesRead, bytesWritten, GFLOPs, GB/s, timeMs"

// StatsLine is MIOpenDriver's forward stats line for a kernel time of ms
// milliseconds (fp32 byte counts), e.g. "stats: fwd-conv3x3u1, 1, 3, 32, 32,
// 3, 3, 64,  3538944, 19200, 262144, 354, 28, 0.010000".
func (p Problem) StatsLine(ms float64) string {
	var gflops, gbps float64
	if ms > 0 {
		gflops = float64(p.Flops()) / ms / 1e6
		gbps = float64(p.BytesRead()+p.BytesWritten()) / ms / 1e6
	}
	return fmt.Sprintf("stats: fwd-conv%dx%du%d, %d, %d, %d, %d, %d, %d, %d,  %d, %d, %d, %.0f, %.0f, %f",
		p.R, p.S, p.StrideH, p.N, p.C, p.OutH(), p.OutW(), p.R, p.S, p.K,
		p.Flops(), p.BytesRead(), p.BytesWritten(), gflops, gbps, ms)
}

// DefaultDriverProblem is MIOpenDriver conv's problem when no flag is given.
var DefaultDriverProblem = Problem{N: 100, C: 3, H: 32, W: 32, K: 32, R: 3, S: 3,
	StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

// driverFlags maps MIOpenDriver's short and long flag names to fields.
var driverFlags = func() map[string]func(*Problem) *int {
	fields := []struct {
		short, long string
		field       func(*Problem) *int
	}{
		{"n", "batchsize", func(p *Problem) *int { return &p.N }},
		{"c", "in_channels", func(p *Problem) *int { return &p.C }},
		{"H", "in_h", func(p *Problem) *int { return &p.H }},
		{"W", "in_w", func(p *Problem) *int { return &p.W }},
		{"k", "out_channels", func(p *Problem) *int { return &p.K }},
		{"y", "fil_h", func(p *Problem) *int { return &p.R }},
		{"x", "fil_w", func(p *Problem) *int { return &p.S }},
		{"p", "pad_h", func(p *Problem) *int { return &p.PadH }},
		{"q", "pad_w", func(p *Problem) *int { return &p.PadW }},
		{"u", "conv_stride_h", func(p *Problem) *int { return &p.StrideH }},
		{"v", "conv_stride_w", func(p *Problem) *int { return &p.StrideW }},
		{"l", "dilation_h", func(p *Problem) *int { return &p.DilH }},
		{"j", "dilation_w", func(p *Problem) *int { return &p.DilW }},
		{"g", "group_count", func(p *Problem) *int { return &p.Groups }},
	}
	m := map[string]func(*Problem) *int{}
	for _, f := range fields {
		m["-"+f.short] = f.field
		m["--"+f.long] = f.field
	}
	return m
}()

// ParseDriverArgs reads a problem from MIOpenDriver conv flags, the inverse
// of String. A leading "MIOpenDriver" and "conv" are skipped; flags not given
// keep MIOpenDriver's defaults (DefaultDriverProblem). Only the geometry flags
// are accepted; "-F 1" (forward) is allowed and ignored. The result is validated.
func ParseDriverArgs(s string) (Problem, error) {
	toks := strings.Fields(s)
	if len(toks) > 0 && strings.HasSuffix(toks[0], "MIOpenDriver") {
		toks = toks[1:]
	}
	if len(toks) > 0 && toks[0] == "conv" {
		toks = toks[1:]
	}
	p := DefaultDriverProblem
	for i := 0; i < len(toks); i += 2 {
		flag, val, hasEq := strings.Cut(toks[i], "=")
		if !hasEq {
			if i+1 >= len(toks) {
				return Problem{}, fmt.Errorf("driver flag %s has no value", flag)
			}
			val = toks[i+1]
		} else {
			i-- // the value was inside this token
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			return Problem{}, fmt.Errorf("driver flag %s: value %q is not an integer", flag, val)
		}
		if flag == "-F" || flag == "--forw" {
			if n != 1 {
				return Problem{}, fmt.Errorf("driver flag %s %d: only forward (1) is supported", flag, n)
			}
			continue
		}
		field, ok := driverFlags[flag]
		if !ok {
			return Problem{}, fmt.Errorf("unknown or unsupported driver flag %q", flag)
		}
		*field(&p) = n
	}
	return p, p.Validate()
}
