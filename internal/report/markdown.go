package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// ChecklistColumns are the columns of a PR "Testing Checklist".
var ChecklistColumns = []string{"Test", "Command", "Devices", "Status"}

// WriteMarkdown writes one or more results as GitHub-flavoured Markdown,
// ready to paste into a pull request: a section per result with its tables,
// then one Testing Checklist with a row per result.
func WriteMarkdown(w io.Writer, results ...*Result) error {
	var b bytes.Buffer
	for _, r := range results {
		writeMarkdownResult(&b, r)
	}
	b.WriteString("#### Testing Checklist\n\n")
	checklist := Table{Columns: ChecklistColumns}
	for _, r := range results {
		checklist.AddRow(r.ChecklistRow()...)
	}
	writePipeTable(&b, &checklist)
	_, err := w.Write(b.Bytes())
	return err
}

func writeMarkdownResult(b *bytes.Buffer, r *Result) {
	fmt.Fprintf(b, "### %s: %s\n\n", mdInline(r.Check), r.Verdict)
	if r.Summary != "" {
		b.WriteString(mdInline(r.Summary) + "\n\n")
	}
	item := func(name, value string) {
		if value != "" {
			fmt.Fprintf(b, "- **%s:** %s\n", name, value)
		}
	}
	if r.Command != "" {
		item("Command", mdCode(r.Command))
	}
	if r.Backend != "" {
		backend := mdCode(r.Backend)
		if r.BackendReason != "" {
			backend += " (" + mdInline(r.BackendReason) + ")"
		}
		item("Backend", backend)
	}
	if r.Device.Description != "" {
		item("Device", mdInline(r.Device.Description))
	} else if r.Device.Name != "" {
		item("Device", mdInline(r.Device.Short()))
	}
	if !r.Started.IsZero() {
		item("Started", r.Started.Format(time.RFC3339)+", took "+durationText(r.Duration))
	}
	b.WriteString("\n")
	for _, t := range r.Tables {
		if t.Title != "" {
			fmt.Fprintf(b, "#### %s\n\n", mdInline(t.Title))
		}
		writePipeTable(b, t)
	}
	if len(r.Notes) > 0 {
		b.WriteString("Notes:\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(b, "- %s\n", mdInline(n))
		}
		b.WriteString("\n")
	}
	if len(r.Counters) > 0 {
		parts := make([]string, len(r.Counters))
		for i, c := range r.Counters {
			parts[i] = fmt.Sprintf("%s %d", mdInline(c.Name), c.Value)
		}
		fmt.Fprintf(b, "Counters: %s\n\n", strings.Join(parts, ", "))
	}
}

// writePipeTable writes a GitHub pipe table with columns padded to a common
// width, so the raw text reads as a table too.
func writePipeTable(b *bytes.Buffer, t *Table) {
	header, rows := t.grid()
	if len(header) == 0 {
		return
	}
	for i := range header {
		header[i] = mdCell(header[i])
	}
	for _, row := range rows {
		for i := range row {
			row[i] = mdCell(row[i])
		}
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" " + c + strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)) + " |")
		}
		b.WriteString("\n")
	}
	line(header)
	rule := make([]string, len(header))
	for i := range rule {
		rule[i] = strings.Repeat("-", widths[i])
	}
	line(rule)
	for _, row := range rows {
		line(row)
	}
	b.WriteString("\n")
}

// mdCell makes s safe inside a pipe-table cell: one line, pipes escaped.
func mdCell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

// mdInline makes s safe as inline text: one line.
func mdInline(s string) string { return oneLine(s) }

// mdCode wraps s in a code span, using a longer fence when s holds backticks.
func mdCode(s string) string {
	s = oneLine(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}
