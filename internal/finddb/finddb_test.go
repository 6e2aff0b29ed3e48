package finddb

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/testutil"
)

// realSample is MIOpen's system find-db for gfx942 with 304 CUs.
func realSample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(testutil.Shared(t, "miopen-db", "gfx942130.HIP.fdb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sharedKey is in the real sample, with four MIOpen solvers and none of
// miotool's.
const sharedKey = "1008-14-14-1x1-192-14-14-16-0x0-1x1-1x1-0-NCHW-FP32-F"

// garbage is what a user's find-db may hold besides records, each kept.
var garbage = []string{
	"# a comment=with an equals sign",
	"",
	"   ",
	"KEY=",
	"k1=A:notatime,0,algo;B:2,0,algoB",
	"k2=A:1,0;B:0.0516391234,16,algoB",
	"k3=A:1,0,x;A:9,0,y",
	"\x00\xff\xfebinary=\x01:\x02",
	"=no key",
	"no equals sign at all",
	"k4=A:1,0,x;;B:2,0,y;",
	"k5=A:0x1p-2,0,x;B:inf,0,y;C:1,-1,z;D:1,0,",
	sharedKey + "=Mine:1,0,dup-key-line-is-kept",
}

// withGarbage interleaves garbage lines into data (one every 700 lines),
// makes one line CRLF and cuts the last line off before its newline.
func withGarbage(data []byte) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	var b strings.Builder
	g := 0
	for i, l := range lines {
		if i%700 == 0 && g < len(garbage) {
			b.WriteString(garbage[g] + "\n")
			g++
		}
		if i == 5 {
			l = strings.TrimSuffix(l, "\n") + "\r\n"
		}
		b.WriteString(l)
	}
	for ; g < len(garbage); g++ {
		b.WriteString(garbage[g] + "\n")
	}
	b.WriteString("cut-off=Solver:0.12,0,miopenConvolutionFwdAlgoGEMM;Other:0.1")
	return []byte(b.String())
}

func TestParseRealSystemFindDB(t *testing.T) {
	raw := realSample(t)
	db := Parse("gfx942130.HIP.fdb.txt", raw)
	if db.Len() != 9600 || db.Lines() != 9600 {
		t.Fatalf("keys = %d, lines = %d, want 9600 each", db.Len(), db.Lines())
	}
	if len(db.Warnings) != 0 {
		t.Fatalf("unexpected warnings on a valid file: %v", db.Warnings[:min(3, len(db.Warnings))])
	}
	rec, ok := db.Lookup("1000-13-13-1x1-512-13-13-16-0x0-1x1-1x1-0-NCHW-FP32-B")
	if !ok {
		t.Fatal("known key missing")
	}
	best := rec.Sorted()[0]
	if best.Solver != "GemmBwd1x1_stride1" || best.TimeMs != 0.06515 || best.Algorithm != "miopenConvolutionBwdDataAlgoGEMM" {
		t.Fatalf("best = %+v", best)
	}
	if !bytes.Equal(db.Bytes(), raw) {
		t.Fatal("the real find-db does not round-trip byte for byte")
	}
}

// The user's file comes back byte for byte, garbage and all, and a merge
// changes only the line of the key it writes, or appends one.
func TestRoundTripWithGarbageKeepsEveryByte(t *testing.T) {
	orig := withGarbage(realSample(t))
	db := Parse("u.ufdb.txt", orig)
	if got := db.Bytes(); !bytes.Equal(got, orig) {
		t.Fatalf("parse -> write is not the identity (%d bytes in, %d out)", len(orig), len(got))
	}
	if len(db.Warnings) < len(garbage)-3 {
		t.Errorf("only %d warnings for %d garbage lines: %v", len(db.Warnings), len(garbage), db.Warnings)
	}

	// A new key: the original bytes, a newline after the cut-off line, the
	// new line.
	added := Record{Key: "1-2-2-1x1-1-2-2-1-0x0-1x1-1x1-0-NCHW-FP32-F", Entries: []Entry{{"GemmFwd1x1Tiled", 0.25, 0, "miopenConvolutionFwdAlgoGEMM"}}}
	if changed, _ := db.Merge(added); !changed {
		t.Fatal("merging a new key changed nothing")
	}
	want := string(orig) + "\n" + added.Line() + "\n"
	if got := string(db.Bytes()); got != want {
		t.Fatalf("after appending, the file is not the original plus one line:\n...%q", got[max(0, len(got)-300):])
	}

	// A key MIOpen already has: MIOpen's four items stay, byte for byte,
	// and in place; miotool's go after them; the later duplicate line of
	// the key is untouched.
	before := db.Bytes()
	mine := Record{Key: sharedKey, Entries: []Entry{{"ConvImplicitGemmTiledFwd", 1.5, 0, "miopenConvolutionFwdAlgoImplicitGEMM"}}}
	if changed, replaced := db.Merge(mine); !changed || replaced != nil {
		t.Fatalf("merging into a shared key: changed %v, replaced %v", changed, replaced)
	}
	after := db.Bytes()
	a, b := strings.SplitAfter(string(before), "\n"), strings.SplitAfter(string(after), "\n")
	if len(a) != len(b) {
		t.Fatalf("line count changed: %d -> %d", len(a), len(b))
	}
	changed := 0
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		changed++
		if !strings.HasPrefix(a[i], sharedKey+"=") || b[i] != strings.TrimSuffix(a[i], "\n")+";"+mine.Entries[0].Item()+"\n" {
			t.Errorf("line %d:\n was %q\n now %q", i+1, a[i], b[i])
		}
	}
	if changed != 1 {
		t.Fatalf("%d lines changed, want 1", changed)
	}
	rec, _ := Parse("u", after).Lookup(sharedKey)
	if len(rec.Entries) != 5 || rec.Sorted()[0].Solver != "GemmFwd1x1_0_1" {
		t.Fatalf("shared key after the merge: %+v", rec)
	}
}

