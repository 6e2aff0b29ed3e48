package report

import (
	"slices"
	"testing"

	"miotool/internal/cli"
)

// A check gets the passed-on flags it does not set itself; its own win.
// A trace check gets them before its "--": after it the program's own
// arguments follow, and the program must not get miotool's flags.
func TestCheckArgsPassOnWhatACheckDoesNotSet(t *testing.T) {
	passOn := []flagValue{{"backend", "sim"}, {"device", "1"}}
	for _, tt := range []struct {
		own, want []string
	}{
		{[]string{"capture", "--mode=global"}, []string{"capture", "--mode=global", "--backend", "sim", "--device", "1"}},
		{[]string{"capture", "--backend=cuda"}, []string{"capture", "--backend=cuda", "--device", "1"}},
		{[]string{"capture", "--backend", "hip", "--device", "0"}, []string{"capture", "--backend", "hip", "--device", "0"}},
		{[]string{"trace", "--", "prog", "--backend", "x"}, []string{"trace", "--backend", "sim", "--device", "1", "--", "prog", "--backend", "x"}},
	} {
		if got := checkArgs(tt.own, passOn); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.own, got, tt.want)
		}
	}
}

// Only the flags given to report are passed on: none by default, and the
// config file as an absolute path.
func TestPassedOnFlags(t *testing.T) {
	o := &ReportOptions{}
	if got := o.passedOn(); len(got) != 0 {
		t.Errorf("defaults pass on %v", got)
	}
	o.Global = cli.GlobalOptions{Backend: "cuda", Device: 2}
	o.ConfigUsed = "/etc/miotool.yaml"
	want := []flagValue{{"backend", "cuda"}, {"device", "2"}, {"config", "/etc/miotool.yaml"}}
	if got := o.passedOn(); !slices.Equal(got, want) {
		t.Errorf("passed on %v, want %v", got, want)
	}
}
