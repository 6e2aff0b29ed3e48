package conv

import (
	"fmt"
	"math"
)

// Reference computes y = conv(x, w) on the CPU as the oracle that every
// solver is checked against. Products of fp32 values are exact in float64
// and the sums are kept in float64, so the only rounding that matters is the
// final conversion to fp32. Work is split over the (n, k) output planes
// across all cores. It returns nil when p is invalid or x or w is shorter
// than p needs.
func Reference(p Problem, x, w []float32) []float32 {
	if p.Validate() != nil || len(x) < p.InputElements() || len(w) < p.WeightElements() {
		return nil
	}
	ho, wo := p.OutH(), p.OutW()
	cg, kg := p.C/p.Groups, p.K/p.Groups
	plane := ho * wo
	y := make([]float32, p.OutputElements())
	minPlanes := max(1, (1<<16)/max(1, plane*cg*p.R*p.S)) // keep tiny problems on one goroutine
	parallelRange(p.N*p.K, minPlanes, func(lo, hi int) {
		acc := make([]float64, plane)
		for nk := lo; nk < hi; nk++ {
			n, k := nk/p.K, nk%p.K
			g := k / kg
			clear(acc)
			for c := 0; c < cg; c++ {
				xc := x[(n*p.C+g*cg+c)*p.H*p.W:][:p.H*p.W]
				wc := w[(k*cg+c)*p.R*p.S:][:p.R*p.S]
				for r := 0; r < p.R; r++ {
					ohLo, ohHi := validRange(ho, r*p.DilH-p.PadH, p.StrideH, p.H)
					for s := 0; s < p.S; s++ {
						wv := float64(wc[r*p.S+s])
						owLo, owHi := validRange(wo, s*p.DilW-p.PadW, p.StrideW, p.W)
						if owLo >= owHi {
							continue
						}
						for oh := ohLo; oh < ohHi; oh++ {
							ih := oh*p.StrideH - p.PadH + r*p.DilH
							xrow := xc[ih*p.W:][:p.W]
							arow := acc[oh*wo:][:wo]
							iw := owLo*p.StrideW - p.PadW + s*p.DilW
							for ow := owLo; ow < owHi; ow++ {
								arow[ow] += wv * float64(xrow[iw])
								iw += p.StrideW
							}
						}
					}
				}
			}
			out := y[nk*plane:][:plane]
			for i, v := range acc {
				out[i] = float32(v)
			}
		}
	})
	return y
}

// validRange returns [lo, hi): the i in [0, n) with 0 <= start+i*stride < limit.
func validRange(n, start, stride, limit int) (int, int) {
	lo := 0
	if start < 0 {
		lo = (-start + stride - 1) / stride
	}
	hi := 0
	if limit > start {
		hi = min(n, (limit-start+stride-1)/stride)
	}
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// Tolerance of Check: an element passes when
//
//	|got - want| <= ATol + RTol*|want|,  ATol = ATolPerSqrtTerm * sqrt(C/G*R*S).
//
// The absolute part grows with the square root of the number of summed
// products, as the rounding error of an fp32 dot product of random data does.
const (
	RTol            = 1e-4
	ATolPerSqrtTerm = 1e-5
)

// DriverRMSTolerance is MIOpenDriver's FP32 verification threshold for its
// normalised RMS error (ten times this for implicit-GEMM algorithms).
const DriverRMSTolerance = 1.5e-6

// Index4 names one element of an NCHW tensor.
type Index4 struct{ N, K, H, W int }

func (i Index4) String() string { return fmt.Sprintf("(n=%d, k=%d, h=%d, w=%d)", i.N, i.K, i.H, i.W) }

// CheckResult is the outcome of comparing a solver's output with the reference.
type CheckResult struct {
	OK        bool
	Elements  int     // elements compared
	Bad       int     // elements outside the tolerance (NaN and Inf included)
	NonFinite int     // NaN or Inf values in got
	MaxAbs    float64 // largest |got - want|
	RTol      float64
	ATol      float64
	// Worst is the element with the largest |got-want| / (ATol + RTol*|want|)
	// (a non-finite value counts as worst); WorstGot/WorstWant are its values.
	Worst     Index4
	WorstFlat int // flat index of Worst, -1 when nothing was compared
	WorstGot  float64
	WorstWant float64
	// RMS is MIOpenDriver's error: sqrt(sum (got-want)^2) / (sqrt(n) * max|.|),
	// with max|.| the largest magnitude in either tensor.
	RMS float64
	// Note explains a comparison that could not be made (length mismatch).
	Note string
}

// Check compares got with want (the reference) element by element with the
// tolerance |got-want| <= ATol + RTol*|want|, RTol = 1e-4 and
// ATol = 1e-5*sqrt(C/G*R*S), and computes MIOpenDriver's RMS error.
func Check(p Problem, got, want []float32) CheckResult {
	terms := 1
	if p.Groups > 0 {
		terms = max(1, p.C/p.Groups*p.R*p.S)
	}
	res := CheckResult{RTol: RTol, ATol: ATolPerSqrtTerm * math.Sqrt(float64(terms)), WorstFlat: -1}
	if len(got) != len(want) {
		res.Note = fmt.Sprintf("length mismatch: got %d elements, want %d", len(got), len(want))
		return res
	}
	if n := p.OutputElements(); p.Validate() == nil && n != len(want) {
		res.Note = fmt.Sprintf("length mismatch: problem has %d output elements, got %d", n, len(want))
		return res
	}
	return checkElements(p, res, got, want, func(i int) int { return i })
}

// CheckSampled is Check on a sample of the output: got and want hold the
// elements at the flat output indices in flat (want from ReferenceAt), for
// problems whose full CPU reference would take too long.
func CheckSampled(p Problem, got, want []float32, flat []int) CheckResult {
	terms := 1
	if p.Groups > 0 {
		terms = max(1, p.C/p.Groups*p.R*p.S)
	}
	res := CheckResult{RTol: RTol, ATol: ATolPerSqrtTerm * math.Sqrt(float64(terms)), WorstFlat: -1}
	if len(got) != len(want) || len(got) != len(flat) {
		res.Note = fmt.Sprintf("length mismatch: got %d, want %d, indices %d", len(got), len(want), len(flat))
		return res
	}
	res.Note = fmt.Sprintf("sampled %d of %d output elements", len(flat), p.OutputElements())
	return checkElements(p, res, got, want, func(i int) int { return flat[i] })
}

func checkElements(p Problem, res CheckResult, got, want []float32, flatOf func(int) int) CheckResult {
	res.Elements = len(got)
	var sumSq, mag float64
	worstRatio := -1.0
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		ratio := math.Inf(1)
		if math.IsNaN(g) || math.IsInf(g, 0) {
			res.NonFinite++
			res.Bad++
		} else {
			d := math.Abs(g - w)
			sumSq += d * d
			res.MaxAbs = max(res.MaxAbs, d)
			mag = max(mag, math.Abs(g))
			ratio = d / (res.ATol + res.RTol*math.Abs(w))
			if ratio > 1 {
				res.Bad++
			}
		}
		mag = max(mag, math.Abs(w))
		if ratio > worstRatio {
			worstRatio, res.WorstFlat, res.WorstGot, res.WorstWant = ratio, flatOf(i), g, w
		}
	}
	if res.NonFinite > 0 {
		res.RMS = math.Inf(1)
	} else if res.Elements > 0 {
		res.RMS = math.Sqrt(sumSq) / (math.Sqrt(float64(res.Elements)) * max(mag, math.SmallestNonzeroFloat64))
	}
	if res.WorstFlat >= 0 {
		res.Worst = p.outputIndex(res.WorstFlat)
	}
	res.OK = res.Bad == 0
	return res
}

