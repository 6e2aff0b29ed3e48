package stats

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// The figures of ROCM-27477's validation: 3 crashes in 220 runs before the
// fix, 0 in 220 after.
var (
	before = Count{K: 3, N: 220}
	after  = Count{K: 0, N: 220}
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestReferenceValues(t *testing.T) {
	if p := FisherGreater(before, after); math.Round(p*1e4)/1e4 != 0.1241 {
		t.Errorf("FisherGreater(3/220, 0/220) = %.6f, want 0.1241", p)
	}
	lo, hi := Interval(before, 0.95)
	if math.Round(lo*1e4)/1e4 != 0.0028 || math.Round(hi*1e4)/1e4 != 0.0393 {
		t.Errorf("95%% interval of 3/220 = %.5f-%.5f, want 0.28%%-3.93%%", lo, hi)
	}
	if b := UpperBound(after, 0.95); math.Round(b*1e4)/1e4 != 0.0135 {
		t.Errorf("one-sided 95%% bound of 0/220 = %.5f, want 1.35%%", b)
	}
	// n = 340 gives 0.494 and 350 gives 0.520: the smallest n with power
	// 0.5 lies between, and is about 340.
	for _, c := range []struct {
		n    int
		want float64
	}{{340, 0.494}, {350, 0.520}} {
		if got := Power(before.Rate(), after.Rate(), c.n, 0.05); math.Round(got*1e3)/1e3 != c.want {
			t.Errorf("Power(n=%d) = %.4f, want %.3f", c.n, got, c.want)
		}
	}
	n, ok := RunsToShow(before.Rate(), after.Rate(), 0.05, 0.5, 100000)
	if !ok || About(n) != 340 {
		t.Errorf("RunsToShow at 50%% = %d (%v), want about 340", n, ok)
	}
	if Power(before.Rate(), after.Rate(), n, 0.05) < 0.5 || Power(before.Rate(), after.Rate(), n-1, 0.05) >= 0.5 {
		t.Errorf("RunsToShow at 50%% = %d: want the first n with power 0.5", n)
	}
	n80, ok := RunsToShow(before.Rate(), after.Rate(), 0.05, 0.8, 100000)
	if !ok || About(n80) != 490 || Power(before.Rate(), after.Rate(), n80, 0.05) < 0.8 || Power(before.Rate(), after.Rate(), n80-1, 0.05) >= 0.8 {
		t.Errorf("RunsToShow at 80%% = %d (%v), want about 490, the first n with power 0.8", n80, ok)
	}
}

func TestUpperBoundClosedForm(t *testing.T) {
	for _, n := range []int{1, 2, 10, 220, 1000, 100000} {
		for _, conf := range []float64{0.9, 0.95, 0.99} {
			want := 1 - math.Pow(1-conf, 1/float64(n))
			// The general path (K+1, N-K quantile) agrees with the closed form.
			if got := betaQuantile(conf, 1, float64(n)); !near(got, want, 1e-12*math.Max(want, 1e-300)+1e-15) {
				t.Errorf("n=%d conf=%v: quantile %.17g, closed form %.17g", n, conf, got, want)
			}
			if got := UpperBound(Count{0, n}, conf); !near(got, want, 1e-15) {
				t.Errorf("UpperBound(0/%d, %v) = %.17g, want %.17g", n, conf, got, want)
			}
		}
	}
}

// ratBinomCDF is P(X ≤ k) for X ~ Binomial(n, p), exactly in rationals.
func ratBinomCDF(k, n int, p *big.Rat) *big.Rat {
	sum := new(big.Rat)
	q := new(big.Rat).Sub(big.NewRat(1, 1), p)
	for j := 0; j <= k; j++ {
		term := new(big.Rat).SetInt(new(big.Int).Binomial(int64(n), int64(j)))
		term.Mul(term, ratPow(p, j))
		term.Mul(term, ratPow(q, n-j))
		sum.Add(sum, term)
	}
	return sum
}

// sumBinomCDF is P(X ≤ k) for X ~ Binomial(n, p) as the plain sum of its
// terms in float64, each binomial coefficient exact: a few units in the
// last place off for the small n it is used with.
func sumBinomCDF(k, n int, p float64) float64 {
	sum := 0.0
	for j := 0; j <= k; j++ {
		c, _ := new(big.Float).SetInt(new(big.Int).Binomial(int64(n), int64(j))).Float64()
		sum += c * math.Pow(p, float64(j)) * math.Pow(1-p, float64(n-j))
	}
	return sum
}

func ratPow(x *big.Rat, n int) *big.Rat {
	out := big.NewRat(1, 1)
	for range n {
		out.Mul(out, x)
	}
	return out
}

func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// TestIntervalAgainstBruteForce holds the interval to its definition on
// every count of small samples: at the upper bound, K or fewer has
// probability alpha/2; at the lower, K or more has; summed exactly.
func TestIntervalAgainstBruteForce(t *testing.T) {
	for _, conf := range []float64{0.9, 0.95, 0.99} {
		alpha := 1 - conf
		for n := 1; n <= 25; n++ {
			for k := 0; k <= n; k++ {
				lo, hi := Interval(Count{k, n}, conf)
				if !(0 <= lo && lo <= float64(k)/float64(n) && float64(k)/float64(n) <= hi && hi <= 1) {
					t.Fatalf("%d/%d: interval %v-%v does not hold the rate", k, n, lo, hi)
				}
				if k < n {
					got := sumBinomCDF(k, n, hi)
					if !near(got, alpha/2, 1e-9) {
						t.Errorf("%d/%d at %v: P(X≤k | hi=%v) = %v, want %v", k, n, conf, hi, got, alpha/2)
					}
				} else if hi != 1 {
					t.Errorf("%d/%d: hi = %v, want 1", k, n, hi)
				}
				if k > 0 {
					got := 1 - sumBinomCDF(k-1, n, lo)
					if !near(got, alpha/2, 1e-9) {
						t.Errorf("%d/%d at %v: P(X≥k | lo=%v) = %v, want %v", k, n, conf, lo, got, alpha/2)
					}
				} else if lo != 0 {
					t.Errorf("%d/%d: lo = %v, want 0", k, n, lo)
				}
				if k < n {
					ub := UpperBound(Count{k, n}, conf)
					got := sumBinomCDF(k, n, ub)
					if !near(got, alpha, 1e-9) {
						t.Errorf("%d/%d: P(X≤k | upper bound %v) = %v, want %v", k, n, ub, got, alpha)
					}
				}
			}
		}
	}
}

func TestBinomialCDFAgainstBruteForce(t *testing.T) {
	for _, p := range []float64{0.001, 0.0136, 0.3, 0.5, 0.97} {
		for _, n := range []int{0, 1, 2, 5, 12, 30} {
			for k := -1; k <= n+1; k++ {
				want := 1.0
				if k < 0 {
					want = 0
				} else if k < n {
					want = ratFloat(ratBinomCDF(k, n, new(big.Rat).SetFloat64(p)))
				}
				if got := BinomialCDF(k, n, p); !near(got, want, 1e-12) {
					t.Errorf("BinomialCDF(%d, %d, %v) = %v, want %v", k, n, p, got, want)
				}
			}
		}
	}
}

// ratFisher is FisherGreater by enumerating every table with the same
// margins, exactly.
func ratFisher(a, b Count) *big.Rat {
	m := a.K + b.K
	num, den := new(big.Int), new(big.Int)
	for j := 0; j <= m; j++ {
		if j > a.N || m-j > b.N {
			continue
		}
		w := new(big.Int).Mul(new(big.Int).Binomial(int64(a.N), int64(j)), new(big.Int).Binomial(int64(b.N), int64(m-j)))
		den.Add(den, w)
		if j >= a.K {
			num.Add(num, w)
		}
	}
	return new(big.Rat).SetFrac(num, den)
}

func TestFisherAgainstBruteForce(t *testing.T) {
	for n1 := 0; n1 <= 14; n1++ {
		for n2 := 0; n2 <= 14; n2++ {
			for k1 := 0; k1 <= n1; k1++ {
				for k2 := 0; k2 <= n2; k2++ {
					a, b := Count{k1, n1}, Count{k2, n2}
					want := ratFloat(ratFisher(a, b))
					got := FisherGreater(a, b)
					if !near(got, want, 1e-12*want+1e-15) {
						t.Fatalf("FisherGreater(%v, %v) = %.17g, want %.17g", a, b, got, want)
					}
				}
			}
		}
	}
	// Larger tables, where the tails are long and a term recurrence runs
	// far: against the exact sum.
	for _, c := range [][2]Count{
		{{3, 220}, {0, 220}}, {{30, 400}, {12, 400}}, {{100, 200}, {80, 200}}, {{1, 500}, {40, 500}},
		{{250, 500}, {250, 500}}, {{0, 300}, {0, 300}}, {{300, 300}, {0, 300}},
	} {
		want := ratFloat(ratFisher(c[0], c[1]))
		if got := FisherGreater(c[0], c[1]); !near(got, want, 1e-10*want+1e-300) {
			t.Errorf("FisherGreater(%v, %v) = %.17g, want %.17g", c[0], c[1], got, want)
		}
	}
}

// bruteForcePower is Power by the definition: every pair of counts, each
// table's p-value exact.
func bruteForcePower(pa, pb float64, n int, alpha float64) float64 {
	pmf := func(p float64) []float64 {
		out := make([]float64, n+1)
		r, q := new(big.Rat).SetFloat64(p), new(big.Rat).SetFloat64(1-p)
		for k := range out {
			term := new(big.Rat).SetInt(new(big.Int).Binomial(int64(n), int64(k)))
			out[k] = ratFloat(term.Mul(term, ratPow(r, k)).Mul(term, ratPow(q, n-k)))
		}
		return out
	}
	pmfA, pmfB := pmf(pa), pmf(pb)
	power := 0.0
	for a := 0; a <= n; a++ {
		for b := 0; b <= n; b++ {
			if ratFloat(ratFisher(Count{a, n}, Count{b, n})) <= alpha*(1+tolerance) {
				power += pmfA[a] * pmfB[b]
			}
		}
	}
	return power
}

func TestPowerAgainstBruteForce(t *testing.T) {
	for _, c := range []struct{ pa, pb, alpha float64 }{
		{0.3, 0, 0.05}, {0.5, 0.1, 0.05}, {0.9, 0.2, 0.01}, {0.4, 0.35, 0.05}, {0.2, 0.4, 0.05}, {0.6, 0.3, 0.2}, {1, 0, 0.05}, {0, 0, 0.05},
	} {
		for _, n := range []int{1, 2, 3, 5, 8, 13, 20} {
			want := bruteForcePower(c.pa, c.pb, n, c.alpha)
			if got := Power(c.pa, c.pb, n, c.alpha); !near(got, want, 1e-12) {
				t.Errorf("Power(%v, %v, n=%d, %v) = %.15f, want %.15f", c.pa, c.pb, n, c.alpha, got, want)
			}
		}
	}
}

// TestRunsToShowAgainstScan holds the search to a plain scan from n = 1
// where the power's saw-teeth do not hide the first n that reaches it.
func TestRunsToShowAgainstScan(t *testing.T) {
	for _, c := range []struct{ pa, pb, power float64 }{
		{0.5, 0, 0.5}, {0.5, 0, 0.8}, {0.3, 0.05, 0.5}, {0.2, 0.1, 0.5}, {0.0136, 0, 0.5}, {0.1, 0.02, 0.8},
	} {
		scan := 0
		for n := 1; n <= 2000; n++ {
			if Power(c.pa, c.pb, n, 0.05) >= c.power {
				scan = n
				break
			}
		}
		got, ok := RunsToShow(c.pa, c.pb, 0.05, c.power, 100000)
		if !ok {
			t.Errorf("RunsToShow(%v, %v, power %v): not found", c.pa, c.pb, c.power)
			continue
		}
		// Bisection finds a crossing; where the power dips below the target
		// after its first crossing it may be a later one, never an n that
		// lacks the power.
		if Power(c.pa, c.pb, got, 0.05) < c.power || Power(c.pa, c.pb, got-1, 0.05) >= c.power {
			t.Errorf("RunsToShow(%v, %v, power %v) = %d: not where the power is first reached", c.pa, c.pb, c.power, got)
		}
		if got != scan && About(got) != About(scan) {
			t.Errorf("RunsToShow(%v, %v, power %v) = %d, a scan from 1 finds %d", c.pa, c.pb, c.power, got, scan)
		}
	}
}

func TestRunsToShowNever(t *testing.T) {
	for _, c := range []struct{ pa, pb float64 }{{0, 0}, {0.01, 0.01}, {0.01, 0.02}} {
		if n, ok := RunsToShow(c.pa, c.pb, 0.05, 0.5, 100000); ok {
			t.Errorf("RunsToShow(%v, %v) = %d: no number of runs shows A failing more often", c.pa, c.pb, n)
		}
	}
	// A difference too small for the limit says so rather than searching on.
	if n, ok := RunsToShow(0.0101, 0.01, 0.05, 0.5, 1000); ok {
		t.Errorf("RunsToShow(1.01%%, 1%%) within 1000 runs = %d: want not reached", n)
	}
}

// TestLargeCounts runs each function at 10^5 trials: finite, in range,
// and agreeing with what a normal approximation says to a few digits.
func TestLargeCounts(t *testing.T) {
	const n = 100000
	c := Count{K: 5000, N: n}
	lo, hi := Interval(c, 0.95)
	se := math.Sqrt(0.05 * 0.95 / n)
	if !near(lo, 0.05-1.96*se, 3e-4) || !near(hi, 0.05+1.96*se, 3e-4) {
		t.Errorf("Interval(5000/100000) = %v-%v, want about %v-%v", lo, hi, 0.05-1.96*se, 0.05+1.96*se)
	}
	if b := UpperBound(Count{K: 1, N: n}, 0.95); !(b > 0 && b < 1e-4) {
		t.Errorf("UpperBound(1/100000) = %v", b)
	}
	p := FisherGreater(Count{K: 5300, N: n}, Count{K: 5000, N: n})
	// Two proportions 0.053 and 0.05: z = 0.003 / sqrt(2 × 0.0515 × 0.9485 / n) ≈ 3.05.
	if !(p > 5e-4 && p < 3e-3) {
		t.Errorf("FisherGreater(5300/1e5, 5000/1e5) = %v, want about 1e-3", p)
	}
	if p := FisherGreater(Count{K: 50000, N: n}, Count{K: 50000, N: n}); !(p > 0.49 && p < 0.51) {
		t.Errorf("FisherGreater(equal halves) = %v, want about 0.5", p)
	}
	if pw := Power(0.06, 0.05, 20000, 0.05); !(pw > 0.9 && pw <= 1) {
		t.Errorf("Power(6%% vs 5%%, 20000 per build) = %v, want above 0.9", pw)
	}
}

func TestAbout(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {7, 7}, {99, 99}, {100, 100}, {343, 340}, {345, 350}, {489, 490}, {995, 1000}, {12345, 12000}} {
		if got := About(c[0]); got != c[1] {
			t.Errorf("About(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

func TestSignificant(t *testing.T) {
	for _, c := range []struct {
		p, alpha float64
		want     bool
	}{{0.05, 0.05, true}, {0.05 * (1 + 1e-12), 0.05, true}, {0.0501, 0.05, false}, {0.1241, 0.05, false}, {0.01, 0.05, true}} {
		if got := Significant(c.p, c.alpha); got != c.want {
			t.Errorf("Significant(%v, %v) = %v, want %v", c.p, c.alpha, got, c.want)
		}
	}
}

func BenchmarkRunsToShow(b *testing.B) {
	for _, c := range []struct{ pa, pb float64 }{{3.0 / 220, 0}, {0.1, 0.05}, {0.5, 0.48}, {0.5, 0.499}} {
		b.Run(fmt.Sprintf("%.4f-%.4f", c.pa, c.pb), func(b *testing.B) {
			for b.Loop() {
				RunsToShow(c.pa, c.pb, 0.05, 0.5, 100000)
			}
		})
	}
}
