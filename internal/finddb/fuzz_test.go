package finddb

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/testutil"
)

// seedLines adds every line of the real MIOpen find-db (when the reference
// data is there) and the garbage lines to f's corpus.
func seedLines(f *testing.F) {
	f.Helper()
	// Without the reference data the fuzz test still runs, on the rest.
	path := filepath.Join(testutil.ModuleRoot(f), "..", "shared", "miopen-db", "gfx942130.HIP.fdb.txt")
	if data, err := os.ReadFile(path); err != nil {
		f.Logf("not seeded with the real find-db: %v", err)
	} else {
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			f.Add(l)
		}
	}
	for _, g := range garbage {
		f.Add(g)
	}
	f.Add("k=A:1,0,x\r")
	f.Add("k=A:1,0,x;A:2,0,y;;")
}

// Parsing a line and writing it back gives the line, whatever it holds,
// and merging a record into it changes only that key's items.
func FuzzParseLine(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, l string) {
		for _, in := range []string{l, l + "\n", l + "\r\n"} {
			db := Parse("f", []byte(in))
			if got := db.Bytes(); string(got) != in {
				t.Fatalf("parse -> write of %q gave %q", in, got)
			}
			for _, r := range db.Records() {
				if _, ok := db.Lookup(r.Key); !ok {
					t.Fatalf("record %q not found by its key", r.Key)
				}
			}
		}
		db := Parse("f", []byte(l+"\n"))
		key, _, _ := strings.Cut(l, "=")
		if _, ok := db.Lookup(key); !ok {
			key = "k" // the line is not a record: append one
		}
		before := db.Records()
		_, _ = db.Merge(Record{Key: key, Entries: []Entry{{"Fuzz", 1, 0, "a"}}})
		again := Parse("f", db.Bytes())
		if r, ok := again.Lookup(key); !ok || indexOfEntry(r.Entries, "Fuzz") < 0 {
			t.Fatalf("merged entry lost: %q", db.Bytes())
		}
		for _, r := range before {
			if r.Key == key {
				continue
			}
			if got, _ := again.Lookup(r.Key); len(got.Entries) != len(r.Entries) {
				t.Fatalf("another key changed: %q", db.Bytes())
			}
		}
	})
}

// A whole file, newlines and all, comes back byte for byte.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("a=X:1,0,x\r\n\n#c\nb=\x00\xff;;:\ncut"))
	f.Add([]byte("\r\r\n\n\r"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got := Parse("f", data).Bytes(); !bytes.Equal(got, data) {
			t.Fatalf("parse -> write of %q gave %q", data, got)
		}
	})
}

func indexOfEntry(es []Entry, solver string) int {
	for i, e := range es {
		if e.Solver == solver {
			return i
		}
	}
	return -1
}