// ReferenceAt computes only the output elements at the given flat indices,
// in float64 like Reference, spread over every core.
func ReferenceAt(p Problem, x, w []float32, flat []int) []float32 {
	if p.Validate() != nil || len(x) < p.InputElements() || len(w) < p.WeightElements() {
		return nil
	}
	cg, kg := p.C/p.Groups, p.K/p.Groups
	out := make([]float32, len(flat))
	parallelRange(len(flat), 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ix := p.outputIndex(flat[i])
			g := ix.K / kg
			var acc float64
			for c := 0; c < cg; c++ {
				xc := x[(ix.N*p.C+g*cg+c)*p.H*p.W:][:p.H*p.W]
				wc := w[(ix.K*cg+c)*p.R*p.S:][:p.R*p.S]
				for r := 0; r < p.R; r++ {
					ih := ix.H*p.StrideH - p.PadH + r*p.DilH
					if ih < 0 || ih >= p.H {
						continue
					}
					for s := 0; s < p.S; s++ {
						iw := ix.W*p.StrideW - p.PadW + s*p.DilW
						if iw < 0 || iw >= p.W {
							continue
						}
						acc += float64(wc[r*p.S+s]) * float64(xc[ih*p.W+iw])
					}
				}
			}
			out[i] = float32(acc)
		}
	})
	return out
}

// outputIndex turns a flat index of y into (n, k, h, w).
func (p Problem) outputIndex(flat int) Index4 {
	ho, wo := p.OutH(), p.OutW()
	if p.K < 1 || ho < 1 || wo < 1 {
		return Index4{}
	}
	return Index4{N: flat / (p.K * ho * wo), K: flat / (ho * wo) % p.K, H: flat / wo % ho, W: flat % wo}
}

// String is one line: the verdict, the tolerance formula with its values,
// the worst element, and the RMS error.
func (r CheckResult) String() string {
	if r.Note != "" {
		return "verification FAILED: " + r.Note
	}
	tol := fmt.Sprintf("|got-want| <= atol + rtol*|want| (rtol %.0e, atol = 1e-5*sqrt(C/G*R*S) = %.3g)", r.RTol, r.ATol)
	if r.OK {
		return fmt.Sprintf("verifies OK: %d elements within %s; max |diff| %.3g; RMS %.3g", r.Elements, tol, r.MaxAbs, r.RMS)
	}
	s := fmt.Sprintf("verification FAILED: %d of %d elements outside %s; worst y%s got %g want %g",
		r.Bad, r.Elements, tol, r.Worst, r.WorstGot, r.WorstWant)
	if r.NonFinite > 0 {
		s += fmt.Sprintf("; %d NaN/Inf values", r.NonFinite)
	}
	return s + fmt.Sprintf("; RMS %.3g", r.RMS)
}
