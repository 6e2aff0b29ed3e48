package rules

import (
	"fmt"
	"slices"
	"strings"
)

// FoldOptions tune Fold.
type FoldOptions struct {
	// Basis, when set, is the basis of every cell Fold adds (a simulator
	// run written as expectations says "measured"; a table read from a
	// runtime's source is "source").
	Basis Basis
	// Note, when set, is the note of every cell Fold adds.
	Note string
	// Source, when set, is the clause base's source gains, in place of
	// "cells of <actions> from <add's source>".
	Source string
	// Replace lets a cell of add whose codes differ from base's replace it;
	// without it such a cell is an error.
	Replace bool
}

// Folded is what Fold did.
type Folded struct {
	// Added are the cells base lacked; Replaced those whose codes add
	// changed (only with FoldOptions.Replace); Kept counts the cells both
	// held with the same codes, which keep base's basis and note.
	Added    []CellKey
	Replaced []Difference
	Kept     int
	// Actions are the actions of the added and replaced cells, in table
	// order.
	Actions []Action
}

// Fold adds the cells of add to base, as a committed expectation file
// takes the cells of a newer measurement: what base lacks is added, what
// both hold must agree (or, with Replace, add's values win). base's
// dialect, device and header stay; its source gains a clause naming the
// actions folded in and add's own source. Neither input changes.
func Fold(base, add *Expectation, opts FoldOptions) (*Expectation, Folded, error) {
	var f Folded
	if base.Dialect != add.Dialect {
		return nil, f, fmt.Errorf("%s is for dialect %s, %s for %s: fold cells of one dialect", add.Name, add.Dialect, base.Name, base.Dialect)
	}
	if opts.Basis != "" && !slices.Contains(bases, opts.Basis) {
		return nil, f, fmt.Errorf("basis %q: want measured, reported, source, documented or inferred", opts.Basis)
	}
	out := &Expectation{Name: base.Name, Dialect: base.Dialect, Device: base.Device, Source: base.Source, Cells: map[CellKey]Expected{}}
	for k, v := range base.Cells {
		out.Cells[k] = v
	}
	var conflicts []string
	touched := map[Action]bool{}
	for _, k := range orderedKeys(add.Cells) {
		got := add.Cells[k]
		got.Line = 0
		if opts.Basis != "" {
			got.Basis = opts.Basis
		}
		if opts.Note != "" {
			got.Note = opts.Note
		}
		had, ok := base.Cells[k]
		switch {
		case !ok:
			f.Added = append(f.Added, k)
		case had.Returns == got.Returns && had.End == got.End:
			f.Kept++
			continue
		case !opts.Replace:
			conflicts = append(conflicts, fmt.Sprintf("%s (line %d of %s: %d/%d; %s: %d/%d)",
				k, had.Line, base.Name, int(had.Returns), int(had.End), add.Name, int(got.Returns), int(got.End)))
			continue
		default:
			f.Replaced = append(f.Replaced, Difference{Key: k, Got: Outcome{Key: k, Returns: got.Returns, End: got.End}, Want: had})
		}
		out.Cells[k] = got
		touched[k.Action] = true
	}
	if len(conflicts) > 0 {
		return nil, f, fmt.Errorf("%d cells of %s differ from %s (fold with replacing to take the new values): %s",
			len(conflicts), add.Name, base.Name, strings.Join(conflicts, "; "))
	}
	for _, a := range Actions {
		if touched[a] {
			f.Actions = append(f.Actions, a)
		}
	}
	if len(f.Actions) > 0 {
		names := make([]string, len(f.Actions))
		for i, a := range f.Actions {
			names[i] = string(a)
		}
		clause := fmt.Sprintf("cells of %s from %s", strings.Join(names, ", "), orDash(add.Source))
		if opts.Source != "" {
			clause = opts.Source
		}
		if out.Source == "" {
			out.Source = clause
		} else {
			out.Source += "; " + clause
		}
	}
	return out, f, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
