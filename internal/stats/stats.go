// Package stats is the exact statistics of failure counts: the binomial
// proportion's interval (Clopper–Pearson) and its one-sided upper bound,
// the one-sided Fisher exact test of a 2×2 table, the exact power of that
// test, and how many runs per build would show a difference at the rates
// measured. Pure functions of counts: no I/O, the standard library only.
//
// Every probability is computed from log-gamma terms and ratio
// recurrences, so that nothing overflows or loses its digits for counts up
// to 10^5 and beyond, and every function runs in time bounded by its
// counts (the regularized incomplete beta function's continued fraction in
// O(√n) terms, a hypergeometric tail in O(√n) terms past its cut).
package stats

import (
	"math"
)

// Count is K events in N trials: the runs that failed among those run.
type Count struct{ K, N int }

// Valid reports whether c is a count: 0 ≤ K ≤ N.
func (c Count) Valid() bool { return c.K >= 0 && c.N >= 0 && c.K <= c.N }

// Rate is K/N, 0 for no trials.
func (c Count) Rate() float64 {
	if c.N <= 0 {
		return 0
	}
	return float64(c.K) / float64(c.N)
}

// tolerance is the relative slack with which a p-value meets a level: a
// p-value computed in floating point as 0.05000000001 where the exact
// value is 0.05 meets 0.05.
const tolerance = 1e-9

// Significant reports whether a p-value is at or below the level alpha.
// Every decision in this package and its users goes through it, so that
// the test that decides a verdict is the test whose power is computed.
func Significant(p, alpha float64) bool { return p <= alpha*(1+tolerance) }

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

// logChoose is log C(n, k), for 0 ≤ k ≤ n.
func logChoose(n, k int) float64 {
	return lgamma(float64(n)+1) - lgamma(float64(k)+1) - lgamma(float64(n-k)+1)
}

// Interval is the exact two-sided interval of the proportion K/N at the
// given confidence (0.95 for 95%): Clopper–Pearson, the bounds p at which
// seeing K or more (for the lower) or K or fewer (for the upper) has
// probability (1-confidence)/2. With no trials it is [0, 1].
func Interval(c Count, confidence float64) (lo, hi float64) {
	if c.N <= 0 {
		return 0, 1
	}
	alpha := 1 - confidence
	if c.K > 0 {
		lo = betaQuantile(alpha/2, float64(c.K), float64(c.N-c.K+1))
	}
	hi = 1
	if c.K < c.N {
		hi = betaQuantile(1-alpha/2, float64(c.K+1), float64(c.N-c.K))
	}
	return lo, hi
}

// UpperBound is the exact one-sided upper bound of the proportion at the
// given confidence: the p at which seeing K or fewer has probability
// 1-confidence. For K = 0 it is 1 - (1-confidence)^(1/N): 0 failures in
// 220 runs bound the rate below 1.35% at 95% confidence.
func UpperBound(c Count, confidence float64) float64 {
	switch {
	case c.N <= 0 || c.K >= c.N:
		return 1
	case c.K == 0:
		// The closed form, exact where the quantile search is not.
		return -math.Expm1(math.Log(1-confidence) / float64(c.N))
	}
	return betaQuantile(confidence, float64(c.K+1), float64(c.N-c.K))
}

// BinomialCDF is P(X ≤ k) for X ~ Binomial(n, p).
func BinomialCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	// P(X ≤ k) = I_{1-p}(n-k, k+1).
	return regIncBeta(float64(n-k), float64(k+1), 1-p)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), for
// a, b > 0 and 0 ≤ x ≤ 1, by its continued fraction on the side where it
// converges fast (Numerical Recipes §6.4, modified Lentz).
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	logFront := lgamma(a+b) - lgamma(a) - lgamma(b) + a*math.Log(x) + b*math.Log1p(-x)
	if x < (a+1)/(a+b+2) {
		return math.Exp(logFront) * betaFraction(a, b, x) / a
	}
	return 1 - math.Exp(logFront)*betaFraction(b, a, 1-x)/b
}

// betaFraction is the continued fraction of I_x(a, b). It converges in
// O(√max(a, b)) terms where it is used; maxTerms bounds it past any count
// this package is given.
func betaFraction(a, b, x float64) float64 {
	const (
		maxTerms = 100000
		eps      = 1e-16
	)
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1/awayFromZero(1-qab*x/qap)
	h := d
	// step takes the fraction one term further (modified Lentz): the
	// factor it multiplies h by.
	step := func(aa float64) float64 {
		d = 1 / awayFromZero(1+aa*d)
		c = awayFromZero(1 + aa/c)
		return d * c
	}
	for m := 1; m <= maxTerms; m++ {
		fm := float64(m)
		m2 := 2 * fm
		h *= step(fm * (b - fm) * x / ((qam + m2) * (a + m2)))
		del := step(-(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2)))
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// awayFromZero keeps a continued fraction's partial values off zero, where
// the next division would blow up.
func awayFromZero(v float64) float64 {
	const tiny = 1e-300
	if math.Abs(v) < tiny {
		return tiny
	}
	return v
}

// betaQuantile is the x in [0, 1] with I_x(a, b) = q, by bisection:
// I_x(a, b) grows with x, and halving the bracket until it stops shrinking
// (at most some 1100 halvings in float64, in practice about 60) is exact
// to the last bit the function's own evaluation allows.
func betaQuantile(q, a, b float64) float64 {
	switch {
	case q <= 0:
		return 0
	case q >= 1:
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 2000 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if regIncBeta(a, b, mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}
