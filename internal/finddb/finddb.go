// Package finddb reads and merges find-dbs in MIOpen's text format (one
// `KEY=Solver:time,workspace,algorithm;...` line per problem) without
// altering a byte it did not change.
//
// A find-db is the user's file, often shared with MIOpen itself, so the
// parser keeps every line as it was read: comments, blank lines, lines and
// items it does not understand, CRLF line ends, a cut-off last line, a
// duplicate key's later line and a duplicate solver item all come back
// unchanged and in place from Bytes. It reads a record as MIOpen does (the
// first line of a key, the first item of a solver id). Merging a record
// adds or updates only the items of the solvers it names, so that MIOpen
// reads what was merged. Store does that on disk, under miotool's lock and
// MIOpen's, keeping the file the user's: its mode, owner and links.
package finddb

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Entry is one solver's result for a problem.
type Entry struct {
	Solver    string
	TimeMs    float64
	Workspace int64
	Algorithm string
}

// Item is the entry in MIOpen's format, `Solver:time,workspace,algorithm`.
// Times use six significant digits, as iostream's default precision prints
// them.
func (e Entry) Item() string {
	return fmt.Sprintf("%s:%s,%d,%s", e.Solver, strconv.FormatFloat(e.TimeMs, 'g', 6, 64), e.Workspace, e.Algorithm)
}

// Record is the entries stored for one problem key.
type Record struct {
	Key     string
	Entries []Entry
}

// Sorted returns the entries fastest first (ties by solver name, so the
// order is deterministic; MIOpen's file order is hash-map order).
func (r Record) Sorted() []Entry {
	out := append([]Entry(nil), r.Entries...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TimeMs != out[j].TimeMs {
			return out[i].TimeMs < out[j].TimeMs
		}
		return out[i].Solver < out[j].Solver
	})
	return out
}

// Line is the record in MIOpen's format, without the line end.
func (r Record) Line() string {
	items := make([]string, len(r.Entries))
	for i, e := range r.Entries {
		items[i] = e.Item()
	}
	return r.Key + "=" + strings.Join(items, ";")
}

// Warning is something in the file that miotool does not use, and keeps.
type Warning struct {
	Path string
	Line int
	Msg  string
	// item is the malformed item a warning is about ("" for others), so a
	// merge that replaces it can drop the warning.
	item string
}

