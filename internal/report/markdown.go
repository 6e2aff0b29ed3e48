package report

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"miotool/internal/words"
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
			cell := words.OneLine(row[i])
			switch {
			case isNote && utf8.RuneCountInString(cell) > noteCellLimit:
				n := slices.Index(notes, cell)
				if n < 0 {
					notes = append(notes, cell)
					n = len(notes) - 1
				}
				row[i] = fmt.Sprintf("[%d]", n+1) // our own reference: not escaped
				continue
			case i == code && cell != "":
				row[i] = mdCodeCell(cell)
				continue
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

// mdCell is text from a user or a program as a pipe-table cell: one line,
// control characters gone, and every character that could open
// emphasis, a link, an HTML tag, an entity, code, math or strikethrough
// escaped, pipes too (GitHub splits cells at every unescaped pipe).
func mdCell(s string) string {
	s = strings.TrimSpace(mdPlain(s))
	var b strings.Builder
	rs := []rune(s)
	alnum := func(i int) bool {
		return i >= 0 && i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]))
	}
	for i, r := range rs {
		switch r {
		case '\\', '`', '*', '<', '|', '~', '$':
			b.WriteByte('\\')
		case '[':
			// Brackets make a link, an image or a footnote only before
			// "](" or "][", and a link definition before "]:" at the
			// start; a bracket that opens none stays as typed
			// ([GPU_MAX_HW_QUEUES=3]).
			if opensLink(rs[i+1:], i == 0) {
				b.WriteByte('\\')
			}
		case '_':
			// A run of underscores inside a word opens and closes
			// nothing (GPU_MAX_HW_QUEUES); elsewhere it may.
			j, k := i, i
			for j > 0 && rs[j-1] == '_' {
				j--
			}
			for k+1 < len(rs) && rs[k+1] == '_' {
				k++
			}
			if !alnum(j-1) || !alnum(k+1) {
				b.WriteByte('\\')
			}
		case '&':
			// Only what reads as an entity (&amp; &#38;) needs it.
			if i+1 < len(rs) && (rs[i+1] == '#' || unicode.IsLetter(rs[i+1]) || unicode.IsDigit(rs[i+1])) {
				b.WriteByte('\\')
			}
		}
		b.WriteRune(r)
	}
	return unlinkEscaped(s, b.String())
}

// unlinkEscaped keeps GitHub's autolinks from swallowing escapes: a URL
// ("https://...", "www....") becomes a link of its raw characters,
// backslashes included, so a URL that needed escaping has its link's
// trigger escaped instead ("https\://", "www\."), and reads as text. A
// URL that needed none stays a link.
func unlinkEscaped(plain, escaped string) string {
	words, escWords := strings.Split(plain, " "), strings.Split(escaped, " ")
	if len(words) != len(escWords) {
		return escaped // escaping adds backslashes only; never here
	}
	for i, w := range words {
		if w == escWords[i] {
			continue
		}
		switch {
		case strings.Contains(w, "://"):
			escWords[i] = strings.Replace(escWords[i], "://", `\://`, 1)
		case strings.Contains(w, "www."):
			escWords[i] = strings.Replace(escWords[i], "www.", `www\.`, 1)
		}
	}
	return strings.Join(escWords, " ")
}

// opensLink reports whether a "]" followed by "(" or "[" (or ":", for a
// bracket at the start) comes in rest.
func opensLink(rest []rune, atStart bool) bool {
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] == ']' && (rest[i+1] == '(' || rest[i+1] == '[' || atStart && rest[i+1] == ':') {
			return true
		}
	}
	return false
}

// mdCodeCell is a code span in a pipe-table cell: its pipes escaped, which
// the table reads as the cell's own (GitHub drops the backslash before
// the code span is read).
func mdCodeCell(s string) string { return strings.ReplaceAll(mdCode(s), "|", `\|`) }

// mdInline is text from a user or a program as inline Markdown that
// renders as that text: mdCell's escaping, and a start that would make
// the line a block of its own (a list item, a heading, a quote, a rule)
// escaped, so that it serves a paragraph, a list item and a heading.
func mdInline(s string) string { return escapeBlockStart(mdCell(s)) }

// escapeBlockStart escapes a first character that would make a line a
// list item ("- x", "+ x", "1. x", "2) x") or its check box ("[ ] x"), a
// heading ("# x"), a quote ("> x"), a thematic break ("---") or a setext
// underline ("===").
func escapeBlockStart(s string) string {
	if s == "" {
		return s
	}
	spaceAt := func(i int) bool { return i >= len(s) || s[i] == ' ' }
	only := func(c byte) bool { return strings.Trim(s, string(c)+" ") == "" }
	switch c := s[0]; {
	case c == '>',
		(c == '-' || c == '+') && spaceAt(1),
		c == '-' && only('-'),
		c == '=' && only('='):
		return `\` + s
	case c == '[' && len(s) >= 3 && strings.ContainsRune(" xX", rune(s[1])) && s[2] == ']' && spaceAt(3):
		// A task list item's check box, "- [ ] x".
		return `\` + s
	case c == '#':
		n := len(s) - len(strings.TrimLeft(s, "#"))
		if n <= 6 && spaceAt(n) {
			return `\` + s
		}
		return s
	}
	i := 0
	for i < len(s) && i < 9 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i < len(s) && (s[i] == '.' || s[i] == ')') && spaceAt(i+1) {
		return s[:i] + `\` + s[i:]
	}
	return s
}

// mdCode is s as a code span: one line, control characters gone, and a
// fence longer than any run of backticks in s, padded with a blank where
// s starts or ends with a backtick or with blanks at both ends (a code
// span drops one blank from each end).
func mdCode(s string) string {
	s = mdPlain(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") ||
		(strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ") && strings.TrimSpace(s) != "") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// mdPlain is s on one line with what no renderer shows dropped: a
// terminal's escape sequences (colours) go, tabs become blanks, other
// control characters and invalid UTF-8 become U+FFFD.
func mdPlain(s string) string {
	return controlsOut(words.OneLine(s))
}

// controlsOut drops ANSI escape sequences (ESC [ ... final byte) and
// turns the other control characters, C0, DEL and C1, and invalid UTF-8
// into U+FFFD; tabs become blanks. Line breaks are kept.
func controlsOut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = min(j+1, len(s))
			continue
		case r == '\t':
			b.WriteByte(' ')
		case r == '\n':
			b.WriteByte('\n')
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
