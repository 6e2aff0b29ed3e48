package report

import (
	"strings"
	"testing"
	"time"
	"unicode"
)

// hostile are texts a user or a program may hand the report, each with
// Markdown, HTML, an entity, math, a pipe or a control character in it.
var hostile = []string{
	"*em* and __strong__ and _u_",
	"<b>bold</b> <!-- c --> <https://example.com>",
	"a | b || c",
	"[link](https://example.com) ![img](x.png) [ref][r]",
	"`tick` and ``two``",
	"&amp; &#38; & plain",
	"$x^2$ costs $5",
	"~~struck~~ ~one~",
	"\x1b[31mred\x1b[0m bell\x07 nul\x00 del\x7f",
	`back\slash \*star\*`,
	"- a list",
	"# a heading",
	"> a quote",
	"1. ordered",
	"---",
	"[def]: https://example.com",
}

// unescapedPipes counts the pipes of a table line that GitHub splits
// cells at: those not after an odd number of backslashes.
func unescapedPipes(line string) int {
	n, backslashes := 0, 0
	for _, r := range line {
		switch {
		case r == '\\':
			backslashes++
			continue
		case r == '|' && backslashes%2 == 0:
			n++
		}
		backslashes = 0
	}
	return n
}

// markupLeft reports markup characters of s that no backslash escapes:
// what would render as something other than the text.
func markupLeft(s string) []string {
	var left []string
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		if rs[i] == '\\' {
			i++
			continue
		}
		switch rs[i] {
		case '*', '<', '`', '$', '~', '|':
			left = append(left, string(rs[i]))
		case '_':
			if i == 0 || i == len(rs)-1 || !unicode.IsLetter(rs[i-1]) && !unicode.IsDigit(rs[i-1]) ||
				!unicode.IsLetter(rs[i+1]) && !unicode.IsDigit(rs[i+1]) {
				left = append(left, "_")
			}
		case '&':
			if i+1 < len(rs) && (rs[i+1] == '#' || unicode.IsLetter(rs[i+1])) {
				left = append(left, "&")
			}
		case '[':
			if strings.Contains(string(rs[i:]), "](") || strings.Contains(string(rs[i:]), "][") {
				left = append(left, "[")
			}
		}
	}
	return left
}

func TestMdInlineEscapes(t *testing.T) {
	for _, in := range hostile {
		for name, out := range map[string]string{"inline": mdInline(in), "cell": mdCell(in)} {
			if left := markupLeft(out); len(left) > 0 {
				t.Errorf("%s(%q) = %q leaves %q unescaped", name, in, out, left)
			}
			if strings.ContainsFunc(out, func(r rune) bool { return unicode.IsControl(r) }) {
				t.Errorf("%s(%q) = %q keeps a control character", name, in, out)
			}
		}
		out := mdInline(in)
		for _, start := range []string{"- ", "# ", ">", "1. ", "---", "[def]:"} {
			if strings.HasPrefix(out, start) {
				t.Errorf("mdInline(%q) = %q starts a block", in, out)
			}
		}
	}
	for in, want := range map[string]string{
		"GPU_MAX_HW_QUEUES=3":                "GPU_MAX_HW_QUEUES=3",
		"capture-global-worker [GPU=3]":      "capture-global-worker [GPU=3]",
		"goroutine 1 [running]:":             "goroutine 1 [running]:",
		"Fails with --reclaim=lazy (global)": "Fails with --reclaim=lazy (global)",
		"1.2.3 (commit c0ffee)":              "1.2.3 (commit c0ffee)",
		"-1.5":                               "-1.5",
		"__init__":                           `\_\_init\_\_`,
		"\x1b[1;32mPASS\x1b[0m":              "PASS",
	} {
		if got := mdInline(in); got != want {
			t.Errorf("mdInline(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"miotool find":         "`miotool find`",
		"a`b":                  "``a`b``",
		"`x`":                  "`` `x` ``",
		"a ``` b":              "````a ``` b````",
		" padded ":             "`  padded  `",
		"red \x1b[31mx\x1b[0m": "`red x`",
	} {
		if got := mdCode(in); got != want {
			t.Errorf("mdCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever a suite's texts hold, its Markdown keeps its structure: each
// table line has its columns' pipes and no more, no control character is
// left, and the texts' markup is escaped where it appears.
func TestSuiteMarkdownKeepsItsStructure(t *testing.T) {
	out := markdownOf(t, hostileSuite())
	checkStructure(t, out)
}

// hostileSuite has a hostile text in every field the Markdown shows.
func hostileSuite() *SuiteResult {
	s := NewSuiteResult(hostile[0], suiteStart)
	s.Title = strings.Join(hostile, " ")
	s.Hosts = []string{"node_1", "<host>"}
	for i, text := range hostile {
		c := &SuiteCheck{Name: text, Command: "miotool find --problem '" + text + "'", Expect: Pass,
			Variant: map[bool]string{true: "K=" + text}[i%3 == 0]}
		switch i % 3 {
		case 0:
			r := run("node_1", 1, Fail, text, time.Second)
			r.Device = Device{Name: text, Arch: "sm_90"}
			c.Runs = []SuiteRun{r}
		case 1:
			c.Skip = text
		default:
			r := run("node_1", 1, Error, text, time.Second)
			r.StderrTail = text + "\n```\n" + text + "\n"
			c.Runs = []SuiteRun{r}
		}
		s.Checks = append(s.Checks, c)
	}
	return s
}

func checkStructure(t *testing.T, out string) {
	t.Helper()
	if strings.ContainsFunc(out, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }) {
		t.Errorf("a control character is left:\n%q", out)
	}
	rows := 0
	fence := "" // the open code fence, "" outside one
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		trimmed := strings.TrimSpace(line)
		if run := trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]; len(run) >= 3 {
			switch {
			case fence == "":
				fence = run
				continue
			case trimmed == run && len(run) >= len(fence):
				fence = ""
				continue
			}
		}
		switch {
		case fence != "":
		case strings.HasPrefix(line, "|"):
			rows++
			if n := unescapedPipes(line); n != 5 {
				t.Errorf("table line with %d cell pipes, want 5: %q", n, line)
			}
		case strings.HasPrefix(line, "- **"), strings.HasPrefix(line, "- "):
			item := strings.TrimPrefix(line, "- ")
			if k := strings.Index(item, ":** "); strings.HasPrefix(item, "**") && k > 0 {
				item = item[k+4:]
			}
			if left := markupLeft(item); len(left) > 0 {
				t.Errorf("list item %q leaves %q unescaped", line, left)
			}
		case strings.HasPrefix(line, "### "):
			if left := markupLeft(line); len(left) > 0 {
				t.Errorf("heading %q leaves %q unescaped", line, left)
			}
		}
	}
	if rows != len(hostile)+2 {
		t.Errorf("%d table lines, want %d", rows, len(hostile)+2)
	}
	if fence != "" {
		t.Errorf("a fence is left open:\n%s", out)
	}
}
