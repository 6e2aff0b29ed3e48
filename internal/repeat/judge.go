package repeat

import (
	"miotool/internal/stats"
)

// Verdict is what the runs show.
type Verdict string

// The verdicts.
const (
	Pass Verdict = "pass" // every run passed; or, against an unfixed build, the improvement is shown
	Fail Verdict = "fail" // a run did not pass; or the build fails as often as the unfixed one, or more
	// NotShown: the build failed less often than the unfixed one, but not
	// so much less that chance is ruled out at the confidence asked.
	NotShown    Verdict = "not shown"
	Interrupted Verdict = "interrupted" // stopped before every run had ended
	Error       Verdict = "error"       // runs could not be started
)

// Reason says which rule gave the verdict.
type Reason string

// The reasons.
const (
	AllPassed  Reason = "every run passed"
	SomeFailed Reason = "a run did not pass"
	Shown      Reason = "the improvement is shown"
	NotYet     Reason = "fewer failures, not yet shown"
	NotBetter  Reason = "as many failures or more"
	// NothingToImprove: the unfixed build never failed.
	NothingToImprove Reason = "the unfixed build never failed"
	Stopped          Reason = "interrupted"
	StartFailed      Reason = "runs could not start"
)

// RunsLimit bounds the search for the runs per build that would show a
// difference: past it the difference is too small for repeated runs to
// show, and the result says so.
const RunsLimit = 100000

// Comparison is the fixed build against the unfixed one: the one-sided
// Fisher exact test of "the unfixed build fails more often".
type Comparison struct {
	// Before is the unfixed build's failures, After the fixed one's.
	Before, After stats.Count
	// Confidence is the level asked (0.95): the test's alpha is 1 - it.
	Confidence float64
	// P is the test's p-value.
	P float64
	// Shown: P is at or below alpha.
	Shown bool
	// Better: the fixed build's rate is below the unfixed one's.
	Better bool
	// Half and MostTimes are the runs per build at which the test would
	// show the difference half the time (power 0.5) and four times in
	// five (0.8), if the rates are as measured; 0 when no number up to
	// RunsLimit would (a rate of 0 before, or an increase).
	Half, MostTimes int
}

// Compare tests the fixed build's failures (after) against the unfixed
// build's (before) at the given confidence (0.95 for 95%).
func Compare(before, after stats.Count, confidence float64) Comparison {
	alpha := 1 - confidence
	c := Comparison{Before: before, After: after, Confidence: confidence,
		P: stats.FisherGreater(before, after), Better: after.Rate() < before.Rate()}
	// A significant p needs the unfixed build's count above its share of
	// the failures, so a shown difference is always an improvement.
	c.Shown = stats.Significant(c.P, alpha)
	if c.Better && !c.Shown {
		if n, ok := stats.RunsToShow(before.Rate(), after.Rate(), alpha, 0.5, RunsLimit); ok {
			c.Half = n
		}
		if n, ok := stats.RunsToShow(before.Rate(), after.Rate(), alpha, 0.8, RunsLimit); ok {
			c.MostTimes = n
		}
	}
	return c
}

// Judgement is the verdict and what it rests on.
type Judgement struct {
	Verdict Verdict
	Reason  Reason
	// Comparison is set when there was an unfixed build to compare with,
	// over the runs that finished (also when interrupted).
	Comparison *Comparison
	// Outliers are, per build, the devices (indices into its Devices)
	// whose runs failed more often than the build's runs on the other
	// devices, by the same test at the same confidence over each device
	// (Bonferroni: alpha divided among the devices).
	Outliers [][]int
}

// Judge gives the verdict on the facts: baseline, when set, is an unfixed
// build's failures from an earlier result; with two builds the second is
// the unfixed one. A verdict is never PASS unless every run ran: an
// interruption or a run that could not start decides first. Without an
// unfixed build, PASS needs every run to pass. With one, PASS needs the
// improvement shown at the confidence; fewer failures not yet shown are
// NotShown, never PASS; as many or more are FAIL.
func Judge(f *Facts, baseline *stats.Count, confidence float64) Judgement {
	j := Judgement{}
	after := f.Builds[0].Count()
	var before *stats.Count
	switch {
	case baseline != nil:
		before = baseline
	case len(f.Builds) > 1:
		c := f.Builds[1].Count()
		before = &c
	}
	if before != nil {
		c := Compare(*before, after, confidence)
		j.Comparison = &c
	}
	for _, b := range f.Builds {
		j.Outliers = append(j.Outliers, outliers(b, 1-confidence))
	}
	switch {
	case f.StartFailures() > 0:
		j.Verdict, j.Reason = Error, StartFailed
	case f.Interrupted:
		j.Verdict, j.Reason = Interrupted, Stopped
	case before == nil && after.K == 0 && after.N > 0:
		j.Verdict, j.Reason = Pass, AllPassed
	case before == nil:
		j.Verdict, j.Reason = Fail, SomeFailed
	case before.K == 0:
		j.Verdict, j.Reason = Fail, NothingToImprove
	case j.Comparison.Shown:
		j.Verdict, j.Reason = Pass, Shown
	case !j.Comparison.Better:
		j.Verdict, j.Reason = Fail, NotBetter
	default:
		j.Verdict, j.Reason = NotShown, NotYet
	}
	return j
}

// outliers are the devices whose runs of b failed more often than b's
// runs elsewhere, significantly at alpha shared among the devices.
func outliers(b *BuildFacts, alpha float64) []int {
	if len(b.Devices) < 2 {
		return nil
	}
	total := b.Count()
	var out []int
	for i, d := range b.Devices {
		here := stats.Count{K: d.NotPassed, N: d.Finished}
		rest := stats.Count{K: total.K - here.K, N: total.N - here.N}
		if here.N == 0 || rest.N == 0 || here.Rate() <= rest.Rate() {
			continue
		}
		if stats.Significant(stats.FisherGreater(here, rest), alpha/float64(len(b.Devices))) {
			out = append(out, i)
		}
	}
	return out
}
