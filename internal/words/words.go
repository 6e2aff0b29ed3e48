// Package words holds the few pieces of wording every renderer in miotool
// shares: a noun that agrees with its count, a text folded onto one line,
// the tail of a process's output, and the median of sorted figures.
package words

import (
	"fmt"
	"strings"
)

// Plural is one when n is 1 and many otherwise: Plural(n, "run", "runs").
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count is n followed by its noun: "1 entry", "3 entries".
func Count(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, Plural(n, one, many))
}

// OneLine folds s onto one line: a text without line breaks is returned
// as it is, one with them has its fields joined by single spaces, so that
// a table cell or a list item stays one line.
func OneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// LastLines is the last n lines of s that are not blank, each without its
// line end (indentation kept), joined by newlines: the tail of a child's
// output worth showing.
func LastLines(s string, n int) string {
	var keep []string
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			keep = append(keep, strings.TrimRight(line, "\r\n"))
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "\n")
}

// Median is the middle of sorted figures (the mean of the two middle ones
// for an even count); sorted must not be empty.
func Median[T ~int64 | ~float64](sorted []T) T {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