func (w Warning) String() string {
	if w.Line == 0 { // about the whole file
		return fmt.Sprintf("%s: %s", filepath.Base(w.Path), w.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", filepath.Base(w.Path), w.Line, w.Msg)
}

// item is one ';'-separated item of a record line: its text as read, its
// solver id (the text before the first ':') and, for the first item of
// its id, the entry when it parses. MIOpen reads only the first item of an
// id, whether or not it can use it, so a later item of the same id is
// never read, by MIOpen or by miotool.
type item struct {
	raw   string
	id    string
	first bool // the first item of id on its line (no id: false)
	entry *Entry
}

// newItem is the item MIOpen's format gives e.
func newItem(e Entry) item {
	return item{raw: e.Item(), id: e.Solver, first: true, entry: &e}
}

// line is one line of the file: its text without the line end, the line
// end itself ("\n", "\r\n", or "" for a last line cut off before its
// newline), and, for a record line, its key and items.
type line struct {
	text  string
	eol   string
	key   string
	items []item // nil unless the line is KEY=...
}

// DB is a find-db in memory: every line of the file, in order, and the
// first line of each key (the one MIOpen reads).
type DB struct {
	Path     string
	lines    []*line
	byKey    map[string]int
	keys     []string // in order of their first line
	Warnings []Warning
}

// Parse reads a find-db's bytes. It never fails: what it does not
// understand it keeps, with a warning, and Bytes gives data back exactly.
func Parse(path string, data []byte) *DB {
	db := &DB{Path: path, byKey: map[string]int{}}
	for n := 1; len(data) > 0; n++ {
		l := &line{}
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l.text, l.eol, data = string(data[:i]), "\n", data[i+1:]
			if strings.HasSuffix(l.text, "\r") {
				l.text, l.eol = l.text[:len(l.text)-1], "\r\n"
			}
		} else {
			l.text, data = string(data), nil
		}
		db.add(n, l)
	}
	return db
}

// add classifies a parsed line and records what miotool will not use.
func (db *DB) add(n int, l *line) {
	db.lines = append(db.lines, l)
	warn := func(format string, args ...any) {
		db.Warnings = append(db.Warnings, Warning{Path: db.Path, Line: n, Msg: fmt.Sprintf(format, args...)})
	}
	if l.eol == "" {
		warn("last line has no line end (cut off?); kept as it is")
	}
	key, content, ok := strings.Cut(l.text, "=")
	trimmed := strings.TrimSpace(l.text)
	switch {
	case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		return
	case !ok || key == "":
		warn("not a KEY=... record; kept as it is")
		return
	}
	l.key = key
	firstOf := map[string]int{} // id -> index of its first item
	for _, raw := range strings.Split(content, ";") {
		it := item{raw: raw}
		id, _, hasID := strings.Cut(raw, ":")
		j, seen := firstOf[id]
		switch {
		case raw == "":
		case hasID && seen && l.items[j].entry == nil:
			it.id = id
			warn("solver %s appears again for %s; MIOpen reads only the first item, which is not understood, so neither is used; both are kept", show(id), show(key))
		case hasID && seen:
			it.id = id
			warn("solver %s appears again for %s; the first is used (as MIOpen reads it), both are kept", show(id), show(key))
		default:
			if hasID {
				it.id, it.first = id, true
				firstOf[id] = len(l.items)
			}
			e, err := ParseItem(raw)
			if err != nil {
				warn("item %q of %s not understood (%v); kept as it is", clip(raw), show(key), err)
				db.Warnings[len(db.Warnings)-1].item = raw
			} else {
				it.entry = &e
			}
		}
		l.items = append(l.items, it)
	}
	if first, dup := db.byKey[key]; dup {
		warn("key %s is also on line %d; that line is used (as MIOpen reads the first), both are kept", show(key), first+1)
		return
	}
	db.byKey[key] = len(db.lines) - 1
	db.keys = append(db.keys, key)
	if len(recordOf(l).Entries) == 0 {
		warn("record %s has no usable entries", show(key))
	}
}

// clip shortens a long item for a warning.
func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// show is s for a warning: as it is when printable ASCII, else quoted.
func show(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return strconv.Quote(clip(s))
		}
	}
	return clip(s)
}

// ParseItem reads one `Solver:time,workspace,algorithm` item.
func ParseItem(raw string) (Entry, error) {
	id, vals, ok := strings.Cut(raw, ":")
	if !ok || id == "" {
		return Entry{}, fmt.Errorf("no solver id")
	}
	f := strings.Split(vals, ",")
	if len(f) != 3 {
		return Entry{}, fmt.Errorf("want time,workspace,algorithm, got %d fields", len(f))
	}
	t, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !decimal(f[0]) || t < 0 {
		return Entry{}, fmt.Errorf("bad time %q", clip(f[0]))
	}
	ws, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || !digits(f[1]) {
		return Entry{}, fmt.Errorf("bad workspace %q", clip(f[1]))
	}
	if f[2] == "" {
		return Entry{}, fmt.Errorf("empty algorithm")
	}
	return Entry{Solver: id, TimeMs: t, Workspace: ws, Algorithm: f[2]}, nil
}

// decimal reports whether s is written as iostream writes a float (no
// hex, infinities, NaN or digit separators, which ParseFloat accepts).
func decimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789.eE+-", rune(s[i])) {
			return false
		}
	}
	return s != ""
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func recordOf(l *line) Record {
	r := Record{Key: l.key}
	for _, it := range l.items {
		if it.entry != nil {
			r.Entries = append(r.Entries, *it.entry)
		}
	}
	return r
}

// Len is the number of distinct keys.
func (db *DB) Len() int { return len(db.keys) }

// Lines is the number of lines in the file.
func (db *DB) Lines() int { return len(db.lines) }

// Records returns each key's record (its first line), in file order.
func (db *DB) Records() []Record {
	out := make([]Record, len(db.keys))
	for i, k := range db.keys {
		out[i] = recordOf(db.lines[db.byKey[k]])
	}
	return out
}

// Lookup returns the record as MIOpen reads it: on key's first line, the
// first item of each solver id, where miotool understands it (a malformed
// first item hides the solver's later ones, as in MIOpen). A key whose
// line holds none is still found, with no entries.
func (db *DB) Lookup(key string) (Record, bool) {
	i, ok := db.byKey[key]
	if !ok {
		return Record{}, false
	}
	return recordOf(db.lines[i]), true
}

