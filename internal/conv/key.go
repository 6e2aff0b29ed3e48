package conv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Direction is a convolution direction as MIOpen's find-db key spells it.
type Direction string

// The three directions.
const (
	Forward         Direction = "F"
	BackwardData    Direction = "B"
	BackwardWeights Direction = "W"
)

func (d Direction) valid() bool {
	return d == Forward || d == BackwardData || d == BackwardWeights
}

// Key is MIOpen's find-db key of p (forward, FP32, NCHW), e.g.
// "3-32-32-3x3-64-32-32-1-1x1-1x1-1x1-0-NCHW-FP32-F", with "_g<G>" appended
// when Groups != 1.
func (p Problem) Key() string { return FormatKey(p, Forward, "FP32", "NCHW") }

// FormatKey is MIOpen's find-db key (ProblemDescription::Serialize) of the
// 2D problem p in direction dir, where p is always given in forward
// convention (x has C channels, y has K). dtype is one token ("FP32") or the
// three concatenated types; layout is "NCHW" or three tokens joined by '-'
// ("NHWC-NHWC-NHWC"). For B and W MIOpen's "in" tensor is dy, so those keys
// start with K and the output dims; FormatKey does that swap.
func FormatKey(p Problem, dir Direction, dtype, layout string) string {
	inC, inH, inW, outC, outH, outW := p.C, p.H, p.W, p.K, p.OutH(), p.OutW()
	if dir == BackwardData || dir == BackwardWeights {
		inC, inH, inW, outC, outH, outW = outC, outH, outW, inC, inH, inW
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d-%d-%d-%dx%d-%d-%d-%d-%d-%dx%d-%dx%d-%dx%d-0-%s-%s-%s",
		inC, inH, inW, p.R, p.S, outC, outH, outW, p.N,
		p.PadH, p.PadW, p.StrideH, p.StrideW, p.DilH, p.DilW, layout, dtype, dir)
	if p.Groups != 1 {
		fmt.Fprintf(&b, "_g%d", p.Groups)
	}
	return b.String()
}

// NetworkConfig is MIOpen's 'x'-separated network config string of p
// (forward, FP32, NCHW, alpha 1, beta 0), the key invokers are cached under:
// C x H x W x R x S x K x OutH x OutW x N x NCHW x FP32 x pads x strides x
// dilations x G x F x Default.
func (p Problem) NetworkConfig() string {
	return fmt.Sprintf("%dx%dx%dx%dx%dx%dx%dx%dx%dxNCHWxFP32x%dx%dx%dx%dx%dx%dx%dxFxDefault",
		p.C, p.H, p.W, p.R, p.S, p.K, p.OutH(), p.OutW(), p.N,
		p.PadH, p.PadW, p.StrideH, p.StrideW, p.DilH, p.DilW, p.Groups)
}

// ParseKey reads a 2D find-db key written by MIOpen (or FormatKey) and
// returns the problem in forward convention, the direction, the data-type
// token and the layout ("NCHW", or three layouts joined by '-'). It accepts
// any direction, data type and layout, and the "_g<G>" suffix; it rejects 3D
// keys, a bias flag other than 0, cast-type suffixes, output sizes that do
// not follow from the other fields, and invalid problems. For every key it
// accepts, FormatKey(ParseKey(key)) == key.
func ParseKey(key string) (Problem, Direction, string, string, error) {
	fail := func(err error) (Problem, Direction, string, string, error) {
		return Problem{}, "", "", "", fmt.Errorf("find-db key %q: %w", key, err)
	}
	body, groups, err := keyGroups(key)
	if err != nil {
		return fail(err)
	}
	f, layout, dtype, dir, err := keyFields(body)
	if err != nil {
		return fail(err)
	}
	p, outH, outW, err := keyProblem(f, dir, groups)
	if err != nil {
		return fail(err)
	}
	if p.OutH() != outH || p.OutW() != outW {
		return fail(fmt.Errorf("output %dx%d does not follow from the input, filter, padding, stride and dilation (they give %dx%d)",
			outH, outW, p.OutH(), p.OutW()))
	}
	return p, dir, dtype, layout, nil
}