func TestMergeChangesOnlyItsOwnItems(t *testing.T) {
	mine := Entry{"S", 0.5, 8, "algoS"}
	for _, tt := range []struct {
		name, in, want string
		replaced       string // the item replaced as malformed, "" for none
	}{
		{"new key after a CRLF file", "a=X:1,0,x\r\n", "a=X:1,0,x\r\nk=S:0.5,8,algoS\r\n", ""},
		{"new key after a cut-off line", "a=X:1,0,x", "a=X:1,0,x\nk=S:0.5,8,algoS\n", ""},
		{"empty file", "", "k=S:0.5,8,algoS\n", ""},
		{"own item updated in place, others keep every digit", "k=X:0.0516391234,0,x;S:9,0,old;Y:1e-3,0,y\n", "k=X:0.0516391234,0,x;S:0.5,8,algoS;Y:1e-3,0,y\n", ""},
		{"appended after unknown items", "k=X:1,0,x;junk\r\n", "k=X:1,0,x;junk;S:0.5,8,algoS\r\n", ""},
		{"KEY= gets its first item", "k=\n", "k=S:0.5,8,algoS\n", ""},
		{"a trailing ';' stays trailing", "k=X:1,0,x;\n", "k=X:1,0,x;S:0.5,8,algoS;\n", ""},
		{"duplicate item: the used one changes, the later is kept", "k=S:1,0,a;S:2,0,b\n", "k=S:0.5,8,algoS;S:2,0,b\n", ""},
		// MIOpen reads the first item of an id only: an item appended after
		// a malformed one would never be read.
		{"malformed own item replaced in place", "k=X:1,0,x;S:bad,0,a;Y:2,0,y\n", "k=X:1,0,x;S:0.5,8,algoS;Y:2,0,y\n", "S:bad,0,a"},
		{"malformed own item before a duplicate: the first is replaced", "k=S:bad,0,a;S:2,0,b\r\n", "k=S:0.5,8,algoS;S:2,0,b\r\n", "S:bad,0,a"},
		{"own id with no values replaced", "k=S:\n", "k=S:0.5,8,algoS\n", "S:"},
		{"an item with no id is not the solver's", "k=S\n", "k=S;S:0.5,8,algoS\n", ""},
		{"another solver's malformed item stays", "k=T:bad,0,a\n", "k=T:bad,0,a;S:0.5,8,algoS\n", ""},
		{"duplicate key: the first line changes", "k=X:1,0,x\nk=Y:1,0,y\n", "k=X:1,0,x;S:0.5,8,algoS\nk=Y:1,0,y\n", ""},
		{"comment mentioning the key is not the key", "#k=X:1,0,x\n", "#k=X:1,0,x\nk=S:0.5,8,algoS\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := Parse("u", []byte(tt.in))
			changed, replaced := db.Merge(Record{Key: "k", Entries: []Entry{mine}})
			if got := string(db.Bytes()); got != tt.want || !changed {
				t.Fatalf("got  %q (changed %v)\nwant %q", got, changed, tt.want)
			}
			switch {
			case tt.replaced == "" && len(replaced) != 0:
				t.Fatalf("reported as replaced: %v", replaced)
			case tt.replaced != "" && (len(replaced) != 1 || replaced[0].Old != tt.replaced || replaced[0].New != mine.Item() || replaced[0].Key != "k"):
				t.Fatalf("replaced %+v, want %q -> %q", replaced, tt.replaced, mine.Item())
			case tt.replaced != "" && !strings.HasPrefix(replaced[0].String(), "replaced the malformed item "):
				t.Fatalf("replaced reads %q", replaced[0])
			}
			// What MIOpen reads for S is what was merged.
			if r, _ := Parse("u", db.Bytes()).Lookup("k"); indexOfEntry(r.Entries, "S") < 0 || r.Entries[indexOfEntry(r.Entries, "S")] != mine {
				t.Fatalf("after the merge the reader sees %+v", r.Entries)
			}
		})
	}
	db := Parse("u", []byte("k=S:0.5,8,algoS\n"))
	if changed, _ := db.Merge(Record{Key: "k", Entries: []Entry{mine}}); changed {
		t.Error("merging the same item reported a change")
	}
}