// Replaced is an item Merge replaced because MIOpen cannot read it: the
// first item of a solver's id on the key's line, malformed. MIOpen reads
// only the first item of an id, so a new item appended after it would
// never be read.
type Replaced struct {
	Key string
	// Line is the line's number in the file as read (1-based).
	Line     int
	Old, New string
}

func (r Replaced) String() string {
	return fmt.Sprintf("replaced the malformed item %q of %s (line %d) with %q", clip(r.Old), show(r.Key), r.Line, r.New)
}

// Merge adds rec's entries to the first line of rec.Key as MIOpen will
// read them: the first item of each solver rec names is replaced in
// place (a malformed one too, reported in replaced), a solver with no item
// is appended, and every other item keeps its bytes. A key with no line
// gets a new last line, in the file's line-end style. changed reports
// whether anything changed.
func (db *DB) Merge(rec Record) (changed bool, replaced []Replaced) {
	if len(rec.Entries) == 0 {
		return false, nil
	}
	if db.byKey == nil {
		db.byKey = map[string]int{}
	}
	i, ok := db.byKey[rec.Key]
	if !ok {
		db.appendLine(rec)
		return true, nil
	}
	l := db.lines[i]
	for _, e := range rec.Entries {
		it := newItem(e)
		if j := firstItem(l.items, e.Solver); j >= 0 {
			if old := l.items[j]; old.raw != it.raw {
				if old.entry == nil {
					replaced = append(replaced, Replaced{Key: rec.Key, Line: i + 1, Old: old.raw, New: it.raw})
				}
				l.items[j], changed = it, true
			}
			continue
		}
		changed = true
		switch n := len(l.items); {
		case n == 1 && l.items[0].raw == "": // KEY= with nothing after it
			l.items[0] = it
		case l.items[n-1].raw == "": // keep a trailing ';' trailing
			l.items = append(l.items[:n-1], it, l.items[n-1])
		default:
			l.items = append(l.items, it)
		}
	}
	if changed {
		raws := make([]string, len(l.items))
		for j, it := range l.items {
			raws[j] = it.raw
		}
		l.text = l.key + "=" + strings.Join(raws, ";")
	}
	return changed, replaced
}

// firstItem is the index of the first item of solver's id, the one MIOpen
// reads, or -1.
func firstItem(items []item, solver string) int {
	for j, it := range items {
		if it.first && it.id == solver {
			return j
		}
	}
	return -1
}

func (db *DB) appendLine(rec Record) {
	eol := "\n"
	for j := len(db.lines) - 1; j >= 0; j-- {
		if db.lines[j].eol != "" {
			eol = db.lines[j].eol
			break
		}
	}
	if n := len(db.lines); n > 0 && db.lines[n-1].eol == "" {
		db.lines[n-1].eol = eol
	}
	l := &line{text: rec.Line(), eol: eol, key: rec.Key}
	for _, e := range rec.Entries {
		l.items = append(l.items, newItem(e))
	}
	db.byKey[rec.Key] = len(db.lines)
	db.keys = append(db.keys, rec.Key)
	db.lines = append(db.lines, l)
}

// Bytes is the file: every line as read, except what Merge changed.
func (db *DB) Bytes() []byte {
	var b bytes.Buffer
	for _, l := range db.lines {
		b.WriteString(l.text)
		b.WriteString(l.eol)
	}
	return b.Bytes()
}

// Summary is at most max warnings as strings, then how many more there are.
func Summary(warns []Warning, max int) []string {
	var out []string
	for i, w := range warns {
		if i == max {
			out = append(out, fmt.Sprintf("%s: %d more lines or items kept but not used", filepath.Base(w.Path), len(warns)-max))
			break
		}
		out = append(out, w.String())
	}
	return out
}

// Basename is MIOpen's db base name for a device: the arch, then "_" and
// the decimal CU count when it is at most 64, else the CU count in hex with
// no separator (gfx942 with 304 CUs is gfx942130).
func Basename(arch string, computeUnits int) string {
	if computeUnits <= 64 {
		return fmt.Sprintf("%s_%d", arch, computeUnits)
	}
	return fmt.Sprintf("%s%x", arch, computeUnits)
}

// UserFile is the user find-db's path in dir for a device and backend.
func UserFile(dir, arch string, computeUnits int, backend string) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%s.ufdb.txt", Basename(arch, computeUnits), strings.ToUpper(backend)))
}
