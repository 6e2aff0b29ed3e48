package root_test

import (
	"reflect"
	"testing"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/cmd/report"
	"miotool/internal/cmd/root"
	"miotool/internal/suite"
)

// TestSuiteSpellings holds the words a suite file is read by to
// miotool's command tree: the global flags that take a value (and none
// that does not), the one flag that writes a file of its own, and flags
// and variables that exist. internal/suite's tests read suites with
// these.
func TestSuiteSpellings(t *testing.T) {
	tree := root.New(cmdtest.New(t).F)
	got := report.SuiteSpellings(tree)
	want := suite.Spellings{
		Reserved:      []string{"--format", "--junit", "--export-markdown", "--export-json", "--no-progress"},
		GlobalValue:   []string{"--backend", "--device", "--format", "--config"},
		NoResult:      []string{"-h", "--help", "--version"},
		Writes:        []string{"--write-expect", "--save-records"},
		AllowPrograms: "--allow-programs",
		Library:       []string{"--observer"},
		Programs:      []string{"--against"},
		LoadingEnv:    []string{"MIOTOOL_TRACE_OBSERVER", "MIOTOOL_TRACE_CUPTI"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spellings\n got %+v\nwant %+v", got, want)
	}
	for _, c := range []struct{ command, flag string }{{"report", "allow-programs"}, {"trace", "observer"}, {"repeat", "against"}, {"rules", "write-expect"}} {
		cmd, _, err := tree.Find([]string{c.command})
		if err != nil || cmd.Flags().Lookup(c.flag) == nil {
			t.Errorf("miotool %s has no --%s (%v)", c.command, c.flag, err)
		}
	}
}
