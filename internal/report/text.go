package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"miotool/internal/words"
)

// ANSI colours for the verdict on a terminal.
var verdictColor = map[Verdict]string{
	Pass:  "\x1b[1;32m",
	Fail:  "\x1b[1;31m",
	Skip:  "\x1b[1;33m",
	Error: "\x1b[1;35m",
	// Interrupted is a warning, like a skip: nothing failed, nothing passed.
	Interrupted: "\x1b[1;33m",
}

const colorReset = "\x1b[0m"

// WriteText writes r for people: a header, each table, notes and counters.
func WriteText(w io.Writer, r *Result, opts Options) error {
	var b bytes.Buffer
	verdict := string(r.Verdict)
	if opts.TTY && opts.Color {
		if c, ok := verdictColor[r.Verdict]; ok {
			verdict = c + verdict + colorReset
		}
	}
	fmt.Fprintf(&b, "%s: %s", r.Check, verdict)
	if r.Summary != "" {
		fmt.Fprintf(&b, " - %s", r.Summary)
	}
	b.WriteString("\n")
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-9s %s\n", name+":", value)
		}
	}
	field("command", r.Command)
	if r.Backend != "" {
		backend := r.Backend
		if r.BackendReason != "" {
			backend += " (" + r.BackendReason + ")"
		}
		field("backend", backend)
	}
	if r.Device.Description != "" {
		field("device", r.Device.Description)
	} else if r.Device.Name != "" {
		field("device", r.Device.Short())
	}
	if !r.Started.IsZero() {
		field("started", r.Started.Format(time.RFC3339)+", took "+durationText(r.Duration))
	}
	for _, t := range r.Tables {
		b.WriteString("\n")
		if t.Title != "" {
			b.WriteString(t.Title + "\n")
		}
		if err := writeTextTable(&b, t, opts.TTY); err != nil {
			return err
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", words.OneLine(n))
		}
	}
	if len(r.Counters) > 0 {
		parts := make([]string, len(r.Counters))
		for i, c := range r.Counters {
			parts[i] = fmt.Sprintf("%s %d", c.Name, c.Value)
		}
		fmt.Fprintf(&b, "\ncounters: %s\n", strings.Join(parts, ", "))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// writeTextTable draws t with tablewriter: light box lines on a terminal,
// plain space-aligned columns otherwise.
func writeTextTable(w *bytes.Buffer, t *Table, tty bool) error {
	header, rows := t.grid()
	if len(header) == 0 {
		return nil
	}
	for _, row := range rows {
		for i := range row {
			row[i] = words.OneLine(row[i])
		}
	}
	common := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
	}
	var rendition tw.Rendition
	if tty {
		rendition = tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)}
	} else {
		rendition = tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Lines: tw.LinesNone, Separators: tw.SeparatorsNone},
		}
		common = append(common,
			tablewriter.WithTrimSpace(tw.Off),
			tablewriter.WithPadding(tw.Padding{Left: "", Right: "  ", Overwrite: true}))
	}
	var out bytes.Buffer
	table := tablewriter.NewTable(&out, append(common, tablewriter.WithRenderer(renderer.NewBlueprint(rendition)))...)
	table.Header(toAny(header)...)
	if err := table.Bulk(rows); err != nil {
		return fmt.Errorf("table %q: %w", t.Title, err)
	}
	if err := table.Render(); err != nil {
		return fmt.Errorf("table %q: %w", t.Title, err)
	}
	// The plain layout pads the last column; trailing blanks only make
	// diffs and copy-paste noisy.
	for line := range strings.Lines(out.String()) {
		w.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	return nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