// Duplicate ids are read as MIOpen's DbRecord::ParseContents reads them:
// the first item of an id is the only one, even when it is malformed.
func TestDuplicateIDsAreReadAsMIOpenReadsThem(t *testing.T) {
	for _, tt := range []struct {
		line string
		want string // solver:time of the entries read, in order
	}{
		{"k=A:1,0,x;A:9,0,y", "A:1"},
		{"k=A:bad,0,x;A:9,0,y", ""},
		{"k=A:bad,0,x;B:2,0,y;A:9,0,y", "B:2"},
		{"k=A;A:9,0,y", "A:9"}, // no ':': no id, skipped
		{"k=;;A:3,0,y;A:4,0,y", "A:3"},
	} {
		r, _ := Parse("u", []byte(tt.line+"\n")).Lookup("k")
		var got []string
		for _, e := range r.Entries {
			got = append(got, fmt.Sprintf("%s:%g", e.Solver, e.TimeMs))
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: read %q, want %q", tt.line, got, tt.want)
		}
	}
}

// A malformed item of miotool's own solver on a key MIOpen shares, in the
// real find-db: the merge replaces that item only, and every other byte of
// the file stays.
func TestMalformedOwnItemInTheRealDBIsReplacedInPlace(t *testing.T) {
	raw := realSample(t)
	broken := "ConvImplicitGemmTiledFwd:notanumber,0,miopenConvolutionFwdAlgoImplicitGEMM"
	lines := strings.SplitAfter(string(raw), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, sharedKey+"=") {
			at = i
			lines[i] = sharedKey + "=" + broken + ";" + strings.TrimPrefix(l, sharedKey+"=")
		}
	}
	if at < 0 {
		t.Fatalf("%s not in the real find-db", sharedKey)
	}
	orig := strings.Join(lines, "")
	db := Parse("u", []byte(orig))
	mine := Entry{"ConvImplicitGemmTiledFwd", 1.5, 0, "miopenConvolutionFwdAlgoImplicitGEMM"}
	changed, replaced := db.Merge(Record{Key: sharedKey, Entries: []Entry{mine}})
	if !changed || len(replaced) != 1 || replaced[0].Old != broken || replaced[0].Line != at+1 {
		t.Fatalf("changed %v, replaced %+v; want %q on line %d", changed, replaced, broken, at+1)
	}
	want := strings.Replace(orig, broken, mine.Item(), 1)
	if got := string(db.Bytes()); got != want {
		t.Fatal("the merge changed more than the malformed item")
	}
	rec, _ := Parse("u", db.Bytes()).Lookup(sharedKey)
	if len(rec.Entries) != 5 || rec.Entries[0] != mine {
		t.Fatalf("MIOpen reads %+v", rec.Entries)
	}
}

