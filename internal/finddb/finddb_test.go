package finddb

import (
	"miotool/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sharedDir(t *testing.T) string {
	t.Helper()
	return testutil.Shared(t)
}

func TestParseRealSystemFindDB(t *testing.T) {
	path := filepath.Join(sharedDir(t), "miopen-db", "gfx942130.HIP.fdb.txt")
	db, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Len() != 9600 {
		t.Fatalf("records = %d, want 9600", db.Len())
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
	// Every line survives a write/read round trip byte for byte.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(db.Bytes()); got != string(raw) {
		a, b := strings.Split(got, "\n"), strings.Split(string(raw), "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Fatalf("line %d differs:\n got %s\nwant %s", i+1, a[i], b[i])
			}
		}
		t.Fatalf("lengths differ: %d vs %d lines", len(a), len(b))
	}
}

func TestParseSkipsDamagedLines(t *testing.T) {
	in := strings.Join([]string{
		"k1=A:1.5,0,algoA;B:0.5,16,algoB",
		"garbage without equals",
		"=A:1,0,x",
		"k2=A:notanumber,0,x;B:2,0,algoB",
		"k3=A:1,0,x;A:9,0,y",
		"k4=A:1,0",
		"",
	}, "\n")
	db, err := Parse("u.ufdb.txt", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key     string
		want    int
		present bool
	}{
		{"k1", 2, true}, {"k2", 1, true}, {"k3", 1, true}, {"k4", 0, false},
	}
	for _, tt := range tests {
		r, ok := db.Lookup(tt.key)
		if ok != tt.present || len(r.Entries) != tt.want {
			t.Errorf("%s: present=%v entries=%d, want %v %d", tt.key, ok, len(r.Entries), tt.present, tt.want)
		}
	}
	if r, _ := db.Lookup("k3"); r.Entries[0].TimeMs != 1 {
		t.Errorf("duplicate id kept the later value: %+v", r.Entries)
	}
	lines := map[int]bool{}
	for _, w := range db.Warnings {
		lines[w.Line] = true
		if !strings.HasPrefix(w.String(), "u.ufdb.txt:") {
			t.Errorf("warning does not name the file: %s", w)
		}
	}
	for _, l := range []int{2, 3, 4, 6} {
		if !lines[l] {
			t.Errorf("no warning for line %d: %v", l, db.Warnings)
		}
	}
}

func TestStoreFileKeepsOtherRecordsAndIsAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db", "x.ufdb.txt")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("old=S:1,0,a\nbroken line\nkeep=S:2,0,a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	warns, err := StoreFile(path, Record{Key: "old", Entries: []Entry{{"T", 0.25, 8, "b"}}}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || warns[0].Line != 2 {
		t.Fatalf("warnings = %v, want one for line 2", warns)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old=T:0.25,8,b\nkeep=S:2,0,a\n" {
		t.Fatalf("file = %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

func TestStoreFileConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ufdb.txt")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "k" + string(rune('a'+i))
			if _, err := StoreFile(path, Record{Key: key, Entries: []Entry{{"S", float64(i), 0, "a"}}}, 10*time.Second); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Len() != 16 {
		t.Fatalf("records = %d, want 16", db.Len())
	}
}

func TestStoreFileUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root ignores permission bits; use a path under a regular file.
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := StoreFile(filepath.Join(f, "x.ufdb.txt"), Record{Key: "k", Entries: []Entry{{"S", 1, 0, "a"}}}, time.Second); err == nil {
			t.Fatal("want an error for a path under a regular file")
		}
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := StoreFile(filepath.Join(dir, "x.ufdb.txt"), Record{Key: "k", Entries: []Entry{{"S", 1, 0, "a"}}}, time.Second); err == nil {
		t.Fatal("want an error for a read-only folder")
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
}
