package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Format is an output format.
type Format string

// The output formats.
const (
	Text     Format = "text"
	Markdown Format = "markdown"
	JSON     Format = "json"
)

// Formats lists the formats in the order help text shows them.
var Formats = []Format{Text, Markdown, JSON}

// ParseFormat accepts text, markdown (or md) and json.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "text":
		return Text, nil
	case "markdown", "md":
		return Markdown, nil
	case "json":
		return JSON, nil
	}
	return "", fmt.Errorf("unknown format %q (want text, markdown or json)", s)
}

// Options tune the text renderer for its destination.
type Options struct {
	// TTY draws bordered tables for a terminal; otherwise tables are plain
	// space-aligned columns that tools such as grep and awk handle well.
	TTY bool
	// Color colours the verdict (only used with TTY).
	Color bool
}

// Render writes r in the given format.
func Render(w io.Writer, f Format, r *Result, opts Options) error {
	switch f {
	case Text, "":
		return WriteText(w, r, opts)
	case Markdown:
		return WriteMarkdown(w, r)
	case JSON:
		return WriteJSON(w, r)
	}
	return fmt.Errorf("unknown format %q (want text, markdown or json)", string(f))
}

// durationText prints a duration rounded for people: 812µs, 43ms, 7.31s, 2m5s.
func durationText(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s < 0.001:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1e3)
	case s < 60:
		return fmt.Sprintf("%.2fs", s)
	}
	m := int(s / 60)
	return fmt.Sprintf("%dm%.0fs", m, s-float64(m*60))
}