func TestParseNotesWhatItDoesNotUse(t *testing.T) {
	in := strings.Join([]string{
		"k1=A:1.5,0,algoA;B:0.5,16,algoB", // 1: fine
		"garbage without equals",          // 2
		"=A:1,0,x",                        // 3
		"k2=A:notanumber,0,x;B:2,0,algoB", // 4
		"k3=A:1,0,x;A:9,0,y",              // 5
		"k4=A:1,0",                        // 6: field count, and no usable entries
		"# comment",                       // 7: quiet
		"",                                // 8: quiet
		"k1=C:1,0,c",                      // 9: duplicate key
		"cut=A:1,0,x",                     // 10: no newline
	}, "\n")
	db := Parse("/some/dir/u.ufdb.txt", []byte(in))
	if got := string(db.Bytes()); got != in {
		t.Fatalf("not the identity: %q", got)
	}
	tests := []struct {
		key       string
		solvers   string
		firstTime float64
	}{
		{"k1", "A B", 1.5}, {"k2", "B", 2}, {"k3", "A", 1}, {"k4", "", 0},
	}
	for _, tt := range tests {
		r, ok := db.Lookup(tt.key)
		var names []string
		for _, e := range r.Entries {
			names = append(names, e.Solver)
		}
		if !ok || strings.Join(names, " ") != tt.solvers || len(r.Entries) > 0 && r.Entries[0].TimeMs != tt.firstTime {
			t.Errorf("%s: found=%v entries %+v, want solvers %q", tt.key, ok, r.Entries, tt.solvers)
		}
	}
	lines := map[int]string{}
	for _, w := range db.Warnings {
		lines[w.Line] += w.Msg + " | "
		if !strings.HasPrefix(w.String(), "u.ufdb.txt:") {
			t.Errorf("warning does not name the file: %s", w)
		}
	}
	for l, want := range map[int]string{2: "not a KEY", 3: "not a KEY", 4: "not understood", 5: "appears again", 6: "no usable entries", 9: "also on line 1", 10: "no line end"} {
		if !strings.Contains(lines[l], want) {
			t.Errorf("line %d: warnings %q lack %q", l, lines[l], want)
		}
	}
	for _, l := range []int{1, 7, 8} {
		if lines[l] != "" {
			t.Errorf("line %d warned: %s", l, lines[l])
		}
	}
	if s := Summary(db.Warnings, 2); len(s) != 3 || !strings.Contains(s[2], "more") {
		t.Errorf("summary %q", s)
	}
}

func TestBasename(t *testing.T) {
	for _, tt := range []struct {
		arch string
		cu   int
		want string
	}{
		{"gfx942", 304, "gfx942130"}, {"gfx90a", 110, "gfx90a6e"}, {"gfx90a", 104, "gfx90a68"},
		{"gfx908", 120, "gfx90878"}, {"gfx906", 60, "gfx906_60"}, {"gfx906", 64, "gfx906_64"},
	} {
		if got := Basename(tt.arch, tt.cu); got != tt.want {
			t.Errorf("Basename(%s, %d) = %s, want %s", tt.arch, tt.cu, got, tt.want)
		}
	}
	if got := UserFile("/d", "gfx942", 304, "hip"); got != filepath.Join("/d", "gfx942130.HIP.ufdb.txt") {
		t.Errorf("UserFile = %s", got)
	}
}
