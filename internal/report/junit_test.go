package report

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"miotool/internal/testutil"
)

// validateJUnit checks doc against Jenkins' schema with xmllint; it skips,
// naming what is missing, where xmllint or the schema is not there.
func validateJUnit(t *testing.T, doc []byte) {
	t.Helper()
	testutil.ValidateJUnit(t, doc)
}

// ciCounts is what a CI's JUnit reader shows: the counts the root
// <testsuite> declares, and the cases it finds by their child elements.
type ciCounts struct {
	Root       string // the root element's name
	Declared   [4]int // tests, failures, errors, skipped on the root
	Passed     int    // cases with no failure, error or skipped
	Failures   int
	Errors     int
	Skipped    int
	ErrorTypes []string
	Messages   []string // each case's failure, error or skipped message
	Classnames []string
	Names      []string
	CaseTime   float64 // sum of <testcase time>
	TopTime    float64 // the root's time
}

func readJUnitCounts(t *testing.T, doc []byte) ciCounts {
	t.Helper()
	type msg struct {
		Type    string `xml:"type,attr"`
		Message string `xml:"message,attr"`
	}
	var top struct {
		XMLName  xml.Name
		Tests    int     `xml:"tests,attr"`
		Failures int     `xml:"failures,attr"`
		Errors   int     `xml:"errors,attr"`
		Skipped  int     `xml:"skipped,attr"`
		Time     float64 `xml:"time,attr"`
		Nested   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
		Cases []struct {
			Classname string  `xml:"classname,attr"`
			Name      string  `xml:"name,attr"`
			Time      float64 `xml:"time,attr"`
			Failure   *msg    `xml:"failure"`
			Error     *msg    `xml:"error"`
			Skipped   *msg    `xml:"skipped"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(doc, &top); err != nil {
		t.Fatalf("not XML: %v\n%s", err, doc)
	}
	if len(top.Nested) > 0 {
		t.Errorf("nested <testsuite>s, which many readers do not look into:\n%s", doc)
	}
	c := ciCounts{Root: top.XMLName.Local, TopTime: top.Time, Declared: [4]int{top.Tests, top.Failures, top.Errors, top.Skipped}}
	for _, k := range top.Cases {
		c.Classnames = append(c.Classnames, k.Classname)
		c.Names = append(c.Names, k.Name)
		c.CaseTime += k.Time
		switch {
		case k.Error != nil:
			c.Errors++
			c.ErrorTypes = append(c.ErrorTypes, k.Error.Type)
			c.Messages = append(c.Messages, k.Error.Message)
		case k.Failure != nil:
			c.Failures++
			c.Messages = append(c.Messages, k.Failure.Message)
		case k.Skipped != nil:
			c.Skipped++
			c.Messages = append(c.Messages, k.Skipped.Message)
		default:
			c.Passed++
			c.Messages = append(c.Messages, "")
		}
	}
	return c
}

// Every JUnit file the renderer writes validates against Jenkins' schema,
// and a CI reading it back counts what the suite did.
func TestJUnitFilesValidateAndCount(t *testing.T) {
	one := func(name string, expect Verdict, runs ...SuiteRun) *SuiteCheck {
		return &SuiteCheck{Name: name, Command: "miotool " + name, Expect: expect, Runs: runs}
	}
	passing := hostSuite("node1", h200, Pass, Pass)
	failing := hostSuite("node1", h200, Pass, Fail)
	erroring := hostSuite("node1", h200, Error)
	skipped := NewSuiteResult("skips", suiteStart)
	skipped.Checks = []*SuiteCheck{{Name: "needs-gpu", Command: "miotool find", Expect: Pass, Skip: "needs a GPU"},
		one("ran", Pass, run("node1", 1, Pass, "", time.Second))}
	dotted := NewSuiteResult("mini.v2", suiteStart)
	dotted.Checks = []*SuiteCheck{one("find", Pass, run("node1", 1, Pass, "", time.Second))}
	dotted.Checks[0].Variant, dotted.Checks[0].Env = "MIOPEN_NAIVE_TIMEOUT=2.5", []string{"MIOPEN_NAIVE_TIMEOUT=2.5"}

	for _, tc := range []struct {
		name                            string
		s                               *SuiteResult
		passed, failures, errs, skipped int
	}{
		{"passing", passing, 1, 0, 0, 0},
		{"failing", failing, 0, 1, 0, 0},
		{"erroring", erroring, 0, 0, 1, 0},
		{"skipped", skipped, 1, 0, 0, 1},
		{"sample", sampleSuite(), 3, 1, 1, 1},
		{"dotted values", dotted, 1, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJUnit(&buf, tc.s); err != nil {
				t.Fatal(err)
			}
			t.Run("jenkins schema", func(t *testing.T) { validateJUnit(t, buf.Bytes()) })
			c := readJUnitCounts(t, buf.Bytes())
			if c.Passed != tc.passed || c.Failures != tc.failures || c.Errors != tc.errs || c.Skipped != tc.skipped {
				t.Errorf("CI counts passed %d failures %d errors %d skipped %d, want %d %d %d %d",
					c.Passed, c.Failures, c.Errors, c.Skipped, tc.passed, tc.failures, tc.errs, tc.skipped)
			}
			cases := c.Passed + c.Failures + c.Errors + c.Skipped
			if want := [4]int{cases, c.Failures, c.Errors, c.Skipped}; c.Declared != want || c.Root != "testsuite" {
				t.Errorf("root <%s> declares %v, the cases say %v", c.Root, c.Declared, want)
			}
			for _, cn := range c.Classnames {
				// Jenkins splits a classname into package and class at
				// its last dot: only miotool's own dot may be there.
				if strings.Count(cn, ".") != 1 || !strings.HasPrefix(cn, "miotool.") {
					t.Errorf("classname %q: a value brought a dot in", cn)
				}
			}
		})
	}
}