// keyGroups splits a key's "_g<G>" suffix off: the body and the group
// count (1 without a suffix).
func keyGroups(key string) (string, int, error) {
	i := strings.IndexByte(key, '_')
	if i < 0 {
		return key, 1, nil
	}
	suffix := key[i+1:]
	if !strings.HasPrefix(suffix, "g") {
		return "", 0, fmt.Errorf("unsupported suffix %q (only _g<groups> is understood)", "_"+suffix)
	}
	g, err := strconv.Atoi(suffix[1:])
	if err != nil || g < 2 || strconv.Itoa(g) != suffix[1:] {
		return "", 0, fmt.Errorf("group suffix %q is not _g followed by a count >= 2", "_"+suffix)
	}
	return key[:i], g, nil
}

// keyFields splits a key's body into its fields and reads its layout,
// data type and direction.
func keyFields(body string) (f []string, layout, dtype string, dir Direction, err error) {
	f = strings.Split(body, "-")
	if len(f) >= 4 && !strings.Contains(f[3], "x") {
		return nil, "", "", "", errors.New("3-D problem keys are not supported")
	}
	switch len(f) {
	case 15:
		layout = f[12]
	case 17:
		layout = strings.Join(f[12:15], "-")
	default:
		return nil, "", "", "", fmt.Errorf("has %d '-'-separated fields, want 15 (one layout) or 17 (three layouts)", len(f))
	}
	dtype, dir = f[len(f)-2], Direction(f[len(f)-1])
	if !dir.valid() {
		return nil, "", "", "", fmt.Errorf("direction %q is not F, B or W", string(dir))
	}
	for _, tok := range append(strings.Split(layout, "-"), dtype) {
		if !isUpperAlnum(tok) {
			return nil, "", "", "", fmt.Errorf("layout/data-type token %q is not upper-case letters and digits", tok)
		}
	}
	return f, layout, dtype, dir, nil
}

// keyNum reads field i of f, a non-negative integer written as Itoa writes
// it.
func keyNum(f []string, i int, name string) (int, error) {
	n, err := strconv.Atoi(f[i])
	if err != nil || strconv.Itoa(n) != f[i] || n < 0 {
		return 0, fmt.Errorf("field %d (%s) %q is not a non-negative integer", i+1, name, f[i])
	}
	return n, nil
}

// keyPair reads field i of f, "<h>x<w>".
func keyPair(f []string, i int, name string) (int, int, error) {
	a, b, ok := strings.Cut(f[i], "x")
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if !ok || errA != nil || errB != nil || x < 0 || y < 0 || strconv.Itoa(x) != a || strconv.Itoa(y) != b {
		return 0, 0, fmt.Errorf("field %d (%s) %q is not <h>x<w>", i+1, name, f[i])
	}
	return x, y, nil
}

// keyProblem reads the problem of a key's fields, in forward convention,
// and the output size the key states.
func keyProblem(f []string, dir Direction, groups int) (p Problem, outH, outW int, err error) {
	var inC, inH, inW, outC, n, bias int
	steps := []func() error{
		func() (e error) { inC, e = keyNum(f, 0, "in channels"); return },
		func() (e error) { inH, e = keyNum(f, 1, "in height"); return },
		func() (e error) { inW, e = keyNum(f, 2, "in width"); return },
		func() (e error) { p.R, p.S, e = keyPair(f, 3, "filter"); return },
		func() (e error) { outC, e = keyNum(f, 4, "out channels"); return },
		func() (e error) { outH, e = keyNum(f, 5, "out height"); return },
		func() (e error) { outW, e = keyNum(f, 6, "out width"); return },
		func() (e error) { n, e = keyNum(f, 7, "batch"); return },
		func() (e error) { p.PadH, p.PadW, e = keyPair(f, 8, "padding"); return },
		func() (e error) { p.StrideH, p.StrideW, e = keyPair(f, 9, "stride"); return },
		func() (e error) { p.DilH, p.DilW, e = keyPair(f, 10, "dilation"); return },
		func() (e error) { bias, e = keyNum(f, 11, "bias"); return },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return Problem{}, 0, 0, err
		}
	}
	if bias != 0 {
		return Problem{}, 0, 0, fmt.Errorf("bias flag %d is not supported (only 0)", bias)
	}
	// MIOpen's "in" is dy for B and W: undo the swap to get forward convention.
	if dir == BackwardData || dir == BackwardWeights {
		inC, inH, inW, outC, outH, outW = outC, outH, outW, inC, inH, inW
	}
	p.N, p.C, p.H, p.W, p.K, p.Groups = n, inC, inH, inW, outC, groups
	if err := p.Validate(); err != nil {
		return Problem{}, 0, 0, err
	}
	return p, outH, outW, nil
}

func isUpperAlnum(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
