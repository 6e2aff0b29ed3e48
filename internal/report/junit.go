package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"miotool/internal/words"
)

// The JUnit XML layout that CI systems (Jenkins, GitLab, GitHub Actions
// reporters, CircleCI, test-results-parser) read: one <testsuite> as the
// root, Maven Surefire's own form, with one <testcase> per check. The
// root is <testsuite>, not <testsuites>, because only <testsuite> may
// carry a skipped count in Jenkins' schema (junit-10.xsd): a reader that
// takes its totals from the root (test-results-parser does) then counts
// a skipped or never-started check as skipped, where under a
// <testsuites> root, which cannot say it, it counted it as passed. The
// environment variants, which were <testsuite>s of their own, are told
// apart by the case's classname and name instead ("capture-global-lazy
// [GPU_MAX_HW_QUEUES=3]"), as in the checklist.
type junitSuite struct {
	XMLName    xml.Name        `xml:"testsuite"`
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Hostname   string          `xml:"hostname,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	// CDATA keeps the lines of a log readable in the file.
	Text string `xml:",cdata"`
}

type junitText struct {
	Text string `xml:",cdata"`
}

// seconds is d as JUnit's time: seconds with three decimals, never
// negative (the schema's SUREFIRE_TIME has no sign).
func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", max(d, 0).Seconds()) }

// WriteJUnit writes s as JUnit XML: one <testsuite> with one <testcase>
// per check and variant (in a shard split by checks, per check of the
// shard). A check that met its expectation is a passing test case; one
// that did not is a <failure>, or an <error> when a run produced no
// result or ran on another backend or dialect than the check asks for;
// one the suite did not run is <skipped>. A check the suite's
// interruption stopped while it ran is an <error type="interrupted">, so
// that no CI reads an interrupted suite as green; where the interruption
// fell between two checks, a test case of its own says so. A check whose
// shard a merge lacks is an <error type="missing shard">. Each case's
// message is its checklist status, and its <system-out> lists its runs.
// The <testsuite>'s time is what the suite took, or for a merged result
// the time its runs took on each host, summed.
func WriteJUnit(w io.Writer, s *SuiteResult) error {
	return writeJUnit(w, s, s.StatusOf)
}

// WriteResultJUnit writes a single check's result as JUnit XML: one
// <testsuite> with one <testcase>, the check, whose outcome is the
// verdict's (SKIP is <skipped>, INTERRUPTED an <error
// type="interrupted">) and whose message is the result's checklist
// status. A matrix's rows are the check's sub-tests, counted in its
// status ("(24/24)"), not test cases of their own.
func WriteResultJUnit(w io.Writer, r *Result) error {
	s := SuiteFromResult(r)
	if r.Verdict == Interrupted {
		s.Interrupted = r.Summary
	}
	status := r.ChecklistStatus()
	return writeJUnit(w, s, func(*SuiteCheck) string { return status })
}

func writeJUnit(w io.Writer, s *SuiteResult, message func(*SuiteCheck) string) error {
	js := junitSuite{Name: s.Suite, Hostname: strings.Join(s.Hosts, ","), Timestamp: junitTime(s.Started)}
	if t := s.toolText(); t != "" {
		js.Properties = append(js.Properties, junitProperty{"miotool.version", t})
	}
	if s.File != "" {
		js.Properties = append(js.Properties, junitProperty{"suite.file", s.File})
	}
	for _, v := range s.variants() {
		js.Properties = append(js.Properties, junitProperty{"environment", v})
	}
	if s.Shard != nil {
		js.Properties = append(js.Properties, junitProperty{"miotool.shard", s.Shard.describe()})
	}
	if m := s.missingText(); m != "" {
		js.Properties = append(js.Properties, junitProperty{"miotool.missing_shards", m})
	}
	interrupted := s.interrupted()
	if interrupted {
		why := s.Interrupted
		if why == "" {
			why = "interrupted"
		}
		js.Properties = append(js.Properties, junitProperty{"miotool.verdict", string(Interrupted)},
			junitProperty{"miotool.interrupted", why})
	}
	checks := s.ownChecks()
	for _, c := range checks {
		classname := "miotool." + classPart(s.Suite)
		if c.Variant != "" {
			classname += "[" + classPart(c.Variant) + "]"
		}
		jc := junitCase{Classname: classname, Name: c.Test(), Time: seconds(c.Duration()), SystemOut: &junitText{xmlSafe(junitRuns(c))}}
		msg := message(c)
		switch c.Outcome() {
		case Skip:
			if s.missingShard(c) != nil {
				jc.Error = &junitMessage{Message: msg, Type: "missing shard"}
				js.Errors++
				break
			}
			var text string
			if !c.NotRun() {
				// It ran and skipped: the reason its runs gave.
				text = xmlSafe(junitDetail(c))
			}
			jc.Skipped = &junitMessage{Message: msg, Text: text}
			js.Skipped++
		case Interrupted:
			jc.Error = &junitMessage{Message: msg, Type: "interrupted", Text: xmlSafe(junitDetail(c))}
			js.Errors++
		case Error:
			jc.Error = &junitMessage{Message: msg, Type: "ERROR", Text: xmlSafe(junitDetail(c))}
			js.Errors++
		case Fail:
			jc.Failure = &junitMessage{Message: msg, Type: "FAIL", Text: xmlSafe(junitDetail(c))}
			js.Failures++
		}
		js.Tests++
		js.Cases = append(js.Cases, jc)
	}
	if interrupted && s.Totals().Interrupted == 0 {
		// Stopped between two checks: every case above is a pass or
		// a skip, and CI must not read that as green.
		js.Cases = append(js.Cases, junitCase{Classname: "miotool." + classPart(s.Suite), Name: "suite interrupted", Time: seconds(0),
			Error: &junitMessage{Message: s.Summary(), Type: "interrupted"}})
		js.Tests++
		js.Errors++
	}
	if s.Failure != "" {
		// miotool itself failed while it ran the suite: whatever its
		// cases say, CI must read it red.
		js.Cases = append(js.Cases, junitCase{Classname: "miotool." + classPart(s.Suite), Name: "miotool failed", Time: seconds(0),
			Error: &junitMessage{Message: s.Summary(), Type: "ERROR"}})
		js.Tests++
		js.Errors++
	}
	// One run of the suite took what the user waited for it; a merged
	// result's runs, on other hosts and at other times, add up.
	total := wallTime(checks)
	if s.Duration > 0 && len(s.MergedRuns) <= 1 {
		total = s.Duration
	}
	js.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(js); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// variants are the environment variants of the checks, in order of first
// appearance, the baseline left out.
func (s *SuiteResult) variants() []string {
	var vs []string
	for _, c := range s.Checks {
		if c.Variant != "" && !slices.Contains(vs, c.Variant) {
			vs = append(vs, c.Variant)
		}
	}
	return vs
}

// classPart is a value made fit for a testcase classname: Jenkins splits
// a classname into package and class at its last dot, so a dot from a
// suite name or a variant ("MIOPEN_NAIVE_TIMEOUT=2.5") becomes "_" and
// "miotool." stays the only package.
func classPart(s string) string { return strings.ReplaceAll(s, ".", "_") }

// wallTime is what a <testsuite> of these checks took: on each host, from
// its first run's start to its last run's end (checks run side by side
// with --jobs, so their own times add up to more), summed over the hosts;
// a run without a start time counts its own duration.
func wallTime(checks []*SuiteCheck) time.Duration {
	type span struct{ start, end time.Time }
	spans := map[string]*span{}
	var total time.Duration
	for _, c := range checks {
		for _, r := range c.Runs {
			if r.Started.IsZero() {
				total += max(r.Duration, 0)
				continue
			}
			end := r.Started.Add(max(r.Duration, 0))
			sp := spans[r.Host]
			switch {
			case sp == nil:
				spans[r.Host] = &span{r.Started, end}
			default:
				if r.Started.Before(sp.start) {
					sp.start = r.Started
				}
				if end.After(sp.end) {
					sp.end = end
				}
			}
		}
	}
	for _, sp := range spans {
		total += sp.end.Sub(sp.start)
	}
	return total
}

// junitTime is the timestamp JUnit readers expect: ISO 8601 without a zone
// offset, in UTC.
func junitTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05")
}

// junitRuns is a case's <system-out>: the command and one line per run.
func junitRuns(c *SuiteCheck) string {
	var b strings.Builder
	fmt.Fprintf(&b, "command: %s\nexpect: %s\n", c.CommandLine(), c.Expect)
	for _, r := range c.Runs {
		fmt.Fprintf(&b, "run %d", r.Iteration)
		if r.Host != "" {
			fmt.Fprintf(&b, " on %s", r.Host)
		}
		if r.Device.Name != "" {
			fmt.Fprintf(&b, " (%s)", r.Device.Short())
		}
		fmt.Fprintf(&b, ": %s in %s", r.Verdict, durationText(r.Duration))
		if r.Summary != "" {
			b.WriteString(": " + words.OneLine(r.Summary))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// junitDetail is the body of a <failure> or <error>: each unmet run's
// summary and, for a run without a result, its standard error.
func junitDetail(c *SuiteCheck) string {
	var b strings.Builder
	for _, r := range c.Runs {
		if c.runMet(r) {
			continue
		}
		fmt.Fprintf(&b, "run %d", r.Iteration)
		if r.Host != "" {
			fmt.Fprintf(&b, " on %s", r.Host)
		}
		fmt.Fprintf(&b, ": %s, expected %s", r.Verdict, c.Expect)
		if r.Summary != "" {
			b.WriteString(": " + words.OneLine(r.Summary))
		}
		b.WriteString("\n")
		if r.Verdict == Error && r.StderrTail != "" {
			b.WriteString(r.StderrTail)
			if !strings.HasSuffix(r.StderrTail, "\n") {
				b.WriteString("\n")
			}
		}
	}
	return b.String()
}

// xmlSafe replaces what XML 1.0 does not allow in character data, even in
// CDATA (control characters such as a terminal's escape codes, invalid
// UTF-8), with U+FFFD. Attribute values are escaped by encoding/xml.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r == utf8.RuneError, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
