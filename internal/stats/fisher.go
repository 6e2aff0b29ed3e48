package stats

import (
	"math"
)

// FisherGreater is the one-sided Fisher exact test of the 2×2 table
// whose rows are a and b: the p-value of "a's rate is greater than b's".
// Given the table's margins (a.N, b.N and the K+K total), a's count is
// hypergeometric under equal rates, and p is the probability that it is
// a.K or more. 3 of 220 against 0 of 220 gives p = 0.1241: three failures
// all falling on one side of 440 runs is that likely by chance alone.
func FisherGreater(a, b Count) float64 {
	return hypergeometricUpper(a.K, a.N, b.N, a.K+b.K)
}

// hypergeometricUpper is P(X ≥ x) for X the count drawn from n1 among
// n1+n2 items of which m are marked: X ~ Hypergeometric(n1+n2, m, n1).
func hypergeometricUpper(x, n1, n2, m int) float64 {
	lo, hi := max(0, m-n2), min(m, n1)
	switch {
	case x <= lo:
		return 1
	case x > hi:
		return 0
	}
	mode := int(float64(m+1) * float64(n1+1) / float64(n1+n2+2))
	if x <= mode {
		// The lower tail is the short side: its terms fall away from x.
		return max(0, 1-hypergeometricTail(x-1, n1, n2, m, -1))
	}
	return min(1, hypergeometricTail(x, n1, n2, m, +1))
}

// hypergeometricTail sums the probabilities of X = x, x+dir, x+2dir, ...
// to the support's end, where x lies beyond the mode on the dir side, so
// that the terms only fall: each from the one before by the pmf's ratio,
// stopping once a term no longer changes the sum.
func hypergeometricTail(x, n1, n2, m, dir int) float64 {
	lo, hi := max(0, m-n2), min(m, n1)
	logFirst := logChoose(n1, x) + logChoose(n2, m-x) - logChoose(n1+n2, m)
	term, sum := 1.0, 1.0
	for j := x; ; {
		var ratio float64
		if dir > 0 {
			if j >= hi {
				break
			}
			// P(j+1)/P(j)
			ratio = float64(n1-j) * float64(m-j) / (float64(j+1) * float64(n2-m+j+1))
		} else {
			if j <= lo {
				break
			}
			// P(j-1)/P(j)
			ratio = float64(j) * float64(n2-m+j) / (float64(n1-j+1) * float64(m-j+1))
		}
		j += dir
		term *= ratio
		sum += term
		if term < sum*1e-17 {
			break
		}
	}
	return math.Exp(logFirst + math.Log(sum))
}

// binomialRange is Binomial(n, p)'s probabilities over the range that
// holds all but a negligible part of its mass: from the mode outward, each
// term from its neighbour by the pmf's ratio, until a term is below
// cut × the mode's. It returns the first count and the probabilities.
func binomialRange(n int, p float64) (first int, probs []float64) {
	switch {
	case p <= 0:
		return 0, []float64{1}
	case p >= 1:
		return n, []float64{1}
	}
	const cut = 1e-17
	mode := min(n, int(float64(n+1)*p))
	odds := p / (1 - p)
	logMode := logChoose(n, mode) + float64(mode)*math.Log(p) + float64(n-mode)*math.Log1p(-p)
	var down []float64 // below the mode, nearest first
	for k, t := mode, 1.0; k > 0; k-- {
		t *= float64(k) / (float64(n-k+1) * odds) // P(k-1)/P(k)
		if t < cut {
			break
		}
		down = append(down, t)
	}
	up := []float64{1} // the mode, then above it
	for k, t := mode, 1.0; k < n; k++ {
		t *= float64(n-k) / float64(k+1) * odds // P(k+1)/P(k)
		if t < cut {
			break
		}
		up = append(up, t)
	}
	first = mode - len(down)
	probs = make([]float64, 0, len(down)+len(up))
	for i := len(down) - 1; i >= 0; i-- {
		probs = append(probs, down[i])
	}
	probs = append(probs, up...)
	scale := math.Exp(logMode)
	for i := range probs {
		probs[i] *= scale
	}
	return first, probs
}

// Power is the exact power of the one-sided Fisher exact test at level
// alpha with n runs per build, when build A fails at rate pa and build B
// at pb: the probability, over A's and B's binomial counts, that
// FisherGreater({a, n}, {b, n}) is significant at alpha.
//
// Fisher's test is monotone in the table: a table that is significant
// stays so with one more failure of A or one fewer of B. So for each a
// the significant b are 0 to some bmax(a), which grows with a; one walk
// over a, moving bmax up, finds them all with as many tests as the two
// counts' ranges are long.
func Power(pa, pb float64, n int, alpha float64) float64 {
	if n <= 0 {
		return 0
	}
	firstA, probsA := binomialRange(n, pa)
	firstB, probsB := binomialRange(n, pb)
	cumB := make([]float64, len(probsB)) // P(B ≤ firstB+i)
	total := 0.0
	for i, p := range probsB {
		total += p
		cumB[i] = total
	}
	lastB := firstB + len(probsB) - 1
	power := 0.0
	bmax := firstB - 1 // below B's range: no b counted yet
	for i, pA := range probsA {
		a := firstA + i
		for bmax < lastB && Significant(FisherGreater(Count{a, n}, Count{bmax + 1, n}), alpha) {
			bmax++
		}
		if bmax >= firstB {
			power += pA * cumB[bmax-firstB]
		}
	}
	return min(1, power)
}

// RunsToShow is about how many runs per build would show a difference if
// the rates are as measured: the smallest n at which the one-sided Fisher
// exact test at level alpha, with n runs of each build, has at least the
// given power when build A fails at rate pa and build B at pb. 1.36%
// (3 of 220) against 0% needs 343 runs per build for the test to show it
// half the time (power 0.5) and 492 for four times in five (0.8).
//
// The exact test's power has small saw-teeth in n (the discrete critical
// value steps), so the search doubles n until the power is reached and then
// bisects on the assumption that it grows with n: the n it returns has the
// power, and n-1 does not. ok is false when pa ≤ pb (no number of runs
// would show A failing more often) or when limit runs do not reach the
// power.
func RunsToShow(pa, pb, alpha, power float64, limit int) (n int, ok bool) {
	if pa <= pb || limit < 1 {
		return 0, false
	}
	reaches := func(n int) bool { return Power(pa, pb, n, alpha) >= power }
	lo, hi := 0, 1 // the power is not reached at lo, and may be at hi
	for !reaches(hi) {
		if hi >= limit {
			return 0, false
		}
		lo, hi = hi, min(2*hi, limit)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if reaches(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// About is n to two significant figures, as a count that is an estimate
// reads: 343 is about 340, 492 about 490, 12345 about 12000.
func About(n int) int {
	if n < 100 {
		return n
	}
	unit := 1
	for n/unit >= 100 {
		unit *= 10
	}
	return (n + unit/2) / unit * unit
}
