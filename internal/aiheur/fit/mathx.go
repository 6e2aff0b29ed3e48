package fit

import "math"

// The fitter's arithmetic must give the same bits everywhere. Go may fuse
// a*b+c into one FMA on some platforms unless the product is converted
// explicitly, and the math package's Exp is assembly on some; these
// helpers avoid both.

// mul is a*b rounded to float64 on its own, so it is never fused.
func mul(a, b float64) float64 { return float64(a * b) }

// dot is the sum of a[i]*b[i] in increasing i, each product rounded.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	s := 0.0
	for i, x := range a {
		s += mul(x, b[i])
	}
	return s
}

const (
	ln2Hi = 6.93147180369123816490e-01 // high bits of ln 2
	ln2Lo = 1.90821492927058770002e-10 // the rest
	log2e = 1.44269504088896338700e+00
)

// exp is e**x for x <= 0 (softmax shifts its inputs so), to within a few
// ulps, from operations that round the same way on every platform: x is
// reduced to r = x - k*ln2 with |r| <= ln2/2, e**r comes from its Taylor
// series (13 terms are past float64 precision there), and 2**k is built
// from its bits.
func exp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 0:
		panic("fit: exp is only defined here for x <= 0")
	case x < -745:
		return 0
	}
	k := math.Floor(mul(x, log2e) + 0.5)
	r := (x - mul(k, ln2Hi)) - mul(k, ln2Lo)
	term, sum := 1.0, 1.0
	for n := 1; n <= 13; n++ {
		term = mul(term, r) / float64(n)
		sum += term
	}
	ki := int(k)
	if ki < -1022 {
		// Subnormal scale: apply it in two steps, each a power of two.
		sum = mul(sum, math.Float64frombits(uint64(1023-1022)<<52))
		ki += 1022
		if ki < -1022 {
			return 0
		}
	}
	return mul(sum, math.Float64frombits(uint64(ki+1023)<<52))
}
