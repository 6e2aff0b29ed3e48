// Package finddb reads and writes find-dbs in MIOpen's text format: one
// `KEY=Solver:time,workspace,algorithm;...` line per problem. It reads
// MIOpen's own system and user find-dbs and writes miotool's user find-db
// atomically, under a lock, without losing valid records of a damaged file.
package finddb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Entry is one solver's result for a problem.
type Entry struct {
	Solver    string
	TimeMs    float64
	Workspace int64
	Algorithm string
}

// Record is every entry stored for one problem key.
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

// Line is the record in MIOpen's format, without the newline. Times use
// six significant digits, as iostream's default precision prints them.
func (r Record) Line() string {
	var b strings.Builder
	b.WriteString(r.Key)
	b.WriteByte('=')
	for i, e := range r.Entries {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, "%s:%s,%d,%s", e.Solver, strconv.FormatFloat(e.TimeMs, 'g', 6, 64), e.Workspace, e.Algorithm)
	}
	return b.String()
}

// Warning is a line that could not be used.
type Warning struct {
	Path string
	Line int
	Msg  string
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s", w.Path, w.Line, w.Msg) }

// DB is a find-db loaded in memory: records in file order, by key.
type DB struct {
	Path     string
	records  []Record
	byKey    map[string]int
	Warnings []Warning
}

// Parse reads a find-db. Ill-formed lines are skipped with a warning naming
// them; items within a line that do not parse are skipped the same way;
// duplicate solver ids keep the first; a later line for the same key
// replaces the earlier one (as a rewritten file would have it).
func Parse(path string, r io.Reader) (*DB, error) {
	db := &DB{Path: path, byKey: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		rec, warns := parseLine(line)
		for _, w := range warns {
			db.Warnings = append(db.Warnings, Warning{path, n, w})
		}
		if rec == nil {
			continue
		}
		if i, ok := db.byKey[rec.Key]; ok {
			db.records[i] = *rec
			continue
		}
		db.byKey[rec.Key] = len(db.records)
		db.records = append(db.records, *rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return db, nil
}

func parseLine(line string) (*Record, []string) {
	key, content, ok := strings.Cut(line, "=")
	if !ok || key == "" {
		return nil, []string{"ill-formed record (no KEY=...), skipped"}
	}
	rec := &Record{Key: key}
	var warns []string
	seen := map[string]bool{}
	for _, item := range strings.Split(content, ";") {
		if item == "" {
			continue
		}
		id, vals, ok := strings.Cut(item, ":")
		if !ok || id == "" {
			warns = append(warns, fmt.Sprintf("item %q of %s has no solver id, skipped", item, key))
			continue
		}
		e, err := parseValues(id, vals)
		if err != nil {
			warns = append(warns, fmt.Sprintf("item %q of %s: %v, skipped", id, key, err))
			continue
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		rec.Entries = append(rec.Entries, e)
	}
	if len(rec.Entries) == 0 {
		return nil, append(warns, fmt.Sprintf("record %s has no usable entries, skipped", key))
	}
	return rec, warns
}

func parseValues(id, vals string) (Entry, error) {
	f := strings.Split(vals, ",")
	if len(f) != 3 {
		return Entry{}, fmt.Errorf("want time,workspace,algorithm, got %d fields", len(f))
	}
	t, err := strconv.ParseFloat(f[0], 64)
	if err != nil || t < 0 {
		return Entry{}, fmt.Errorf("bad time %q", f[0])
	}
	ws, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || ws < 0 {
		return Entry{}, fmt.Errorf("bad workspace %q", f[1])
	}
	if f[2] == "" {
		return Entry{}, errors.New("empty algorithm")
	}
	return Entry{Solver: id, TimeMs: t, Workspace: ws, Algorithm: f[2]}, nil
}

// Load reads the find-db at path; a missing file is an empty db.
func Load(path string) (*DB, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &DB{Path: path, byKey: map[string]int{}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Len is the number of records.
func (db *DB) Len() int { return len(db.records) }

// Records returns every record in file order.
func (db *DB) Records() []Record { return append([]Record(nil), db.records...) }

// Lookup returns the record for key.
func (db *DB) Lookup(key string) (Record, bool) {
	i, ok := db.byKey[key]
	if !ok {
		return Record{}, false
	}
	return db.records[i], true
}

// Store replaces (or appends) the record for rec.Key in memory.
func (db *DB) Store(rec Record) {
	if db.byKey == nil {
		db.byKey = map[string]int{}
	}
	if i, ok := db.byKey[rec.Key]; ok {
		db.records[i] = rec
		return
	}
	db.byKey[rec.Key] = len(db.records)
	db.records = append(db.records, rec)
}

// Bytes serializes the db, one line per record.
func (db *DB) Bytes() []byte {
	var b bytes.Buffer
	for _, r := range db.records {
		b.WriteString(r.Line())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// StoreFile writes rec into the find-db at path: under an exclusive lock it
// re-reads the file, replaces the record's line and renames a complete
// temporary file over the original, so a crash leaves either the old or the
// new file and concurrent writers do not lose each other's records. Lines
// of the old file that did not parse are dropped, and reported.
func StoreFile(path string, rec Record, lockTimeout time.Duration) ([]Warning, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create find-db folder: %w", err)
	}
	unlock, err := lockFile(path+".lock", lockTimeout)
	if err != nil {
		return nil, err
	}
	defer unlock()
	db, err := Load(path)
	if err != nil {
		return nil, err
	}
	db.Store(rec)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return db.Warnings, fmt.Errorf("write find-db: %w", err)
	}
	_, werr := tmp.Write(db.Bytes())
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return db.Warnings, fmt.Errorf("write find-db %s: %w", path, werr)
	}
	return db.Warnings, nil
}

// lockFile takes an exclusive advisory lock, retrying until timeout.
func lockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("find-db lock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("find-db lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
