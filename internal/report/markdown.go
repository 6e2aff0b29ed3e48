package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// ChecklistColumns are the columns of a PR "Testing Checklist".
var ChecklistColumns = []string{"Test", "Command", "Devices", "Status"}

// checklistCommandColumn is the Command column: its cells are code spans.
const checklistCommandColumn = 1

// noteColumns are the free-text columns whose long cells go below the
// table as numbered notes, so that a table stays readable in a PR (a
// capture matrix row explains itself in about 400 characters). The JSON
// keeps them in place.
var noteColumns = []string{"detail", "details", "note", "notes"}

// noteCellLimit is the longest cell of a note column kept in the table.
const noteCellLimit = 60

// WriteMarkdown writes one or more results as GitHub-flavoured Markdown,
// ready to paste into a pull request: a section per result with its tables,
// then one Testing Checklist with a row per result.
func WriteMarkdown(w io.Writer, results ...*Result) error {
	var b bytes.Buffer
	for _, r := range results {
		if err := writeMarkdownResult(&b, r); err != nil {
			return err
		}
	}
	b.WriteString("#### Testing Checklist\n\n")
	checklist := Table{Columns: ChecklistColumns}
	for _, r := range results {
		checklist.AddRow(r.ChecklistRow()...)
	}
	if err := writeMarkdownTable(&b, &checklist, checklistCommandColumn); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

func writeMarkdownResult(b *bytes.Buffer, r *Result) error {
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
		if err := writeMarkdownTable(b, t, -1); err != nil {
			return err
		}
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
	return nil
}

// writeMarkdownTable writes t as a GitHub pipe table through tablewriter's
// Markdown renderer, columns padded so that the raw text reads as a table
// too. The cells of column code (-1: none) are code spans. Long cells of a
// note column are replaced by a reference such as "[2]" and listed, whole,
// below the table; equal texts share one number.
func writeMarkdownTable(b *bytes.Buffer, t *Table, code int) error {
	header, rows := t.grid()
	if len(header) == 0 {
		return nil
	}
	var notes []string
	for i, h := range header {
		isNote := slices.Contains(noteColumns, strings.ToLower(strings.TrimSpace(h)))
		for _, row := range rows {
			cell := oneLine(row[i])
			switch {
			case isNote && utf8.RuneCountInString(cell) > noteCellLimit:
				n := slices.Index(notes, cell)
				if n < 0 {
					notes = append(notes, cell)
					n = len(notes) - 1
				}
				cell = fmt.Sprintf("[%d]", n+1)
			case i == code && cell != "":
				cell = mdCode(cell)
			}
			row[i] = mdCell(cell)
		}
		header[i] = mdCell(h)
	}
	var out bytes.Buffer
	table := tablewriter.NewTable(&out,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	)
	table.Header(toAny(header)...)
	if err := table.Bulk(rows); err != nil {
		return fmt.Errorf("table %q: %w", t.Title, err)
	}
	if err := table.Render(); err != nil {
		return fmt.Errorf("table %q: %w", t.Title, err)
	}
	b.Write(out.Bytes())
	b.WriteString("\n")
	if len(notes) > 0 {
		for i, n := range notes {
			fmt.Fprintf(b, "%d. %s\n", i+1, mdInline(n))
		}
		b.WriteString("\n")
	}
	return nil
}

// mdCell makes s safe inside a pipe-table cell: one line, tabs as blanks,
// pipes escaped (GitHub honours the escape inside code spans too).
func mdCell(s string) string {
	s = strings.ReplaceAll(oneLine(s), "\t", " ")
	return strings.ReplaceAll(s, "|", `\|`)
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
