package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// captureLike is a capture matrix: reclaim policies as rows, a long
// detail cell in each, one row flagged, and counters with spaces.
func captureLike() *Result {
	r := New("capture", "miotool capture --mode=global --reclaim=lazy,worker", time.Time{})
	long := strings.Repeat("the launch path polled the abandoned stream during the capture; ", 6)
	t := r.AddTable("capture after an abandoned naive evaluation", "reclaim", "mode", "expected", "measured", "end capture", "detail")
	t.FlagColumn = "differs from expected"
	t.AddRow("lazy", "global", "FAIL", "FAIL", "901", long)
	t.AddFlaggedRow("expected PASS", "guarded", "global", "PASS", "FAIL", "901", long)
	t.AddRow("worker", "global", "PASS", "PASS", "0", "graph output correct")
	r.Count("reclaimed by callback", 2)
	r.Count("wrong results", 0)
	r.Finish(Fail, "1 of 3 cases differs", time.Time{})
	return r
}

// Long detail cells leave the Markdown table for numbered notes below it;
// equal texts share a number, short ones stay, and the JSON keeps them.
func TestMarkdownMovesLongDetailsBelowTheTable(t *testing.T) {
	r := captureLike()
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	long := strings.TrimSpace(r.Tables[0].Rows[0].Cells[5])
	for _, want := range []string{
		"| lazy    | global | FAIL     | FAIL     | 901         | [1]                  |",
		"| guarded | global | PASS     | FAIL     | 901         | [1]                  | expected PASS         |",
		"| worker  | global | PASS     | PASS     | 0           | graph output correct |",
		"\n1. " + long + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, long) != 1 || strings.Contains(out, "\n2. ") {
		t.Errorf("the shared detail is not one note:\n%s", out)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "|") && len(line) > 200 {
			t.Errorf("table line of %d characters: %q", len(line), line)
		}
	}
}

// The checklist's commands are code spans, whatever they hold.
func TestMarkdownChecklistCommandsAreCode(t *testing.T) {
	for _, tc := range []struct{ command, want string }{
		{"miotool capture --mode=global", "| `miotool capture --mode=global` |"},
		{"miotool x --filter 'a|b'", "| `miotool x --filter 'a\\|b'` |"},
		{"miotool x --name 'a`b'", "| ``miotool x --name 'a`b'`` |"},
	} {
		r := New("x", tc.command, time.Time{})
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, r); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("%s: checklist lacks %q:\n%s", tc.command, tc.want, buf.String())
		}
	}
}
