package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"miotool/internal/words"
)

// stderrLines is how many lines of a failed run's standard error the text
// and Markdown outputs show (the JSON keeps the whole tail).
const stderrLines = 8

// RenderSuite writes s in the given format.
func RenderSuite(w io.Writer, f Format, s *SuiteResult, opts Options) error {
	switch f {
	case Text, "":
		return WriteSuiteText(w, s, opts)
	case Markdown:
		return WriteSuiteMarkdown(w, s)
	case JSON:
		return WriteSuiteJSON(w, s)
	}
	return fmt.Errorf("unknown format %q (want text, markdown or json)", string(f))
}

// WriteSuiteMarkdown writes s for a pull request: a short header, the
// Testing Checklist, and the runs that did not meet their expectation.
func WriteSuiteMarkdown(w io.Writer, s *SuiteResult) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "### Suite %s: %s\n\n", mdInline(s.Suite), s.Verdict())
	if s.Title != "" {
		b.WriteString(mdInline(s.Title) + "\n\n")
	}
	item := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "- **%s:** %s\n", name, value)
		}
	}
	item("Result", mdInline(s.Summary()))
	if s.File != "" {
		item("Suite file", mdCode(s.File))
	}
	if len(s.Sources) > 0 {
		codes := make([]string, len(s.Sources))
		for i, src := range s.Sources {
			codes[i] = mdCode(src)
		}
		item("Merged from", strings.Join(codes, ", "))
	}
	checklist := s.Checklist()
	item("Hosts", mdInline(strings.Join(s.Hosts, ", ")))
	item("Devices", mdInline(s.devices()))
	item("Shard", mdInline(s.shardText()))
	item("Missing", mdInline(s.missingText()))
	item("Runs", mdInline(s.optionsText()))
	item("miotool", mdInline(s.toolText()))
	if !s.Started.IsZero() {
		item("Started", s.Started.Format(time.RFC3339)+", took "+durationText(s.Duration))
	}
	b.WriteString("\n#### Testing Checklist\n\n")
	if err := writeMarkdownTable(&b, checklist, checklistCommandColumn); err != nil {
		return err
	}
	if unmet := s.unmetRuns(); len(unmet) > 0 {
		b.WriteString("#### Not as expected\n\n")
		for _, u := range unmet {
			fmt.Fprintf(&b, "- %s\n", mdInline(u.line()))
			if tail := words.LastLines(controlsOut(u.run.StderrTail), stderrLines); tail != "" && u.run.Verdict == Error {
				fence := "```"
				for strings.Contains(tail, fence) {
					fence += "`"
				}
				fmt.Fprintf(&b, "\n  %s\n", fence)
				for line := range strings.Lines(tail) {
					b.WriteString("  " + strings.TrimRight(line, "\n") + "\n")
				}
				fmt.Fprintf(&b, "  %s\n\n", fence)
			}
		}
		if !bytes.HasSuffix(b.Bytes(), []byte("\n\n")) {
			b.WriteString("\n")
		}
	}
	if skipped := s.skippedRuns(); len(skipped) > 0 {
		b.WriteString("#### Skipped\n\n")
		for _, u := range skipped {
			fmt.Fprintf(&b, "- %s\n", mdInline(u.line()))
		}
		b.WriteString("\n")
	}
	if len(s.Notes) > 0 {
		b.WriteString("#### Notes\n\n")
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "- %s\n", mdInline(n))
		}
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteSuiteText writes s for people and logs.
func WriteSuiteText(w io.Writer, s *SuiteResult, opts Options) error {
	var b bytes.Buffer
	verdict := string(s.Verdict())
	if opts.TTY && opts.Color {
		verdict = verdictColor[s.Verdict()] + verdict + colorReset
	}
	fmt.Fprintf(&b, "suite %s: %s - %s\n", s.Suite, verdict, s.Summary())
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-9s %s\n", name+":", words.OneLine(value))
		}
	}
	field("title", s.Title)
	field("file", s.File)
	field("merged", strings.Join(s.Sources, ", "))
	checklist := s.Checklist()
	field("hosts", strings.Join(s.Hosts, ", "))
	field("devices", s.devices())
	field("shard", s.shardText())
	field("missing", s.missingText())
	field("runs", s.optionsText())
	field("miotool", s.toolText())
	if !s.Started.IsZero() {
		field("started", s.Started.Format(time.RFC3339)+", took "+durationText(s.Duration))
	}
	b.WriteString("\n")
	if err := writeTextTable(&b, checklist, opts.TTY); err != nil {
		return err
	}
	if unmet := s.unmetRuns(); len(unmet) > 0 {
		b.WriteString("\nnot as expected:\n")
		for _, u := range unmet {
			fmt.Fprintf(&b, "  - %s\n", words.OneLine(u.line()))
			if u.run.Verdict == Error {
				for line := range strings.Lines(words.LastLines(u.run.StderrTail, stderrLines)) {
					b.WriteString("      " + strings.TrimRight(line, "\n") + "\n")
				}
			}
		}
	}
	if skipped := s.skippedRuns(); len(skipped) > 0 {
		b.WriteString("\nskipped:\n")
		for _, u := range skipped {
			fmt.Fprintf(&b, "  - %s\n", words.OneLine(u.line()))
		}
	}
	if len(s.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  - %s\n", words.OneLine(n))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// line is "capture-global-worker [GPU_MAX_HW_QUEUES=3], run 2 on node1:
// FAIL, expected PASS: <summary>", or for runs that failed alike
// "capture-global-worker, runs 1-20 on node1 (20 of 20 runs): ...".
func (u unmetRun) line() string {
	s := u.check.Test() + ", " + u.which()
	s += fmt.Sprintf(": %s, expected %s", u.run.Verdict, u.check.Expect)
	if u.run.Summary != "" {
		s += ": " + u.run.Summary
	}
	return s
}
